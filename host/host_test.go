package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/extismengine"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// wasm builds a plugin once per test binary and reads it.
var (
	wasmMu    sync.Mutex
	wasmCache = map[string][]byte{}
)

func wasm(t *testing.T, dir string) []byte {
	t.Helper()
	wasmMu.Lock()
	defer wasmMu.Unlock()
	if b, ok := wasmCache[dir]; ok {
		return b
	}
	b := pluginbuild.WasmForTest(t, dir)
	wasmCache[dir] = b
	return b
}

// newHost returns a host over a fresh registry, closed with the test. Compiled modules
// are cached in the user's cache directory (the default), shared by every test.
func newHost(t *testing.T, opts ...host.Option) (*host.Host, *agent.Registry) {
	t.Helper()
	r := agent.NewRegistry()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := host.New(r, append([]host.Option{host.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h, r
}

// engines are the engines the fault and hardening tests run on: the host's own, and
// Extism's, the reference it is tested against.
var engines = []struct {
	name   string
	engine host.Engine
}{
	{"native", host.NativeEngine()},
	{"extism", extismengine.New()},
}

// forEachEngine runs test once per engine, as a subtest named after it, with the
// option that selects it.
func forEachEngine(t *testing.T, test func(t *testing.T, engine host.Option)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { test(t, host.WithEngine(e.engine)) })
	}
}

func load(t *testing.T, h *host.Host, dir string, m host.Manifest) *host.Plugin {
	t.Helper()
	p, err := h.Load(context.Background(), wasm(t, dir), m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFirstPartyPluginsRegister(t *testing.T) {
	h, r := newHost(t)
	for _, name := range []string{"calculator", "clock", "scratchpad", "profile", "offline"} {
		p := load(t, h, "../plugins/"+name, host.Manifest{State: plugin.StateWrite})
		if p.Name() != name || p.Descriptor().ABI != plugin.Version || len(p.SHA256()) != 64 || p.Size() == 0 {
			t.Errorf("%s: %+v", name, p.Descriptor())
		}
	}
	var keys []string
	for _, d := range r.Actions() {
		keys = append(keys, d.Key)
	}
	want := []string{
		"/handler/profile/extract",
		"/model/offline/echo",
		"/tool/calculator/calc",
		"/tool/clock/now",
		"/tool/scratchpad/note",
		"/tool/scratchpad/notes",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("registry = %v\nwant       %v", keys, want)
	}
	calc, _ := r.LookupTool("calculator/calc")
	if calc.Definition().InputSchema["type"] != "object" {
		t.Errorf("calc schema = %v", calc.Definition().InputSchema)
	}
	if err := h.Plugin("clock").Unload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.Lookup("/tool/clock/now") != nil || h.Plugin("clock") != nil {
		t.Error("unload left the tool registered")
	}
}

func TestPluginToolAndModelInGenerate(t *testing.T) {
	h, r := newHost(t)
	load(t, h, "../plugins/calculator", host.Manifest{})
	load(t, h, "../plugins/offline", host.Manifest{})
	m := testmodel.Define(r, "test/m").
		Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "calculator/calc", Ref: "c", Input: map[string]any{"expression": "6*7"}})).
		ReplyText("42")
	resp, err := agent.Generate(context.Background(), r, agent.WithModel(m), agent.WithPrompt("6*7?"), agent.WithToolNames("calculator/calc"))
	if err != nil {
		t.Fatal(err)
	}
	out := m.LastRequest().Messages[2].Content[0].ToolResponse.Output.(map[string]any)
	if out["value"] != 42.0 || resp.Text() != "42" {
		t.Errorf("tool output = %v", out)
	}
	// Invalid input is refused before the plugin runs; a plugin error names the plugin.
	m.Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "calculator/calc", Ref: "c", Input: map[string]any{"expression": "1/0"}}))
	_, err = agent.Generate(context.Background(), r, agent.WithModel(m), agent.WithPrompt("x"), agent.WithToolNames("calculator/calc"))
	var ce *host.CallError
	var ae *abi.Error
	if !errors.As(err, &ce) || ce.Plugin != "calculator" || ce.Export != plugin.ExportCallTool || !errors.As(err, &ae) || ae.Code != abi.CodeInvalidInput {
		t.Errorf("plugin error = %v", err)
	}

	// The offline model streams its answer word by word.
	var chunks []string
	for v, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("offline/echo"), agent.WithPrompt("hello plugin world")) {
		if err != nil {
			t.Fatal(err)
		}
		if !v.Done {
			chunks = append(chunks, v.Chunk.Text())
		} else if v.Response.Text() != "echo: hello plugin world" {
			t.Errorf("final = %q", v.Response.Text())
		}
	}
	if len(chunks) < 3 || strings.Join(chunks, "") != "echo: hello plugin world" {
		t.Errorf("chunks = %q", chunks)
	}
}

// Notes is the state of the scratchpad tests.
type Notes struct {
	Scratchpad []string `json:"scratchpad,omitempty"`
	Profile    *Profile `json:"profile,omitempty"`
}

// Profile is what the profile handler extracts.
type Profile struct {
	Name  string   `json:"name,omitempty"`
	City  string   `json:"city,omitempty"`
	Likes []string `json:"likes,omitempty"`
}

func TestPluginToolChangesStateInAgentTurnSnapshot(t *testing.T) {
	h, r := newHost(t)
	load(t, h, "../plugins/scratchpad", host.Manifest{State: plugin.StateWrite})
	load(t, h, "../plugins/profile", host.Manifest{State: plugin.StateWrite})
	handler, err := r.LookupHandler("profile/extract")
	if err != nil {
		t.Fatal(err)
	}
	testmodel.Define(r, "test/notes").
		Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "scratchpad/note", Ref: "n1", Input: map[string]any{"text": "buy milk"}})).
		ReplyText("Noted.")
	snaps := session.NewInMemorySnapshotStore[Notes]()
	a := session.DefineAgent[map[string]any, Notes](r, "notes",
		session.WithGenerateOpts[Notes](agent.WithModelName("test/notes"), agent.WithToolNames("scratchpad/note")),
		session.WithHandlers[Notes](handler),
		session.WithSnapshotStore(snaps))
	conn, err := a.StreamBidi(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	conn.SendText("My name is Ada and I live in Lisbon. Remember to buy milk.")
	var snapshot string
	var statuses []map[string]any
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.SnapshotCreated != "" {
			snapshot = c.SnapshotCreated
		}
		if c.Status != nil {
			statuses = append(statuses, c.Status)
		}
	}
	conn.Close()
	if _, err := conn.Output(); err != nil {
		t.Fatal(err)
	}
	snap, err := snaps.GetSnapshot(context.Background(), snapshot)
	if err != nil {
		t.Fatal(err)
	}
	st := snap.State.Custom
	if !slices.Equal(st.Scratchpad, []string{"buy milk"}) || st.Profile == nil || st.Profile.Name != "Ada" || st.Profile.City != "Lisbon" {
		t.Errorf("snapshot state = %+v (profile %+v)", st, st.Profile)
	}
	if len(statuses) == 0 {
		t.Error("the profile handler's status did not reach the client")
	}
}

// hostcheck calls one tool of the hostcheck plugin and returns its result.
type result struct {
	OK    any        `json:"ok"`
	Error *abi.Error `json:"error"`
}

func call(t *testing.T, ctx context.Context, r *agent.Registry, tool string, input any) result {
	t.Helper()
	tl, err := r.LookupTool("hostcheck/" + tool)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tl.Run(ctx, input)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var res result
	b, _ := json.Marshal(out)
	json.Unmarshal(b, &res)
	return res
}

// TestPluginToolContent checks that the content parts a plugin's tool answers with
// reach the model as the tool response's content.
func TestPluginToolContent(t *testing.T) {
	h, r := newHost(t)
	load(t, h, "testdata/hostcheck", host.Manifest{})
	model := testmodel.Define(r, "test/model")
	model.Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "hostcheck/picture", Ref: "c1", Input: map[string]any{"text": "A red square."}}))
	model.ReplyText("seen")
	if _, err := agent.Generate(context.Background(), r, agent.WithModelName("test/model"), agent.WithPrompt("draw"), agent.WithToolNames("hostcheck/picture")); err != nil {
		t.Fatal(err)
	}
	msgs := model.LastRequest().Messages
	got, _ := json.Marshal(msgs[len(msgs)-1])
	want := `{"role":"tool","content":[{"toolResponse":{"ref":"c1","name":"hostcheck/picture","output":"drawn","content":[` +
		`{"text":"A red square."},{"media":{"url":"data:image/png;base64,iVBORw0KGgo=","contentType":"image/png"}}]}}]}`
	if string(got) != want {
		t.Errorf("the tool message the model got = %s\nwant %s", got, want)
	}
}

func wantCode(t *testing.T, what string, res result, code abi.ErrorCode) {
	t.Helper()
	if res.Error == nil || res.Error.Code != code {
		t.Errorf("%s: got %+v, want error %s", what, res, code)
	}
}

func wantOK(t *testing.T, what string, res result) any {
	t.Helper()
	if res.Error != nil {
		t.Errorf("%s: %v", what, res.Error)
	}
	return res.OK
}

// withSession runs fn inside a session flow turn, where the host functions reach the
// session.
func withSession[State any](t *testing.T, state State, fn func(ctx context.Context, s *session.Session[State])) (*session.SessionFlowOutput[State], []any) {
	t.Helper()
	flow := session.DefineSessionFlow(agent.NewRegistry(), "probe",
		func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[any], p *session.SessionFlowParams[any, State]) error {
			for range inCh {
				fn(ctx, p.Session)
				if err := resp.EndTurn(); err != nil {
					return err
				}
			}
			return nil
		})
	conn, err := flow.StreamBidi(context.Background(), session.WithState(&session.SessionState[State]{Custom: state}))
	if err != nil {
		t.Fatal(err)
	}
	go conn.Send(&session.SessionFlowInput{})
	var statuses []any
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != nil {
			statuses = append(statuses, c.Status)
		}
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	return out, statuses
}

// Probe is the state of the host function tests.
type Probe struct {
	Count int    `json:"count"`
	Label string `json:"label,omitempty"`
}

func TestHostFunctionsStateGrants(t *testing.T) {
	for _, access := range []plugin.StateAccess{plugin.StateNone, plugin.StateRead, plugin.StateWrite} {
		t.Run(string(access), func(t *testing.T) {
			h, r := newHost(t)
			load(t, h, "testdata/hostcheck", host.Manifest{State: access})
			canRead, canWrite := access != plugin.StateNone, access == plugin.StateWrite
			out, _ := withSession(t, Probe{Count: 1}, func(ctx context.Context, s *session.Session[Probe]) {
				check := func(what string, allowed bool, res result) {
					t.Helper()
					if allowed {
						wantOK(t, what, res)
					} else {
						wantCode(t, what, res, abi.CodePermissionDenied)
					}
				}
				res := call(t, ctx, r, "session_id", map[string]any{})
				check("session_id", canRead, res)
				if canRead && res.OK != s.ID() {
					t.Errorf("session_id = %v, want %s", res.OK, s.ID())
				}
				res = call(t, ctx, r, "state_get", map[string]any{})
				check("state_get", canRead, res)
				if canRead && res.OK.(map[string]any)["count"] != 1.0 {
					t.Errorf("state_get = %v", res.OK)
				}
				check("state_set", canWrite, call(t, ctx, r, "state_set", map[string]any{"value": map[string]any{"count": 2, "label": "set by plugin"}}))
				if canWrite {
					// A state the app's type cannot hold is refused, and changes nothing.
					wantCode(t, "state_set unknown field", call(t, ctx, r, "state_set", map[string]any{"value": map[string]any{"count": 3, "nope": true}}), abi.CodeInvalidInput)
					wantCode(t, "state_set wrong type", call(t, ctx, r, "state_set", map[string]any{"value": map[string]any{"count": "three"}}), abi.CodeInvalidInput)
				}
				s.AddMessages(abi.NewUserTextMessage("hi"))
				res = call(t, ctx, r, "messages_get", map[string]any{})
				check("messages_get", canRead, res)
				if canRead && len(res.OK.([]any)) != 1 {
					t.Errorf("messages_get = %v", res.OK)
				}
				check("messages_append", canWrite, call(t, ctx, r, "messages_append", map[string]any{"messages": []any{map[string]any{"role": "model", "content": []any{map[string]any{"text": "appended"}}}}}))
				check("artifact_add", canWrite, call(t, ctx, r, "artifact_add", map[string]any{"text": "an artifact"}))
			})
			if canWrite {
				if out.State.Custom != (Probe{Count: 2, Label: "set by plugin"}) || len(out.State.Messages) != 2 || out.State.Messages[1].Text() != "appended" || len(out.State.Artifacts) != 1 {
					t.Errorf("state after writes = %+v", out.State)
				}
			} else if out.State.Custom != (Probe{Count: 1}) || len(out.State.Messages) != 1 || len(out.State.Artifacts) != 0 {
				t.Errorf("state changed without write access: %+v", out.State)
			}
			// messages_set replaces the conversation.
			if canWrite {
				out, _ = withSession(t, Probe{}, func(ctx context.Context, s *session.Session[Probe]) {
					s.AddMessages(abi.NewUserTextMessage("old"))
					wantOK(t, "messages_set", call(t, ctx, r, "messages_set", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"text": "new"}}}}}))
				})
				if len(out.State.Messages) != 1 || out.State.Messages[0].Text() != "new" {
					t.Errorf("messages_set: %v", out.State.Messages)
				}
			}
			// Outside a session the state functions say so.
			if canRead {
				wantCode(t, "state_get outside a session", call(t, context.Background(), r, "state_get", map[string]any{}), abi.CodeNoSession)
			}
			if canRead {
				wantCode(t, "session_id outside a session", call(t, context.Background(), r, "session_id", map[string]any{}), abi.CodeNoSession)
			}
		})
	}
}

func TestHostFunctionsConfigSecretsStatusLog(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, r := newHost(t, host.WithLogger(logger))
	load(t, h, "testdata/hostcheck", host.Manifest{
		Config:  map[string]string{"greeting": "hello"},
		Secrets: map[string]host.Secret{"TOKEN": {Value: "s3cret"}, "OPEN": {Value: "visible", Readable: true}},
	})
	ctx := context.Background()
	if v := wantOK(t, "config", call(t, ctx, r, "config", map[string]any{"text": "greeting"})); v != "hello" {
		t.Errorf("config = %v", v)
	}
	wantCode(t, "config not granted", call(t, ctx, r, "config", map[string]any{"text": "other"}), abi.CodePermissionDenied)
	wantCode(t, "secret not readable", call(t, ctx, r, "secret", map[string]any{"text": "TOKEN"}), abi.CodePermissionDenied)
	wantCode(t, "secret not granted", call(t, ctx, r, "secret", map[string]any{"text": "NOPE"}), abi.CodePermissionDenied)
	if v := wantOK(t, "readable secret", call(t, ctx, r, "secret", map[string]any{"text": "OPEN"})); v != "visible" {
		t.Errorf("secret = %v", v)
	}
	_, statuses := withSession(t, Probe{}, func(ctx context.Context, s *session.Session[Probe]) {
		wantOK(t, "status", call(t, ctx, r, "status", map[string]any{"value": map[string]any{"progress": 50}}))
		wantOK(t, "log", call(t, ctx, r, "log", map[string]any{"text": "from the plugin"}))
	})
	if len(statuses) != 1 || statuses[0].(map[string]any)["progress"] != 50.0 {
		t.Errorf("statuses = %v", statuses)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="plugin log" plugin=hostcheck message="from the plugin" session=`) {
		t.Errorf("log = %s", logs.String())
	}
	// Outside a session flow a status goes nowhere, without error.
	wantOK(t, "status outside a flow", call(t, ctx, r, "status", map[string]any{"value": 1}))
}

func TestHostFunctionsHTTP(t *testing.T) {
	var seenAuth string
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, req *http.Request) {
		seenAuth = req.Header.Get("Authorization")
		body := new(bytes.Buffer)
		body.ReadFrom(req.Body)
		w.Header().Set("X-Echo", req.Method+" "+body.String())
		fmt.Fprint(w, "hello from the server")
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, req *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "data: part %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, req *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 10_000))
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "http://localhost:1/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/around", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/hello", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	h, r := newHost(t)
	load(t, h, "testdata/hostcheck", host.Manifest{
		HTTP:             []string{strings.TrimPrefix(srv.URL, "http://")},
		Secrets:          map[string]host.Secret{"TOKEN": {Value: "s3cret"}},
		MaxResponseBytes: 5_000,
	})
	ctx := context.Background()
	res := call(t, ctx, r, "http", map[string]any{"url": srv.URL + "/hello", "method": "post", "body": "ping",
		"headers": map[string]string{"Authorization": "Bearer {{secret:TOKEN}}"}})
	got, _ := wantOK(t, "http", res).(map[string]any)
	if got["status"] != 200.0 || got["body"] != "hello from the server" || got["headers"].(map[string]any)["x-echo"] != "POST ping" {
		t.Errorf("http = %v", got)
	}
	if seenAuth != "Bearer s3cret" {
		t.Errorf("the secret was not injected: %q", seenAuth)
	}
	// The body is readable piece by piece: 42 bytes in pieces of at most 8 take six
	// reads, however the parts arrived.
	res = call(t, ctx, r, "http", map[string]any{"url": srv.URL + "/stream", "piece": 8})
	if got, _ := wantOK(t, "stream", res).(map[string]any); got["reads"].(float64) < 6 || !strings.Contains(got["body"].(string), "data: part 0\n\ndata: part 1\n\ndata: part 2") {
		t.Errorf("stream = %v", got)
	}
	// A redirect within granted hosts is followed; one out of them is refused.
	if got, _ := wantOK(t, "redirect", call(t, ctx, r, "http", map[string]any{"url": srv.URL + "/around"})).(map[string]any); got["body"] != "hello from the server" {
		t.Errorf("redirect = %v", got)
	}
	wantCode(t, "redirect to an ungranted host", call(t, ctx, r, "http", map[string]any{"url": srv.URL + "/away"}), abi.CodePermissionDenied)
	wantCode(t, "ungranted host", call(t, ctx, r, "http", map[string]any{"url": strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/hello"}), abi.CodePermissionDenied)
	wantCode(t, "ungranted secret", call(t, ctx, r, "http", map[string]any{"url": srv.URL + "/hello", "headers": map[string]string{"X": "{{secret:OTHER}}"}}), abi.CodePermissionDenied)
	wantCode(t, "not http", call(t, ctx, r, "http", map[string]any{"url": "file:///etc/passwd"}), abi.CodeInvalidInput)
	wantCode(t, "body over the limit", call(t, ctx, r, "http", map[string]any{"url": srv.URL + "/big"}), abi.CodeLimitExceeded)
	wantCode(t, "too many open responses", call(t, ctx, r, "http_leak", map[string]any{"url": srv.URL + "/hello"}), abi.CodeLimitExceeded)
	// The leaked responses were closed with the call: the next call works.
	wantOK(t, "after a leak", call(t, ctx, r, "http", map[string]any{"url": srv.URL + "/hello"}))
}

// benchWasm is wasm for benchmarks.
func benchWasm(b *testing.B, dir string) []byte {
	b.Helper()
	return pluginbuild.WasmForTest(b, dir)
}

// bareCacheDir is the compilation cache of the bare Extism benchmarks: an entry of the
// host's default cache directory, evicted with the host's entries.
func bareCacheDir(b *testing.B) string {
	base, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(base, "terrarium", "compiled", "bench-extism-bare")
}
