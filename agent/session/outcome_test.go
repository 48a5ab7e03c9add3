package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// scriptedModel answers by the last message: "fail" is a provider's error, "panic" a
// bug, "tool <name>" asks for that tool ({"n": 1}); a tool's answer comes back as
// "tool said: <its output>"; anything else is echoed.
func scriptedModel(r *agent.Registry) *testmodel.Model {
	return testmodel.Define(r, "test/scripted", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == abi.RoleTool {
			out, _ := json.Marshal(last.Content[0].ToolResponse.Output)
			return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage("tool said: " + string(out))}}
		}
		text := last.Text()
		switch {
		case text == "fail":
			return testmodel.Turn{Err: &abi.Error{Code: abi.CodeUnavailable, Message: "provider down", Status: 503}}
		case text == "panic":
			panic("a bug in the model")
		case strings.HasPrefix(text, "tool "):
			return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelMessage(
				abi.NewToolRequestPart(&abi.ToolRequest{Name: strings.TrimPrefix(text, "tool "), Ref: "1", Input: map[string]any{"n": 1}}))}}
		}
		return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage("echo: " + text)}}
	}))
}

// turnResult is what one turn streamed.
type turnResult struct {
	text     string
	snapshot string
	end      *session.SessionFlowStreamChunk[Status]
	err      error
	patches  []json.RawMessage
}

func runTurn(t *testing.T, conn *session.SessionFlowConnection[Status, State], text string) turnResult {
	t.Helper()
	if err := conn.Send(&session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(text)}, CustomPatches: true}); err != nil {
		t.Fatal(err)
	}
	var res turnResult
	for c, err := range conn.Receive() {
		if err != nil {
			res.err = err
		}
		if c == nil {
			break
		}
		if c.Chunk != nil && c.Chunk.Role == abi.RoleModel {
			res.text += c.Chunk.Text()
		}
		if c.SnapshotCreated != "" {
			res.snapshot = c.SnapshotCreated
		}
		if c.CustomPatch != nil {
			res.patches = append(res.patches, c.CustomPatch)
		}
		if c.EndTurn {
			res.end = c
		}
	}
	if res.end == nil {
		t.Fatalf("turn %q ended without an EndTurn chunk (%v)", text, res.err)
	}
	return res
}

// texts lists the messages' texts.
func texts(msgs []*abi.Message) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.Text())
	}
	return out
}

// A failed turn is an outcome: finish reason failed, the error with its code and the
// model that raised it, a snapshot of status failed holding the last good state; the
// connection goes on, and the next turn continues from that state.
func TestFailedTurnIsAnOutcome(t *testing.T) {
	r := agent.NewRegistry()
	scriptedModel(r)
	store := session.NewInMemorySnapshotStore[State]()
	flow := session.DefineAgent[Status, State](r, "resilient", session.WithSnapshotStore(store),
		session.WithGenerateOpts[State](agent.WithModelName("test/scripted")))
	ctx := context.Background()
	conn, _ := flow.StreamBidi(ctx)
	first := runTurn(t, conn, "hello")
	if first.err != nil || first.end.FinishReason != abi.FinishStop {
		t.Fatalf("first turn: %+v", first)
	}

	failed := runTurn(t, conn, "fail")
	var te *session.TurnError
	if !errors.As(failed.err, &te) || te != failed.end.Error {
		t.Fatalf("Receive yielded %v, want the failed turn's error", failed.err)
	}
	if failed.end.FinishReason != session.FinishFailed || te.Code != abi.CodeUnavailable || te.Status != "UNAVAILABLE" || te.Model != "test/scripted" ||
		te.Tool != "" || te.Handler != "" || !strings.Contains(te.Message, "provider down") {
		t.Fatalf("failed turn ended with %q, error %+v", failed.end.FinishReason, te)
	}
	var ae *agent.ActionError
	if !errors.As(failed.err, &ae) {
		t.Errorf("in process, the error unwraps to the model's: %v", failed.err)
	}
	snap, err := store.GetSnapshot(ctx, failed.snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != session.StatusFailed || snap.FinishReason != session.FinishFailed || snap.ParentID != first.snapshot ||
		snap.Error == nil || snap.Error.Code != abi.CodeUnavailable || snap.Error.Model != "test/scripted" {
		t.Fatalf("failed snapshot = %s", jsonOf(snap))
	}
	if got := texts(snap.State.Messages); !slices.Equal(got, []string{"hello", "echo: hello"}) {
		t.Errorf("the failed snapshot holds %q, want the last good state", got)
	}

	again := runTurn(t, conn, "again")
	if again.err != nil || again.text != "echo: again" {
		t.Fatalf("the turn after the failure: %+v", again)
	}
	next, _ := store.GetSnapshot(ctx, again.snapshot)
	if next.ParentID != failed.snapshot || next.TurnIndex != snap.TurnIndex+1 || next.Status != session.StatusCompleted {
		t.Errorf("the next snapshot = %s", jsonOf(next))
	}
	if got := texts(next.State.Messages); !slices.Equal(got, []string{"hello", "echo: hello", "again", "echo: again"}) {
		t.Errorf("history %q, want exactly the successful turns", got)
	}
	out := finish(t, conn)
	if out.SnapshotID != again.snapshot || out.FinishReason != abi.FinishStop || out.Error != nil || out.Message.Text() != "echo: again" {
		t.Errorf("output = %s", jsonOf(out))
	}
}

// A session's first turn failing keeps the session: its failed snapshot holds the
// session's start, and resuming the session by its ID goes on from there.
func TestFirstTurnFailureKeepsTheSession(t *testing.T) {
	r := agent.NewRegistry()
	scriptedModel(r)
	store := session.NewInMemorySnapshotStore[State]()
	flow := session.DefineAgent[Status, State](r, "fragile", session.WithSnapshotStore(store),
		session.WithGenerateOpts[State](agent.WithModelName("test/scripted"), agent.WithMessages(abi.NewModelTextMessage("Welcome!"))))
	ctx := context.Background()
	conn, _ := flow.StreamBidi(ctx, session.WithSessionID[State]("s1"))
	if res := runTurn(t, conn, "fail"); res.end.FinishReason != session.FinishFailed {
		t.Fatalf("first turn: %+v", res)
	}
	conn.Close()
	conn.Output()
	head, err := store.LatestSnapshot(ctx, "s1")
	if err != nil || head.Status != session.StatusFailed || !slices.Equal(texts(head.State.Messages), []string{"Welcome!"}) {
		t.Fatalf("the session after a failed first turn: %s, %v", jsonOf(head), err)
	}
	conn, err = flow.StreamBidi(ctx, session.WithSessionID[State]("s1"))
	if err != nil {
		t.Fatal(err)
	}
	if res := runTurn(t, conn, "hello"); res.err != nil || res.text != "echo: hello" {
		t.Fatalf("resumed: %+v", res)
	}
	st := stateOf(t, store, finish(t, conn))
	if got := texts(st.Messages); !slices.Equal(got, []string{"Welcome!", "hello", "echo: hello"}) {
		t.Errorf("history %q", got)
	}
}

// Tool errors go to the model by default, which can answer; under the fail policy
// they fail the turn, naming the tool and keeping the tool's own code.
func TestAgentToolErrorPolicy(t *testing.T) {
	r := agent.NewRegistry()
	scriptedModel(r)
	picky := agent.NewTool("picky", "refuses", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		return "", &abi.Error{Code: abi.CodeInvalidInput, Message: "n must be even"}
	})
	lenient := session.DefineAgent[Status, State](r, "lenient", session.WithGenerateOpts[State](agent.WithModelName("test/scripted"), agent.WithTools(picky)))
	strict := session.DefineAgent[Status, State](r, "strict", session.WithGenerateOpts[State](agent.WithModelName("test/scripted"),
		agent.WithTools(picky), agent.WithReturnToolErrors(false)))
	ctx := context.Background()

	conn, _ := lenient.StreamBidi(ctx)
	res := runTurn(t, conn, "tool picky")
	if res.err != nil || res.text != `tool said: {"code":"invalid_input","error":"n must be even"}` {
		t.Errorf("by default the model hears of the error: %+v", res)
	}
	finish(t, conn)

	conn, _ = strict.StreamBidi(ctx)
	res = runTurn(t, conn, "tool picky")
	var te *session.TurnError
	if !errors.As(res.err, &te) || res.end.FinishReason != session.FinishFailed || te.Code != abi.CodeInvalidInput || te.Tool != "picky" || te.Model != "" {
		t.Errorf("under the fail policy: %+v (%+v)", res, te)
	}
	// The session goes on, without the failed turn's messages.
	if res := runTurn(t, conn, "hi"); res.err != nil || res.text != "echo: hi" {
		t.Errorf("after the failed turn: %+v", res)
	}
	if out := finish(t, conn); !slices.Equal(texts(out.State.Messages), []string{"hi", "echo: hi"}) {
		t.Errorf("history %q", texts(out.State.Messages))
	}
}

// A panic in a turn (the model's, a tool's, a handler's) fails that turn only, naming
// what panicked; the connection and the process go on.
func TestPanicsFailTheirTurn(t *testing.T) {
	r := agent.NewRegistry()
	scriptedModel(r)
	bomb := agent.NewTool("bomb", "panics", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		var m map[string]int
		m["boom"]++
		return "", nil
	})
	var armed bool
	trap := agent.NewHandler("trap", "panics when armed", func(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error) {
		if armed {
			panic("a bug in the handler")
		}
		return nil, nil
	}, abi.HookTurnStart)
	flow := session.DefineAgent[Status, State](r, "brittle", session.WithHandlers[State](trap),
		session.WithGenerateOpts[State](agent.WithModelName("test/scripted"), agent.WithTools(bomb)))
	conn, _ := flow.StreamBidi(context.Background())
	for _, tc := range []struct {
		say, what string
		name      func(*session.TurnError) string
	}{
		{"panic", "a bug in the model", func(te *session.TurnError) string { return te.Model }},
		{"tool bomb", "nil map", func(te *session.TurnError) string { return te.Tool }},
		{"armed", "a bug in the handler", func(te *session.TurnError) string { return te.Handler }},
	} {
		armed = tc.say == "armed"
		res := runTurn(t, conn, tc.say)
		var te *session.TurnError
		if !errors.As(res.err, &te) || te.Code != abi.CodeInternal || tc.name(te) == "" || !strings.Contains(te.Message, tc.what) {
			t.Errorf("%s: %+v (%+v)", tc.say, res, te)
		}
		var pe *agent.PanicError
		if !errors.As(res.err, &pe) {
			t.Errorf("%s: the error is not the panic: %v", tc.say, res.err)
		}
	}
	armed = false
	if res := runTurn(t, conn, "still here"); res.err != nil || res.text != "echo: still here" {
		t.Errorf("after the panics: %+v", res)
	}
	if out := finish(t, conn); !slices.Equal(texts(out.State.Messages), []string{"still here", "echo: still here"}) {
		t.Errorf("history %q", texts(out.State.Messages))
	}
}

// A hand-written flow reports a failed turn with FailTurn, or by returning an error or
// panicking during a turn: the turn fails, the session goes back to its state before
// the turn, and the flow is called again for the next input.
func TestHandWrittenFlowFailures(t *testing.T) {
	calls := 0
	store := session.NewInMemorySnapshotStore[State]()
	flow := session.DefineSessionFlow(agent.NewRegistry(), "hand", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, State]) error {
		calls++
		for in := range inCh {
			text := in.Messages[0].Text()
			p.Session.AddMessages(in.Messages...)
			p.Session.UpdateCustom(func(s State) State { s.Notes = append(s.Notes, text); return s })
			if text != "one" && text != "two" {
				// A change in place, in the slice the state before the turn shares.
				p.Session.UpdateCustom(func(s State) State { s.Notes[0] = "mangled"; return s })
			}
			switch text {
			case "report":
				if err := resp.FailTurn(&abi.Error{Code: abi.CodeLimitExceeded, Message: "quota spent"}); err != nil {
					return err
				}
				continue
			case "return":
				return errors.New("the flow gave up")
			case "panic":
				panic("a bug in the flow")
			}
			p.Session.AddMessages(abi.NewModelTextMessage("ok: " + text))
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		return nil
	}, session.WithSnapshotStore(store))
	ctx := context.Background()
	conn, _ := flow.StreamBidi(ctx)
	runTurn(t, conn, "one")
	for _, tc := range []struct {
		say  string
		code abi.ErrorCode
		what string
	}{
		{"report", abi.CodeLimitExceeded, "quota spent"},
		{"return", abi.CodeInternal, "the flow gave up"},
		{"panic", abi.CodeInternal, "a bug in the flow"},
	} {
		res := runTurn(t, conn, tc.say)
		var te *session.TurnError
		if !errors.As(res.err, &te) || te.Code != tc.code || !strings.Contains(te.Message, tc.what) || res.end.FinishReason != session.FinishFailed {
			t.Errorf("%s: %+v (%+v)", tc.say, res, te)
			continue
		}
		// Nothing the turn did is kept, its custom state change included: the turn's
		// patches (its first a whole replace) leave the client with the state the turn
		// found.
		snap, _ := store.GetSnapshot(ctx, res.snapshot)
		if snap.Status != session.StatusFailed || !slices.Equal(texts(snap.State.Messages), []string{"one", "ok: one"}) || !slices.Equal(snap.State.Custom.Notes, []string{"one"}) {
			t.Errorf("%s: failed snapshot %s", tc.say, jsonOf(snap))
		}
		var client []byte
		for _, p := range res.patches {
			client = applyPatch(t, client, p)
		}
		if len(res.patches) == 0 || !sameJSON(client, []byte(`{"notes":["one"]}`)) {
			t.Errorf("%s: patches %s leave the client with %s, want the state the turn found", tc.say, res.patches, client)
		}
	}
	if res := runTurn(t, conn, "two"); res.err != nil {
		t.Fatalf("after the failures: %+v", res)
	}
	out := finish(t, conn)
	st := stateOf(t, store, out)
	if !slices.Equal(texts(st.Messages), []string{"one", "ok: one", "two", "ok: two"}) || !slices.Equal(st.Custom.Notes, []string{"one", "two"}) {
		t.Errorf("final state %s", jsonOf(st))
	}
	if calls != 3 {
		t.Errorf("the flow function was called %d times, want 3: once, and again after each of the two turns it ended", calls)
	}
}

// A flow function that fails outside a turn ends the connection with its error: there
// is no turn to fail, and calling it again could fail forever.
func TestFlowFailingOutsideATurnEndsTheConnection(t *testing.T) {
	flow := session.DefineSessionFlow(agent.NewRegistry(), "broken", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, State]) error {
		panic("before any input")
	})
	conn, _ := flow.StreamBidi(context.Background())
	conn.SendText("hi")
	var pe *agent.PanicError
	if _, err := conn.Output(); !errors.As(err, &pe) {
		t.Errorf("Output = %v, want the flow's panic", err)
	}
}

// A client-managed session's failed turn leaves the state as before the turn, which the
// output returns with the error.
func TestClientManagedFailedTurn(t *testing.T) {
	r := agent.NewRegistry()
	scriptedModel(r)
	flow := session.DefineAgent[Status, State](r, "portable", session.WithGenerateOpts[State](agent.WithModelName("test/scripted")))
	conn, _ := flow.StreamBidi(context.Background())
	runTurn(t, conn, "hello")
	if res := runTurn(t, conn, "fail"); res.snapshot != "" || res.end.FinishReason != session.FinishFailed {
		t.Errorf("failed turn: %+v", res)
	}
	out := finish(t, conn)
	if out.FinishReason != session.FinishFailed || out.Error == nil || out.Error.Model != "test/scripted" ||
		!slices.Equal(texts(out.State.Messages), []string{"hello", "echo: hello"}) || out.Message.Text() != "echo: hello" {
		t.Errorf("output = %s", jsonOf(out))
	}
}

// A turn the client cancels is not a failure: no failed snapshot, and the session
// resumes from its last one.
func TestCancelledTurnIsNoFailure(t *testing.T) {
	flow, store, started, _ := researcher()
	ctx, cancel := context.WithCancel(context.Background())
	conn, _ := flow.StreamBidi(ctx)
	conn.SendText("slow")
	<-started
	cancel()
	for range conn.Receive() {
	}
	if _, err := conn.Output(); !errors.Is(err, context.Canceled) {
		t.Errorf("Output = %v", err)
	}
	if _, err := store.LatestSnapshot(context.Background(), conn.SessionID()); !errors.Is(err, session.ErrSnapshotNotFound) {
		t.Errorf("a cancelled turn left a snapshot: %v", err)
	}
}
