package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// fakeCall is one host function call a fakeHostCaller saw.
type fakeCall struct {
	fn   string
	args []hostArg
}

// fakeHostCaller answers host functions from a table of handlers; unknown functions
// fail with not_found.
type fakeHostCaller struct {
	calls    []fakeCall
	handlers map[string]func(args []hostArg) []byte
}

func (h *fakeHostCaller) call(fn string, a hostArgs) []byte {
	args := a.args[:a.n]
	h.calls = append(h.calls, fakeCall{fn, args})
	if f, ok := h.handlers[fn]; ok {
		return f(args)
	}
	return errBlock(abi.CodeNotFound, "no "+fn)
}

func (h *fakeHostCaller) count(fn string) int {
	n := 0
	for _, c := range h.calls {
		if c.fn == fn {
			n++
		}
	}
	return n
}

func okBlock(payload string) []byte { return append([]byte{plugin.ResultOK}, payload...) }

func errBlock(code abi.ErrorCode, msg string) []byte {
	b, _ := json.Marshal(abi.Errorf(code, "%s", msg))
	return append([]byte{plugin.ResultError}, b...)
}

// useHost makes h the package's host for the test.
func useHost(t *testing.T, h hostCaller) {
	old := host
	host = h
	t.Cleanup(func() { host = old })
}

func TestParseResult(t *testing.T) {
	for _, tc := range []struct {
		name    string
		block   []byte
		payload string
		code    abi.ErrorCode
		msg     string
	}{
		{"ok", okBlock("abc"), "abc", "", ""},
		{"ok empty", okBlock(""), "", "", ""},
		{"error", errBlock(abi.CodePermissionDenied, "no"), "", abi.CodePermissionDenied, "no"},
		{"error not JSON", append([]byte{plugin.ResultError}, "oops"...), "", abi.CodeInternal, "oops"},
		{"empty block", nil, "", abi.CodeInternal, "empty result block"},
		{"bad tag", []byte{7, 'x'}, "", abi.CodeInternal, "starts with 7"},
	} {
		got, err := parseResult("f", tc.block)
		if tc.code == "" {
			if err != nil || string(got) != tc.payload {
				t.Errorf("%s: = %q, %v", tc.name, got, err)
			}
			continue
		}
		var aerr *abi.Error
		if !errors.As(err, &aerr) || aerr.Code != tc.code || !strings.Contains(aerr.Message, tc.msg) {
			t.Errorf("%s: error = %v, want %s containing %q", tc.name, err, tc.code, tc.msg)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	state := []byte("null")
	h := &fakeHostCaller{handlers: map[string]func([]hostArg) []byte{
		plugin.FnStateGet: func([]hostArg) []byte { return okBlock(string(state)) },
		plugin.FnStateSet: func(a []hostArg) []byte { state = a[0].data; return okBlock("") },
	}}
	useHost(t, h)

	type S struct {
		Count int      `json:"count"`
		Names []string `json:"names,omitempty"`
	}
	s, err := State[S]()
	if err != nil || s.Count != 0 {
		t.Fatalf("State of null = %+v, %v", s, err)
	}
	if err := SetState(S{Count: 2, Names: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if string(state) != `{"count":2,"names":["a"]}` {
		t.Errorf("state = %s", state)
	}
	if s, err = State[S](); err != nil || s.Count != 2 || s.Names[0] != "a" {
		t.Errorf("State = %+v, %v", s, err)
	}
	m, err := State[map[string]any]()
	if err != nil || m["count"] != 2.0 {
		t.Errorf("State as a map = %v, %v", m, err)
	}
	// A state that does not decode into T is an internal error.
	if _, err := State[[]int](); err == nil || abi.AsError(err).Code != abi.CodeInternal {
		t.Errorf("State[[]int] error = %v", err)
	}
}

func TestHostErrorsPassThrough(t *testing.T) {
	useHost(t, &fakeHostCaller{handlers: map[string]func([]hostArg) []byte{
		plugin.FnSessionID: func([]hostArg) []byte { return errBlock(abi.CodeNoSession, "not bound to a session") },
	}})
	_, err := SessionID()
	var aerr *abi.Error
	if !errors.As(err, &aerr) || aerr.Code != abi.CodeNoSession {
		t.Errorf("SessionID error = %v, want no_session", err)
	}
	if _, err := Config("units"); abi.AsError(err).Code != abi.CodeNotFound {
		t.Errorf("Config error = %v", err)
	}
}

func TestNoHostOutsideAPlugin(t *testing.T) {
	useHost(t, noHost{})
	_, err := Messages()
	if err == nil || !strings.Contains(err.Error(), "only available in a plugin") {
		t.Errorf("Messages outside a plugin: %v", err)
	}
	Log(plugin.LogInfo, "dropped") // must not panic
}

func TestHostFunctionArguments(t *testing.T) {
	h := &fakeHostCaller{handlers: map[string]func([]hostArg) []byte{}}
	for _, fn := range []string{plugin.FnMessagesAppend, plugin.FnMessagesSet, plugin.FnArtifactAdd, plugin.FnStream, plugin.FnLog} {
		h.handlers[fn] = func([]hostArg) []byte { return okBlock("") }
	}
	h.handlers[plugin.FnMessagesGet] = func([]hostArg) []byte { return okBlock(`[{"role":"user","content":[{"text":"hi"}]}]`) }
	h.handlers[plugin.FnConfigGet] = func(a []hostArg) []byte { return okBlock("value of " + string(a[0].data)) }
	h.handlers[plugin.FnSecretGet] = func(a []hostArg) []byte { return okBlock("s3cret") }
	useHost(t, h)

	msgs, err := Messages()
	if err != nil || len(msgs) != 1 || msgs[0].Text() != "hi" {
		t.Errorf("Messages = %v, %v", msgs, err)
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Error(err)
		}
	}
	check(AppendMessages())
	check(AppendMessages(abi.NewModelTextMessage("yo")))
	check(SetMessages(nil))
	check(AddArtifact("report", []*abi.Part{abi.NewTextPart("body")}, map[string]any{"v": 1}))
	check(StreamChunk(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{abi.NewTextPart("x")}}))
	check(Status(map[string]any{"progress": 0.5}))
	Log(plugin.LogWarn, "careful")
	v, err := Config("units")
	if err != nil || v != "value of units" {
		t.Errorf("Config = %q, %v", v, err)
	}
	if v, err := Secret("KEY"); err != nil || v != "s3cret" {
		t.Errorf("Secret = %q, %v", v, err)
	}

	want := []struct{ fn, arg string }{
		{plugin.FnMessagesGet, ""},
		{plugin.FnMessagesAppend, `[]`},
		{plugin.FnMessagesAppend, `[{"role":"model","content":[{"text":"yo"}]}]`},
		{plugin.FnMessagesSet, `[]`},
		{plugin.FnArtifactAdd, `{"name":"report","parts":[{"text":"body"}],"metadata":{"v":1}}`},
		{plugin.FnStream, `{"role":"model","index":0,"content":[{"text":"x"}]}`},
		{plugin.FnStream, `{"progress":0.5}`},
		{plugin.FnLog, "careful"},
		{plugin.FnConfigGet, "units"},
		{plugin.FnSecretGet, "KEY"},
	}
	if len(h.calls) != len(want) {
		t.Fatalf("calls = %v", h.calls)
	}
	for i, w := range want {
		c := h.calls[i]
		var arg string
		if len(c.args) > 0 {
			arg = string(c.args[len(c.args)-1].data)
		}
		if c.fn != w.fn || arg != w.arg {
			t.Errorf("call %d = %s(%s), want %s(%s)", i, c.fn, arg, w.fn, w.arg)
		}
	}
	if c := h.calls[7]; !c.args[0].isNum || c.args[0].num != int64(plugin.LogWarn) {
		t.Errorf("log level arg = %+v", c.args[0])
	}

	if err := StreamChunk(nil); err == nil {
		t.Error("StreamChunk(nil) succeeded")
	}
	big := strings.Repeat("a", maxChunk)
	if err := Status(big); abi.AsError(err).Code != abi.CodeLimitExceeded {
		t.Errorf("a status over 1 MiB: %v", err)
	}
}

func TestHTTP(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 10_000) // 100 kB: several reads
	var sent []byte
	var reqHead plugin.HTTPRequest
	pos := 0
	h := &fakeHostCaller{handlers: map[string]func([]hostArg) []byte{
		plugin.FnHTTPRequest: func(a []hostArg) []byte {
			if err := json.Unmarshal(a[0].data, &reqHead); err != nil {
				return errBlock(abi.CodeInvalidInput, err.Error())
			}
			sent = a[1].data
			return okBlock(`{"handle":7,"status":200,"headers":{"content-type":"text/plain"}}`)
		},
		plugin.FnHTTPRead: func(a []hostArg) []byte {
			if a[0].num != 7 {
				return errBlock(abi.CodeNotFound, "no handle")
			}
			n := min(int(a[1].num), len(body)-pos, 20_000) // the host may return less
			pos += n
			return okBlock(string(body[pos-n : pos]))
		},
		plugin.FnHTTPClose: func(a []hostArg) []byte { return okBlock("") },
	}}
	useHost(t, h)

	resp, err := HTTP(&HTTPRequest{Method: "POST", URL: "https://api.example/x", Headers: map[string]string{"Authorization": "Bearer {{secret:KEY}}"}}, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || resp.Header["content-type"] != "text/plain" {
		t.Errorf("response head = %+v", resp)
	}
	if reqHead.Method != "POST" || reqHead.Headers["Authorization"] != "Bearer {{secret:KEY}}" || string(sent) != "payload" {
		t.Errorf("request = %+v, body %q", reqHead, sent)
	}
	// Small reads are served from what one http_read returned.
	small := make([]byte, 3)
	if n, err := resp.Body.Read(small); n != 3 || err != nil || string(small) != "012" {
		t.Errorf("first read = %d %v %q", n, err, small)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(append([]byte("012"), rest...), body) {
		t.Errorf("body: %d bytes, %v", len(rest)+3, err)
	}
	if got := h.count(plugin.FnHTTPClose); got != 1 {
		t.Errorf("reading to the end closed %d times, want 1", got)
	}
	if err := resp.Body.Close(); err != nil || h.count(plugin.FnHTTPClose) != 1 {
		t.Errorf("Close after EOF: %v, %d closes", err, h.count(plugin.FnHTTPClose))
	}
	for _, c := range h.calls {
		if c.fn == plugin.FnHTTPRead && c.args[1].num != httpReadSize {
			t.Errorf("http_read asked for %d bytes", c.args[1].num)
		}
	}

	// Closing early closes once; reading afterwards fails.
	pos = 0
	resp, err = HTTP(&HTTPRequest{Method: "GET", URL: "https://api.example/y"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sent != nil {
		t.Errorf("a nil body was sent as %q", sent)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if h.count(plugin.FnHTTPClose) != 2 {
		t.Errorf("closes = %d, want 2", h.count(plugin.FnHTTPClose))
	}
	if _, err := resp.Body.Read(small); err == nil {
		t.Error("read after Close succeeded")
	}

	// A host error while reading sticks.
	h.handlers[plugin.FnHTTPRead] = func([]hostArg) []byte { return errBlock(abi.CodeLimitExceeded, "body too large") }
	resp, _ = HTTP(&HTTPRequest{Method: "GET", URL: "https://api.example/z"}, nil)
	if _, err := io.ReadAll(resp.Body); abi.AsError(err).Code != abi.CodeLimitExceeded {
		t.Errorf("read error = %v, want limit_exceeded", err)
	}
}

func TestLogger(t *testing.T) {
	var lines []string
	var levels []int64
	useHost(t, &fakeHostCaller{handlers: map[string]func([]hostArg) []byte{
		plugin.FnLog: func(a []hostArg) []byte {
			levels = append(levels, a[0].num)
			lines = append(lines, string(a[1].data))
			return okBlock("")
		},
	}})
	l := Logger()
	l.Info("hello", "user", "ada", "n", 3)
	l.With("req", 7).WithGroup("g").Debug("inner", "k", "v w")
	l.Error("bare")
	want := []string{`hello user=ada n=3`, `inner req=7 g.k="v w"`, `bare`}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines = %q, want %q", lines, want)
	}
	if len(levels) != 3 || levels[0] != int64(slog.LevelInfo) || levels[1] != int64(plugin.LogDebug) || levels[2] != int64(plugin.LogError) {
		t.Errorf("levels = %v", levels)
	}
}
