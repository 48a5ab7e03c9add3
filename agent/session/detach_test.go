package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
)

// gatedModel answers "done: <input>" once a value arrives on gate, streaming a chunk
// first; started receives each call's context as it begins.
func gatedModel(r *agent.Registry, name string, started chan<- context.Context, gate <-chan struct{}) {
	agent.DefineModel(r, name, nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		started <- ctx
		if cb != nil {
			if err := cb(ctx, &abi.GenerateResponseChunk{Content: []*abi.Part{abi.NewTextPart("working…")}}); err != nil {
				return nil, err
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		last := req.Messages[len(req.Messages)-1].Text()
		return &abi.GenerateResponse{Message: abi.NewModelTextMessage("done: " + last), FinishReason: abi.FinishStop}, nil
	})
}

// researcher is an agent with a snapshot store over a gated model: each model call
// sends its context on started and waits for gate.
func researcher() (*session.SessionFlow[Status, State], session.SnapshotStore[State], chan context.Context, chan struct{}) {
	r := agent.NewRegistry()
	started, gate := make(chan context.Context, 1), make(chan struct{})
	gatedModel(r, "test/slow", started, gate)
	store := session.NewInMemorySnapshotStore[State]()
	flow := session.DefineAgent[Status, State](r, "researcher", session.WithSnapshotStore(store),
		session.WithGenerateOpts[State](agent.WithModelName("test/slow")))
	return flow, store, started, gate
}

// detachTurn sends a detached turn and reads the connection to its end, which streams
// nothing, returning the pending snapshot its output names.
func detachTurn(t *testing.T, conn *session.SessionFlowConnection[Status, State], text string) (pending string) {
	t.Helper()
	if err := conn.Detach(say(text)); err != nil {
		t.Fatal(err)
	}
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("a detached turn streamed %s", jsonOf(c))
	}
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	if out.FinishReason != session.FinishDetached || out.SnapshotID == "" || len(out.SnapshotIDs) == 0 || out.SnapshotIDs[len(out.SnapshotIDs)-1] != out.SnapshotID || out.State != nil {
		t.Fatalf("output of a detached connection = %s", jsonOf(out))
	}
	return out.SnapshotID
}

// stateOf is the state a server-managed connection's output names.
func stateOf[St any](t *testing.T, store session.SnapshotStore[St], out *session.SessionFlowOutput[St]) *session.SessionState[St] {
	t.Helper()
	if out.State != nil {
		t.Fatalf("a server-managed flow's output carries its state: %s", jsonOf(out))
	}
	snap, err := store.GetSnapshot(context.Background(), out.SnapshotID)
	if err != nil {
		t.Fatalf("the output's snapshot %q: %v", out.SnapshotID, err)
	}
	return &snap.State
}

func TestDetachRunsTheTurnInTheBackground(t *testing.T) {
	flow, store, started, gate := researcher()
	ctx := context.Background()

	conn, _ := flow.StreamBidi(ctx)
	_, _, first, _ := agentTurnWhileSnap(t, conn, say("first"), gate)
	<-started
	pending := detachTurn(t, conn, "write the report")
	<-started // the detached turn reached the model after the client left

	snap, err := store.GetSnapshot(ctx, pending)
	if err != nil || snap.Status != session.StatusPending || snap.Event != session.SnapshotEventDetach || snap.ParentID != first {
		t.Fatalf("while running: %+v, %v", snap, err)
	}
	if _, err := flow.StreamBidi(ctx, session.WithSnapshotID[State](pending)); !errors.Is(err, session.ErrNotResumable) {
		t.Errorf("resuming a pending snapshot: %v", err)
	}
	gate <- struct{}{}
	settled, err := flow.Wait(ctx, pending)
	if err != nil {
		t.Fatal(err)
	}
	// The pending snapshot settled under its own ID, with its own parent and turn.
	if settled.SnapshotID != pending || settled.ParentID != first || settled.TurnIndex != snap.TurnIndex ||
		settled.Status != session.StatusCompleted || settled.FinishReason != abi.FinishStop || settled.UpdatedAt.IsZero() {
		t.Fatalf("settled = %s", jsonOf(settled))
	}
	msgs := settled.State.Messages
	if len(msgs) != 4 || msgs[3].Text() != "done: write the report" {
		t.Fatalf("the background result is not in the snapshot: %q", conversation(&abi.GenerateRequest{Messages: msgs}))
	}
	again, err := store.GetSnapshot(ctx, pending)
	if err != nil || jsonOf(again) != jsonOf(settled) {
		t.Errorf("GetSnapshot(pending) = %s, %v", jsonOf(again), err)
	}
	list, err := store.ListSnapshots(ctx, settled.SessionID)
	if err != nil || len(list) != 2 || list[1].SnapshotID != pending || list[1].Status != session.StatusCompleted {
		t.Errorf("ListSnapshots = %s, %v", jsonOf(list), err)
	}
	// The session resumes from it, by its ID or the session's.
	conn, err = flow.StreamBidi(ctx, session.WithSnapshotID[State](pending))
	if err != nil {
		t.Fatal(err)
	}
	agentTurnWhile(t, conn, say("thanks"), gate)
	<-started
	out := finish(t, conn)
	if got := stateOf(t, store, out); len(got.Messages) != 6 {
		t.Errorf("resumed after the detached turn: %d messages", len(got.Messages))
	}
	if after, _ := store.GetSnapshot(ctx, out.SnapshotID); after.ParentID != pending || after.TurnIndex != settled.TurnIndex+1 {
		t.Errorf("the turn after the detached one: %s", jsonOf(after))
	}
}

// agentTurnWhileSnap is agentTurnWhile returning what agentTurn returns.
func agentTurnWhileSnap(t *testing.T, conn *session.SessionFlowConnection[Status, State], in *session.SessionFlowInput, gate chan<- struct{}) (string, []*abi.Part, string, error) {
	t.Helper()
	go func() { gate <- struct{}{} }()
	text, pending, snap, err := agentTurn(t, conn, in)
	if err != nil {
		t.Fatal(err)
	}
	return text, pending, snap, err
}

// agentTurnWhile runs a turn of a gated model, opening the gate once.
func agentTurnWhile(t *testing.T, conn *session.SessionFlowConnection[Status, State], in *session.SessionFlowInput, gate chan<- struct{}) {
	t.Helper()
	go func() { gate <- struct{}{} }()
	if _, _, _, err := agentTurn(t, conn, in); err != nil {
		t.Fatal(err)
	}
}

func TestAbortStopsADetachedTurn(t *testing.T) {
	flow, store, started, gate := researcher()
	ctx := context.Background()

	conn, _ := flow.StreamBidi(ctx)
	pending := detachTurn(t, conn, "dig deep")
	modelCtx := <-started
	prev, ok, err := flow.Abort(ctx, pending)
	if err != nil || !ok || prev != session.StatusPending {
		t.Fatalf("Abort = %q, %v, %v; want pending", prev, ok, err)
	}
	<-modelCtx.Done() // the running turn was cancelled
	settled, err := flow.Wait(ctx, pending)
	if err != nil || settled.SnapshotID != pending || settled.Status != session.StatusAborted || settled.FinishReason != session.FinishAborted {
		t.Fatalf("after the abort the turn settled as %s, %v", jsonOf(settled), err)
	}
	// The aborted snapshot holds the state before the detached turn: as if it had not
	// run.
	if msgs := settled.State.Messages; len(msgs) != 0 {
		t.Errorf("aborted state = %q", conversation(&abi.GenerateRequest{Messages: msgs}))
	}
	// Aborting again, or an unknown snapshot, changes nothing and is no error.
	if prev, ok, err := flow.Abort(ctx, pending); err != nil || !ok || prev != session.StatusAborted {
		t.Errorf("aborting twice: %q, %v, %v", prev, ok, err)
	}
	if prev, ok, err := flow.Abort(ctx, "0000"); err != nil || ok || prev != "" {
		t.Errorf("aborting an unknown snapshot: %q, %v, %v", prev, ok, err)
	}
	// A finished turn is left as it is; the session goes on from the aborted snapshot.
	conn, err = flow.StreamBidi(ctx, session.WithSessionID[State](settled.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	pending2 := detachTurn(t, conn, "quick one")
	<-started
	gate <- struct{}{}
	done, err := flow.Wait(ctx, pending2)
	if err != nil || done.Status != session.StatusCompleted || done.ParentID != pending {
		t.Fatalf("second detached turn: %s, %v", jsonOf(done), err)
	}
	if prev, ok, err := flow.Abort(ctx, pending2); err != nil || !ok || prev != session.StatusCompleted {
		t.Errorf("aborting a finished turn: %q, %v, %v", prev, ok, err)
	}
	if again, _ := store.GetSnapshot(ctx, pending2); again.Status != session.StatusCompleted || len(again.State.Messages) != 2 {
		t.Errorf("the abort of a finished turn changed it: %s", jsonOf(again))
	}
}

func TestDetachNeedsAStore(t *testing.T) {
	r := agent.NewRegistry()
	started, gate := make(chan context.Context, 1), make(chan struct{})
	gatedModel(r, "test/slow", started, gate)
	flow := session.DefineAgent[Status, State](r, "clientside", session.WithGenerateOpts[State](agent.WithModelName("test/slow")))
	conn, _ := flow.StreamBidi(context.Background())
	if err := conn.Detach(say("go away")); err != nil {
		t.Fatal(err)
	}
	var turnErr error
	for _, err := range conn.Receive() {
		if err != nil {
			turnErr = err
		}
	}
	if !errors.Is(turnErr, session.ErrNoSnapshotStore) {
		t.Fatalf("detach without a store: %v", turnErr)
	}
	// The connection goes on.
	agentTurnWhile(t, conn, say("then stay"), gate)
	<-started
	if out := finish(t, conn); len(out.State.Messages) != 2 {
		t.Errorf("after a refused detach: %d messages", len(out.State.Messages))
	}
}

func TestSnapshotCreatedStreamedAtInvocationEnd(t *testing.T) {
	r := agent.NewRegistry()
	store := session.NewInMemorySnapshotStore[State]()
	// A flow that changes its state after its last turn, so the invocation end has
	// something to save.
	flow := session.DefineSessionFlow(r, "notes", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, State]) error {
		for in := range inCh {
			p.Session.AddMessages(in.Messages...)
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		p.Session.UpdateCustom(func(s State) State { s.Notes = append(s.Notes, "closed"); return s })
		return nil
	}, session.WithSnapshotStore(store))
	conn, _ := flow.StreamBidi(context.Background())
	agentTurn(t, conn, say("hello"))
	conn.Close()
	var created []string
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.SnapshotCreated != "" {
			created = append(created, c.SnapshotCreated)
		}
	}
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 1 || len(out.SnapshotIDs) != 2 || created[0] != out.SnapshotIDs[1] {
		t.Fatalf("streamed %q, created %q", created, out.SnapshotIDs)
	}
	snap, err := store.GetSnapshot(context.Background(), created[0])
	if err != nil || snap.Event != session.SnapshotEventInvocationEnd || len(snap.State.Custom.Notes) != 1 {
		t.Errorf("invocation-end snapshot = %+v, %v", snap, err)
	}
}

func TestSnapshotActionsAreRegistered(t *testing.T) {
	r := agent.NewRegistry()
	started, gate := make(chan context.Context, 1), make(chan struct{})
	gatedModel(r, "test/slow", started, gate)
	flow := session.DefineAgent[Status, State](r, "desk", session.WithSnapshotStore(session.NewInMemorySnapshotStore[State]()),
		session.WithGenerateOpts[State](agent.WithModelName("test/slow")))
	ctx := context.Background()
	conn, _ := flow.StreamBidi(ctx)
	agentTurnWhile(t, conn, say("hi"), gate)
	<-started
	out := finish(t, conn)

	run := func(key string, input any) json.RawMessage {
		t.Helper()
		a, ok := r.Lookup(key).(agent.Runnable)
		if !ok {
			t.Fatalf("no runnable action %s", key)
		}
		in, _ := json.Marshal(input)
		res, err := a.RunJSON(ctx, in, nil)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return res
	}
	var list []session.SessionSnapshot[State]
	json.Unmarshal(run("/snapshot-store/desk/listSnapshots", session.SessionRequest{SessionID: out.SessionID}), &list)
	if len(list) != 1 || list[0].SnapshotID != out.SnapshotIDs[0] {
		t.Fatalf("listSnapshots = %+v", list)
	}
	var got session.SessionSnapshot[State]
	json.Unmarshal(run("/snapshot-store/desk/getSnapshot", session.SnapshotRequest{SnapshotID: list[0].SnapshotID}), &got)
	if got.SnapshotID != list[0].SnapshotID || len(got.State.Messages) != 2 {
		t.Errorf("getSnapshot = %+v", got)
	}
	abort := r.Lookup("/snapshot-store/desk/abortSnapshot").(agent.Runnable)
	if res, err := abort.RunJSON(ctx, json.RawMessage(`{"snapshotId": "`+got.SnapshotID+`"}`), nil); err != nil || string(res) != `{"snapshotId":"`+got.SnapshotID+`","status":"completed"}` {
		t.Errorf("abortSnapshot of a completed snapshot: %s, %v", res, err)
	}
	if res, err := abort.RunJSON(ctx, json.RawMessage(`{"snapshotId": "nope"}`), nil); err != nil || string(res) != `{"snapshotId":"nope"}` {
		t.Errorf("abortSnapshot of an unknown snapshot: %s, %v", res, err)
	}
	if _, err := abort.RunJSON(ctx, json.RawMessage(`{"snapshotId": 7}`), nil); !errors.Is(err, agent.ErrInvalidInput) {
		t.Errorf("abortSnapshot with a bad input: %v", err)
	}
	// A client-managed flow has none.
	session.DefineAgent[Status, State](r, "nostore", session.WithGenerateOpts[State](agent.WithModelName("test/slow")))
	if r.Lookup("/snapshot-store/nostore/getSnapshot") != nil {
		t.Error("a flow without a store registered snapshot actions")
	}
}

func TestFailedDetachedTurnIsRecorded(t *testing.T) {
	r := agent.NewRegistry()
	agent.DefineModel(r, "test/broken", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		return nil, &abi.Error{Code: abi.CodeUnavailable, Message: "provider down", Status: 503}
	})
	flow := session.DefineAgent[Status, State](r, "fragile", session.WithSnapshotStore(session.NewInMemorySnapshotStore[State]()),
		session.WithGenerateOpts[State](agent.WithModelName("test/broken")))
	ctx := context.Background()
	conn, _ := flow.StreamBidi(ctx)
	pending := detachTurn(t, conn, "try")
	failed, err := flow.Wait(ctx, pending)
	if err != nil {
		t.Fatal(err)
	}
	if failed.SnapshotID != pending || failed.Status != session.StatusFailed || failed.FinishReason != session.FinishFailed || failed.Error == nil ||
		failed.Error.Code != abi.CodeUnavailable || failed.Error.Model != "test/broken" || !strings.Contains(failed.Error.Message, "provider down") {
		t.Fatalf("failed turn recorded as %s", jsonOf(failed))
	}
	// Its state is the last good one, from before the turn, and the session goes on
	// from it.
	if len(failed.State.Messages) != 0 {
		t.Errorf("the failed turn's input was kept: %s", jsonOf(failed.State))
	}
	conn, err = flow.StreamBidi(ctx, session.WithSnapshotID[State](failed.SnapshotID))
	if err != nil {
		t.Fatalf("resuming a failed snapshot: %v", err)
	}
	finish(t, conn)
}
