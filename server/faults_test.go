package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/mcp"
	"github.com/terrarium-ai/terrarium/server"
)

// The fault injection of issue 27: a model plugin and a tool plugin (host/testdata's
// misbehave: its failer model, its fault tools) fail on purpose in every way, over
// every surface. After each failure the same session takes a successful turn; its
// history holds exactly the successful turns; each failed turn's snapshot carries the
// error; the server logs each failed turn once, without what the user said.

// fault is one way to fail, as the user asks for it: the failer model reads its
// message, and calls the tool named with the input given.
type fault struct {
	say  string
	code abi.ErrorCode
	// model or tool names what failed.
	model, tool string
}

var faults = []fault{
	{say: "model error", code: abi.CodeUnavailable, model: "misbehave/failer"},
	{say: "model invalid", code: abi.CodeInvalidInput, model: "misbehave/failer"},
	{say: "model trap", code: abi.CodeInternal, model: "misbehave/failer"},
	{say: "model timeout", code: abi.CodeLimitExceeded, model: "misbehave/failer"},
	{say: "model badjson", code: abi.CodeInternal, model: "misbehave/failer"},
	{say: `call misbehave/returns {"error": "{\"code\": \"invalid_input\", \"message\": \"n must be even\"}", "rc": 1}`, code: abi.CodeInvalidInput, tool: "misbehave/returns"},
	{say: `call misbehave/panic {}`, code: abi.CodeInternal, tool: "misbehave/panic"},
	{say: `call misbehave/sleep {}`, code: abi.CodeLimitExceeded, tool: "misbehave/sleep"},
	{say: `call misbehave/badjson {}`, code: abi.CodeInternal, tool: "misbehave/badjson"},
	{say: `call misbehave/ok [1]`, code: abi.CodeInvalidInput, tool: "misbehave/ok"},
}

// faultyServer serves two agents on the misbehave plugin: strict (toolErrors: fail)
// and lenient (the default: the model hears of a tool's failure), keeping their
// sessions in memory. It returns the server and its log.
func faultyServer(t *testing.T) (*testServer, *lockedBuffer) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the misbehave plugin")
	}
	misbehave, _ := filepath.Abs("../host/testdata/misbehave")
	tools := "[misbehave/ok, misbehave/panic, misbehave/error, misbehave/sleep, misbehave/badjson, misbehave/returns]"
	plugin := "plugins:\n  - path: " + misbehave + "\n    grants: {timeout: 2s, maxInstances: 4}\n"
	agents := map[string]string{
		"strict.yaml":  "name: strict\nmodel: {name: misbehave/failer}\ntools: " + tools + "\ntoolErrors: fail\nsnapshots: {store: memory}\n" + plugin,
		"lenient.yaml": "name: lenient\nmodel: {name: misbehave/failer}\ntools: " + tools + "\nsnapshots: {store: memory}\n" + plugin,
	}
	log := &lockedBuffer{}
	ts := newServerOf(t, agents, nil, server.WithLogger(slog.New(slog.NewJSONHandler(log, nil))))
	return ts, log
}

// lockedBuffer is a log's buffer, safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// outcome is how a turn ended, as a surface shows it.
type outcome struct {
	text    string
	failure *session.TurnError // nil for a successful turn
}

// surface runs turns of one session of an agent.
type surface interface {
	turn(t *testing.T, text string) outcome
	session() string
}

func TestEveryFaultIsATurnsOutcomeOnEverySurface(t *testing.T) {
	ts, log := faultyServer(t)
	for name, open := range map[string]func(t *testing.T) surface{
		"in-process": func(t *testing.T) surface { return inProcess(t, ts, "strict") },
		"http+sse": func(t *testing.T) surface {
			return &sseSurface{ts: ts, agent: "strict", id: ts.newSession(t, "strict", nil)}
		},
		"websocket": func(t *testing.T) surface { return &wsSurface{w: dialWS(t, ts, "strict", "")} },
		"openai":    func(t *testing.T) surface { return &openAISurface{ts: ts, agent: "strict"} },
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			var want []string
			for i, f := range faults {
				got := s.turn(t, f.say)
				if got.failure == nil || got.failure.Code != f.code || got.failure.Model != f.model || got.failure.Tool != f.tool {
					t.Errorf("%q: %+v (%+v), want a failed turn with code %s, model %q, tool %q", f.say, got, got.failure, f.code, f.model, f.tool)
				}
				hello := fmt.Sprintf("hello %d", i)
				if got := s.turn(t, hello); got.failure != nil || got.text != "ok: "+hello {
					t.Fatalf("the turn after %q: %+v (%+v)", f.say, got, got.failure)
				}
				want = append(want, hello, "ok: "+hello)
			}
			checkHistory(t, ts, "strict", s.session(), want, len(faults))
			if name == "in-process" {
				return // the server logs the turns it serves
			}
			// One line per failed turn in the log, naming the session and what failed,
			// never what the user said.
			lines := failedTurnLines(t, log, s.session())
			if len(lines) != len(faults) {
				t.Errorf("%d failed turns logged, want %d", len(lines), len(faults))
			}
			for i, l := range lines {
				f := faults[min(i, len(faults)-1)]
				if l["code"] != string(f.code) || l["agent"] != "strict" || l["snapshot"] == "" || l["duration"] == nil ||
					(f.model != "" && l["model"] != f.model) || (f.tool != "" && l["tool"] != f.tool) {
					t.Errorf("log line %d = %v, want code %s, model %q, tool %q", i, l, f.code, f.model, f.tool)
				}
			}
		})
	}
	if strings.Contains(log.String(), "hello") || strings.Contains(log.String(), "n must be even") {
		t.Errorf("the log holds what the user or a tool said:\n%s", log)
	}
}

// A session whose first turn failed is kept: closed and reopened by its ID (as after
// an idle timeout or a restart), it goes on from its start, not 404 session_not_found.
func TestFirstTurnFailureKeepsTheSessionOverHTTP(t *testing.T) {
	ts, _ := faultyServer(t)
	s := &sseSurface{ts: ts, agent: "strict", id: ts.newSession(t, "strict", nil)}
	if got := s.turn(t, "model error"); got.failure == nil || got.failure.Code != abi.CodeUnavailable {
		t.Fatalf("the first turn: %+v", got)
	}
	if resp := ts.do(t, "DELETE", "/api/agents/strict/sessions/"+s.id, nil, nil); resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		t.Fatalf("closing the session: %d", resp.StatusCode)
	}
	if got := s.turn(t, "hello"); got.failure != nil || got.text != "ok: hello" {
		t.Fatalf("the turn after reopening: %+v (%+v)", got, got.failure)
	}
	checkHistory(t, ts, "strict", s.id, []string{"hello", "ok: hello"}, 1)
}

// Under the default policy the model hears of a failing tool and answers: no turn
// fails, and the tool's own code reaches the model.
func TestToolFaultsReachTheModelByDefault(t *testing.T) {
	ts, _ := faultyServer(t)
	s := &sseSurface{ts: ts, agent: "lenient", id: ts.newSession(t, "lenient", nil)}
	for _, f := range faults {
		if f.tool == "" {
			continue
		}
		got := s.turn(t, f.say)
		if got.failure != nil || !strings.HasPrefix(got.text, "tool said: ") || !strings.Contains(got.text, `"code":"`+string(f.code)+`"`) {
			t.Errorf("%q: %+v (%+v), want the model told code %s", f.say, got, got.failure, f.code)
		}
	}
}

// MCP serves the plugin's tools: each fault is a tool error (isError) with its code,
// and the server goes on.
func TestToolFaultsOverMCP(t *testing.T) {
	ts, _ := faultyServer(t)
	tools, err := mcp.RegistryTools(ts.dep.Registry(), "misbehave/*")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.NewServer(tools)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler(nil))
	defer hs.Close()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), &mcpsdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args any) (*mcpsdk.CallToolResult, abi.Error) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var e abi.Error
		b, _ := json.Marshal(res.Meta[mcp.ErrorMetaKey])
		json.Unmarshal(b, &e)
		return res, e
	}
	for _, tc := range []struct {
		tool string
		args any
		code abi.ErrorCode
	}{
		{"misbehave_returns", map[string]any{"error": `{"code": "invalid_input", "message": "n must be even"}`, "rc": 1}, abi.CodeInvalidInput},
		{"misbehave_panic", map[string]any{}, abi.CodeInternal},
		{"misbehave_sleep", map[string]any{}, abi.CodeLimitExceeded},
		{"misbehave_badjson", map[string]any{}, abi.CodeInternal},
		{"misbehave_ok", []any{1}, abi.CodeInvalidInput},
	} {
		if res, e := call(tc.tool, tc.args); !res.IsError || e.Code != tc.code {
			t.Errorf("%s: isError %v, %+v, want code %s", tc.tool, res.IsError, e, tc.code)
		}
		if res, _ := call("misbehave_ok", map[string]any{}); res.IsError {
			t.Errorf("misbehave_ok after %s: %+v", tc.tool, res)
		}
	}
}

// checkHistory checks that a session's latest snapshot holds exactly the texts of its
// successful turns, and that it recorded failures failed snapshots, each with its
// error.
func checkHistory(t *testing.T, ts *testServer, agent, id string, want []string, failures int) {
	t.Helper()
	var info server.SessionInfo
	if resp := ts.do(t, "GET", "/api/agents/"+agent+"/sessions/"+id, nil, &info); resp.StatusCode != http.StatusOK || info.Snapshot == nil {
		t.Fatalf("the session: %d %+v", resp.StatusCode, info)
	}
	var got []string
	for _, m := range info.Snapshot.State.Messages {
		got = append(got, m.Text())
	}
	if !slices.Equal(got, want) {
		t.Errorf("history %q, want exactly the successful turns %q", got, want)
	}
	var snaps struct {
		Snapshots []*session.SessionSnapshot[json.RawMessage]
	}
	ts.do(t, "GET", "/api/agents/"+agent+"/sessions/"+id+"/snapshots", nil, &snaps)
	failed := 0
	for _, s := range snaps.Snapshots {
		if s.Status == session.StatusFailed {
			failed++
			if s.Error == nil || s.Error.Code == "" || s.Error.Message == "" || s.FinishReason != session.FinishFailed {
				t.Errorf("failed snapshot %s carries %+v", s.SnapshotID, s.Error)
			}
		}
	}
	if failed != failures {
		t.Errorf("%d failed snapshots, want %d", failed, failures)
	}
}

// failedTurnLines are the log's "turn failed" lines of a session.
func failedTurnLines(t *testing.T, log *lockedBuffer, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "turn failed" && m["session"] == id {
			out = append(out, m)
		}
	}
	return out
}

// inProcessSurface runs turns through the agent's flow, as an application embedding
// Terrarium does.
type inProcessSurface struct {
	conn session.AnyConnection
}

func inProcess(t *testing.T, ts *testServer, agent string) *inProcessSurface {
	a, err := ts.dep.Agent(agent)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := a.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); conn.Output() })
	return &inProcessSurface{conn: conn}
}

func (s *inProcessSurface) session() string { return s.conn.SessionID() }

func (s *inProcessSurface) turn(t *testing.T, text string) outcome {
	t.Helper()
	if err := s.conn.Send(&session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(text)}}); err != nil {
		t.Fatal(err)
	}
	var o outcome
	for c, err := range s.conn.Receive() {
		if c == nil {
			t.Fatalf("%q: the connection ended: %v", text, err)
		}
		o.add(c)
	}
	return o
}

// add takes a chunk of a turn into its outcome.
func (o *outcome) add(c *session.AnyChunk) {
	if c.Chunk != nil && c.Chunk.Role == abi.RoleModel {
		o.text += c.Chunk.Text()
	}
	if c.EndTurn && c.FinishReason == session.FinishFailed {
		o.failure = c.Error
	}
}

// sseSurface runs turns over the HTTP API, streamed as server-sent events.
type sseSurface struct {
	ts        *testServer
	agent, id string
}

func (s *sseSurface) session() string { return s.id }

func (s *sseSurface) turn(t *testing.T, text string) outcome {
	t.Helper()
	resp, events := s.ts.streamTurn(t, s.agent, s.id, map[string]any{"text": text})
	if resp.StatusCode != http.StatusOK || len(events) == 0 {
		t.Fatalf("%q: %d, %d events", text, resp.StatusCode, len(events))
	}
	var o outcome
	for _, e := range events {
		var c session.AnyChunk
		if e.name != "" || json.Unmarshal([]byte(e.data), &c) != nil {
			t.Fatalf("%q: event %s %s", text, e.name, e.data)
		}
		o.add(&c)
	}
	if last := events[len(events)-1]; !strings.Contains(last.data, `"endTurn":true`) {
		t.Errorf("%q: the stream ended with %s, not the turn's end", text, last.data)
	}
	return o
}

// wsSurface runs turns over a WebSocket, which must stay open.
type wsSurface struct {
	w *wsClient
}

func (s *wsSurface) session() string { return s.w.sessionID }

func (s *wsSurface) turn(t *testing.T, text string) outcome {
	t.Helper()
	s.w.send(t, map[string]any{"text": text})
	var o outcome
	for {
		m := s.w.next(t)
		if m.Type != "chunk" {
			t.Fatalf("%q: %s %+v", text, m.Type, m.Error)
		}
		o.add(m.Chunk)
		if m.Chunk.EndTurn {
			return o
		}
	}
}

// openAISurface runs turns as chat completions continuing one session, as an OpenAI
// client does with the session header.
type openAISurface struct {
	ts        *testServer
	agent, id string
}

func (s *openAISurface) session() string { return s.id }

func (s *openAISurface) turn(t *testing.T, text string) outcome {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": s.agent, "messages": []any{map[string]any{"role": "user", "content": text}}})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.ts.URL+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if s.id != "" {
		req.Header.Set(server.SessionHeader, s.id)
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if id := resp.Header.Get(server.SessionHeader); s.id == "" {
		s.id = id
	} else if id != s.id {
		t.Fatalf("%q: answered for session %q, not %q", text, id, s.id)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Error *struct {
			Message, Type string
			Code          abi.ErrorCode
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	switch {
	case resp.StatusCode == http.StatusOK && len(out.Choices) == 1:
		return outcome{text: out.Choices[0].Message.Content}
	case resp.StatusCode == http.StatusInternalServerError && out.Error != nil && out.Error.Type == "server_error" && out.Error.Message != "":
		// OpenAI's error object does not name what failed: the session's snapshot does.
		var info server.SessionInfo
		s.ts.do(t, "GET", "/api/agents/"+s.agent+"/sessions/"+s.id, nil, &info)
		if info.Snapshot == nil || info.Snapshot.Error == nil || info.Snapshot.Error.Code != out.Error.Code {
			t.Fatalf("%q: answered %+v, but the session's snapshot is %+v", text, out.Error, info.Snapshot)
		}
		return outcome{failure: info.Snapshot.Error}
	}
	t.Fatalf("%q: %d %+v", text, resp.StatusCode, out)
	return outcome{}
}
