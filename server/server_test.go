package server_test

import (
	"bufio"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/server"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// gate is a model that blocks each call until released, so a test can hold a turn
// running.
type gate struct {
	started chan struct{}
	release chan struct{}
	// inFlight counts test/stubborn's running calls, overlaps the calls that found
	// another running.
	inFlight, overlaps atomic.Int32
}

// testAgents are agents over native models: echo (kept in Badger, with askUser),
// gate (a model that waits to be released), client (its clients keep the state) and
// flights, a routed agent (kept in Badger; see routed_test.go).
var testAgents = map[string]string{
	"echo.yaml":     "name: echo\ndescription: Echoes.\nmodel: {name: test/echo}\ntools: [askUser, upper, note]\n",
	"gate.yaml":     "name: gate\nmodel: {name: test/gate}\nsnapshots: {store: memory}\n",
	"stubborn.yaml": "name: stubborn\nmodel: {name: test/stubborn}\nsnapshots: {store: memory}\n",
	"client.yaml":   "name: client\nmodel: {name: test/echo}\nsnapshots: {store: none}\n",
	"flights.yaml":  flightsAgent,
}

// testRegistry defines the test models and tools: test/echo streams "echo: <text>" word
// by word, calls askUser when told "ask <question>" and an offered tool when told
// "call <tool> <JSON input>", reports tool results, answers the text itself when asked
// for JSON, and reports its usage (a token a message in, a token a word out); upper
// upper-cases a text; note keeps notes in the session's state.
func testRegistry(g *gate) *agent.Registry {
	r := agent.NewRegistry()
	agent.DefineTool(r, "upper", "Upper-cases a text.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return strings.ToUpper(in.Text), nil
	})
	agent.DefineTool(r, "note", "Keeps a note in the session; answers the notes so far.", func(ctx context.Context, in struct {
		Text string `json:"text"`
	}) ([]string, error) {
		s := agent.AnySessionFromContext(ctx)
		if s == nil {
			return nil, errors.New("no session")
		}
		defer s.LockUpdates()()
		var st struct{ Notes []string }
		if raw, err := s.CustomJSON(); err == nil {
			json.Unmarshal(raw, &st)
		}
		st.Notes = append(st.Notes, in.Text)
		raw, _ := json.Marshal(map[string]any{"notes": st.Notes})
		return st.Notes, s.SetCustomJSON(raw)
	})
	agent.DefineModel(r, "test/echo", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		if len(req.Messages) == 0 {
			return nil, fmt.Errorf("%w: no messages", agent.ErrInvalidInput)
		}
		last := req.Messages[len(req.Messages)-1]
		answer := func(m *abi.Message) (*abi.GenerateResponse, error) {
			out := len(strings.Fields(m.Text())) + len(m.ToolRequests())
			return &abi.GenerateResponse{Message: m, FinishReason: abi.FinishStop,
				Usage: &abi.GenerationUsage{InputTokens: len(req.Messages), OutputTokens: out, TotalTokens: len(req.Messages) + out}}, nil
		}
		if last.Role == abi.RoleTool {
			out, _ := json.Marshal(last.ToolResponses()[0].Output)
			return answer(abi.NewModelTextMessage("answer: " + string(out)))
		}
		if q, ok := strings.CutPrefix(last.Text(), "ask "); ok {
			return answer(abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{
				Name: "askUser", Ref: "q1", Input: map[string]any{"question": q}})))
		}
		if rest, ok := strings.CutPrefix(last.Text(), "call "); ok {
			name, input, _ := strings.Cut(rest, " ")
			var in any
			json.Unmarshal([]byte(input), &in)
			if slices.ContainsFunc(req.Tools, func(d *abi.ToolDefinition) bool { return d.Name == name }) {
				return answer(abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Name: name, Ref: "c1", Input: in})))
			}
		}
		if req.Output != nil && req.Output.Format == "json" {
			// The text as it is, fenced as models fence JSON.
			return answer(abi.NewModelTextMessage("```json\n" + last.Text() + "\n```"))
		}
		text := "echo: " + last.Text()
		for _, w := range strings.SplitAfter(text, " ") {
			if cb != nil {
				if err := cb(ctx, &abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{abi.NewTextPart(w)}}); err != nil {
					return nil, err
				}
			}
		}
		return answer(abi.NewModelTextMessage(text))
	})
	agent.DefineModel(r, "test/form", nil, formModel)
	agent.DefineModel(r, "test/flood", nil, floodModel)
	agent.DefineModel(r, "test/unencodable", nil, unencodableModel)
	if g != nil {
		agent.DefineModel(r, "test/gate", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
			g.started <- struct{}{}
			select {
			case <-g.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &abi.GenerateResponse{Message: abi.NewModelTextMessage("released"), FinishReason: abi.FinishStop}, nil
		})
		// test/stubborn is the gate, ignoring its context: it ends only when released.
		agent.DefineModel(r, "test/stubborn", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
			if g.inFlight.Add(1) > 1 {
				g.overlaps.Add(1)
			}
			defer g.inFlight.Add(-1)
			g.started <- struct{}{}
			<-g.release
			return &abi.GenerateResponse{Message: abi.NewModelTextMessage("released"), FinishReason: abi.FinishStop}, nil
		})
	}
	return r
}

// floodModel streams more than the socket buffers of a client with a small receive
// buffer hold (floodChunks of 64 KiB), for tests of clients that stop reading.
func floodModel(ctx context.Context, _ *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
	chunk := strings.Repeat("flood ", 64<<10/6)
	for range floodChunks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if cb != nil {
			if err := cb(ctx, &abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{abi.NewTextPart(chunk)}}); err != nil {
				return nil, err
			}
		}
	}
	return &abi.GenerateResponse{Message: abi.NewModelTextMessage("flooded"), FinishReason: abi.FinishStop}, nil
}

// unencodable panics when encoded, as a bug in an encoder of the server's would.
type unencodable struct{}

func (unencodable) MarshalJSON() ([]byte, error) { panic("unencodable") }

// unencodableModel streams a chunk the server panics encoding, in the goroutine that
// writes it to its client.
func unencodableModel(ctx context.Context, _ *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
	if cb != nil {
		if err := cb(ctx, &abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{abi.NewTextPart("x")}, Custom: unencodable{}}); err != nil {
			return nil, err
		}
	}
	return &abi.GenerateResponse{Message: abi.NewModelTextMessage("done"), FinishReason: abi.FinishStop}, nil
}

// floodChunks is how many chunks floodModel streams: 8 MiB, twice what Linux lets a
// server's socket buffer.
const floodChunks = 128

type testServer struct {
	*httptest.Server
	srv  *server.Server
	dep  *deploy.Deployment
	gate *gate
}

// newTestServer serves testAgents with opts.
func newTestServer(t *testing.T, opts ...server.Option) *testServer {
	t.Helper()
	return newTestServerWith(t, nil, opts...)
}

// newTestServerWith is newTestServer with options for the deployment too.
func newTestServerWith(t testing.TB, depOpts []deploy.Option, opts ...server.Option) *testServer {
	t.Helper()
	return newServerOf(t, testAgents, depOpts, opts...)
}

// newServerOf serves the agent files agents (file name to YAML) with the test models,
// the deployment's options and the server's.
func newServerOf(t testing.TB, agents map[string]string, depOpts []deploy.Option, opts ...server.Option) *testServer {
	t.Helper()
	dir := t.TempDir()
	for name, src := range agents {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := deploy.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{started: make(chan struct{}), release: make(chan struct{})}
	d, err := deploy.New(t.Context(), files, append([]deploy.Option{deploy.WithRegistry(testRegistry(g)),
		deploy.WithDataDir(filepath.Join(dir, "data")), deploy.WithLogger(quietLog)}, depOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(d, append([]server.Option{server.WithLogger(quietLog)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		// Bounded, so that a turn a broken server never ends fails its test rather
		// than hanging the package.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		srv.Shutdown(ctx)
		d.Close(context.Background())
	})
	return &testServer{Server: ts, srv: srv, dep: d, gate: g}
}

// do sends a request with a JSON body (a string is sent as it is) and decodes the JSON
// answer into out, if given; it returns the response.
func (ts *testServer) do(t *testing.T, method, path string, body any, out any) *http.Response {
	t.Helper()
	return request(t, ts.Server, "", method, path, body, out)
}

// request sends a request to ts with the API key key (none if "") and a JSON body (a
// string is sent as it is), decodes the JSON answer into out when given, and returns
// the response.
func request(t testing.TB, ts *httptest.Server, key, method, path string, body, out any) *http.Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp
}

// newSession creates a session of the agent and returns its ID.
func (ts *testServer) newSession(t *testing.T, agent string, init any) string {
	t.Helper()
	var info server.SessionInfo
	if resp := ts.do(t, "POST", "/api/agents/"+agent+"/sessions", init, &info); resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating a session of %s: status %d", agent, resp.StatusCode)
	}
	return info.SessionID
}

// event is one server-sent event.
type event struct {
	name string
	data string
}

// streamTurn sends a turn asking for server-sent events and returns them.
func (ts *testServer) streamTurn(t *testing.T, agent, session string, body any) (*http.Response, []event) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", fmt.Sprintf("%s/api/agents/%s/sessions/%s/turns", ts.URL, agent, session), bytes.NewReader(data))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp, readEvents(t, resp.Body)
}

func readEvents(t *testing.T, r io.Reader) []event {
	t.Helper()
	var events []event
	var cur event
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				events = append(events, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return events
}

// textOf joins the model text of a turn's events.
func textOf(t *testing.T, events []event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		var c struct {
			Chunk *abi.GenerateResponseChunk `json:"chunk"`
		}
		if e.name == "" && json.Unmarshal([]byte(e.data), &c) == nil && c.Chunk != nil && c.Chunk.Role == abi.RoleModel {
			b.WriteString(c.Chunk.Text())
		}
	}
	return b.String()
}

func TestTurnStreamsServerSentEvents(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "echo", nil)
	resp, events := ts.streamTurn(t, "echo", id, map[string]any{"text": "hello there"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get(server.SessionHeader) != id {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	if got := textOf(t, events); got != "echo: hello there" {
		t.Errorf("streamed text %q", got)
	}
	var chunks int
	for _, e := range events {
		if strings.Contains(e.data, `"chunk":{`) {
			chunks++
		}
	}
	if chunks < 3 {
		t.Errorf("the answer came in %d chunks; the model streams a chunk per word", chunks)
	}
	last := events[len(events)-1].data
	if !strings.Contains(last, `"endTurn":true`) || !strings.Contains(last, `"finishReason":"stop"`) {
		t.Errorf("last event %s", last)
	}

	// The same turn without streaming is one JSON document.
	var out struct {
		SessionID string            `json:"sessionId"`
		Chunks    []json.RawMessage `json:"chunks"`
	}
	if resp := ts.do(t, "POST", "/api/agents/echo/sessions/"+id+"/turns", `{"text":"again"}`, &out); resp.StatusCode != 200 || out.SessionID != id || len(out.Chunks) < 3 {
		t.Errorf("JSON turn: status %d, %+v", resp.StatusCode, out)
	}

	// Both turns are kept: the session's latest snapshot has four messages.
	var info server.SessionInfo
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id, nil, &info)
	if info.Snapshot == nil || len(info.Snapshot.State.Messages) != 4 || !info.Open {
		t.Errorf("session info: %+v", info)
	}
}

func TestInterruptAnsweredOverHTTP(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "echo", nil)
	_, events := ts.streamTurn(t, "echo", id, map[string]any{"text": "ask your name?"})
	last := events[len(events)-1].data
	if !strings.Contains(last, `"finishReason":"interrupted"`) {
		t.Fatalf("the turn did not end interrupted: %s", last)
	}
	// The pending request streams in a chunk of role tool, as Genkit's agents stream it.
	pending := events[len(events)-3].data
	if !strings.Contains(pending, `"role":"tool"`) || !strings.Contains(pending, `"interrupt":{"question":"your name?"}`) {
		t.Errorf("the pending request streamed as %s", pending)
	}
	answer := map[string]any{"resume": map[string]any{"respond": []any{
		map[string]any{"toolResponse": map[string]any{"name": "askUser", "ref": "q1", "output": "Ada"}}}}}
	resp, events := ts.streamTurn(t, "echo", id, answer)
	if resp.StatusCode != 200 || textOf(t, events) != `answer: "Ada"` {
		t.Errorf("after the answer: %d %q", resp.StatusCode, textOf(t, events))
	}
}

// Issue 28 over HTTP: a detached turn streams nothing and its answer names its pending
// snapshot; the snapshot settles under its own ID; abort answers 200 with the status
// the snapshot had (pending when it stopped the turn), or none for an unknown one.
func TestDetachAndAbortOverHTTP(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "gate", nil)
	go func() { <-ts.gate.started; ts.gate.release <- struct{}{} }()
	var first server.TurnResult
	ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", map[string]any{"text": "first"}, &first)

	detach := func(text string) string {
		t.Helper()
		// Asking for events changes nothing: there are none.
		req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/api/agents/gate/sessions/"+id+"/turns",
			strings.NewReader(`{"text": "`+text+`", "detach": true}`))
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res server.TurnResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("detach: %d %v", resp.StatusCode, err)
		}
		if len(res.Chunks) != 0 || res.FinishReason != "detached" || res.SnapshotID == "" || res.SessionID != id {
			t.Fatalf("a detached turn answered %+v", res)
		}
		<-ts.gate.started // the turn runs on
		return res.SnapshotID
	}
	abort := func(snapshot string) map[string]any {
		t.Helper()
		var out map[string]any
		if resp := ts.do(t, "POST", "/api/agents/gate/snapshots/"+snapshot+"/abort", nil, &out); resp.StatusCode != http.StatusOK {
			t.Fatalf("abort %s: %d %v", snapshot, resp.StatusCode, out)
		}
		return out
	}
	snapshot := func(id string) *deploy.Snapshot {
		t.Helper()
		var snap deploy.Snapshot
		if resp := ts.do(t, "GET", "/api/agents/gate/snapshots/"+id, nil, &snap); resp.StatusCode != http.StatusOK {
			t.Fatalf("snapshot %s: %d", id, resp.StatusCode)
		}
		return &snap
	}

	pending := detach("stop me")
	if got := abort(pending); got["status"] != "pending" || got["snapshotId"] != pending {
		t.Errorf("aborting a running turn: %v", got)
	}
	if got := abort(pending); got["status"] != "aborted" {
		t.Errorf("aborting it again: %v", got)
	}
	if got := abort("no-such-snapshot"); got["snapshotId"] != "no-such-snapshot" || got["status"] != nil {
		t.Errorf("aborting an unknown snapshot: %v", got)
	}
	if snap := snapshot(pending); snap.SnapshotID != pending || snap.Status != "aborted" || snap.ParentID != first.SnapshotID || len(snap.State.Messages) != 2 {
		t.Errorf("the aborted snapshot: %+v", snap)
	}

	// The session goes on from it; a detached turn left to run settles completed, under
	// its own ID.
	go func() { <-ts.gate.started; ts.gate.release <- struct{}{} }()
	var next server.TurnResult
	if resp := ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", map[string]any{"text": "after the abort"}, &next); resp.StatusCode != http.StatusOK || next.FinishReason != "stop" {
		t.Fatalf("the turn after the abort: %d %+v", resp.StatusCode, next)
	}
	pending = detach("finish me")
	ts.gate.release <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for snapshot(pending).Status == "pending" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if snap := snapshot(pending); snap.SnapshotID != pending || snap.Status != "completed" || snap.ParentID != next.SnapshotID || len(snap.State.Messages) != 6 {
		t.Errorf("the settled snapshot: %+v", snap)
	}
	if got := abort(pending); got["status"] != "completed" {
		t.Errorf("aborting a completed snapshot: %v", got)
	}
	var info server.SessionInfo
	if ts.do(t, "GET", "/api/agents/gate/sessions/"+id, nil, &info); info.Snapshot == nil || info.Snapshot.SnapshotID != pending {
		t.Errorf("the session's snapshot after the detached turn: %+v", info.Snapshot)
	}
}

// Looking a session up after a branch answers the head the server considers current:
// the branch's last snapshot, which the next turn by the session's ID continues.
func TestSessionLookupAfterABranch(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "echo", nil)
	var one, two server.TurnResult
	ts.do(t, "POST", "/api/agents/echo/sessions/"+id+"/turns", map[string]any{"text": "one"}, &one)
	ts.do(t, "POST", "/api/agents/echo/sessions/"+id+"/turns", map[string]any{"text": "two"}, &two)
	ts.do(t, "DELETE", "/api/agents/echo/sessions/"+id, nil, nil)
	// Resume the first snapshot: a branch beside the second.
	if got := ts.newSession(t, "echo", map[string]any{"snapshotId": one.SnapshotID}); got != id {
		t.Fatalf("resumed as session %q", got)
	}
	var branch server.TurnResult
	ts.do(t, "POST", "/api/agents/echo/sessions/"+id+"/turns", map[string]any{"text": "two again"}, &branch)
	var info server.SessionInfo
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id, nil, &info)
	if info.Snapshot == nil || info.Snapshot.SnapshotID != branch.SnapshotID || !info.Snapshot.Branch || info.Snapshot.ParentID != one.SnapshotID {
		t.Fatalf("the session's snapshot after the branch: %+v, want %s", info.Snapshot, branch.SnapshotID)
	}
	// Closed and reopened by its ID, it continues the branch.
	ts.do(t, "DELETE", "/api/agents/echo/sessions/"+id, nil, nil)
	var next server.TurnResult
	ts.do(t, "POST", "/api/agents/echo/sessions/"+id+"/turns", map[string]any{"text": "three"}, &next)
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id, nil, &info)
	var texts []string
	for _, m := range info.Snapshot.State.Messages {
		texts = append(texts, m.Text())
	}
	if want := "one|echo: one|two again|echo: two again|three|echo: three"; strings.Join(texts, "|") != want {
		t.Errorf("after the branch the session holds %q, want %q", texts, want)
	}
}
