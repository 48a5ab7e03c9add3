package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
)

func TestConnectAnyStreamsStatusAndStateAsJSON(t *testing.T) {
	r := agent.NewRegistry()
	flow := chatFlow(r, echoModel(), session.WithSnapshotStore(session.NewInMemorySnapshotStore[ChatState]()))
	var af session.AnyFlow = flow

	conn, err := af.ConnectAny(t.Context(), json.RawMessage(`{"sessionId":"s1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if conn.SessionID() != "s1" {
		t.Errorf("SessionID() = %q, want s1", conn.SessionID())
	}
	if err := conn.Send(&session.SessionFlowInput{Messages: say("hello").Messages, CustomPatches: true}); err != nil {
		t.Fatal(err)
	}
	var status, text, snapshot, patch string
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != nil {
			status = string(c.Status)
		}
		if c.CustomPatch != nil {
			patch = string(c.CustomPatch)
		}
		if c.Chunk != nil {
			text += c.Chunk.Text()
		}
		if c.SnapshotCreated != "" {
			snapshot = c.SnapshotCreated
		}
	}
	if status != `{"phase":"generating"}` || text != "echo: hello" || snapshot == "" || !strings.Contains(patch, "hello") {
		t.Errorf("status %s, text %q, snapshot %q, custom patch %s", status, text, snapshot, patch)
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	// A server-managed session's output names its snapshot and carries no state.
	if out.SessionID != "s1" || out.SnapshotID != snapshot || out.State != nil || out.Message.Text() != "echo: hello" {
		t.Errorf("output: %s", jsonOf(out))
	}
	// A client-managed one's carries the state, its custom state as JSON.
	client := chatFlow(agent.NewRegistry(), echoModel())
	conn, err = client.ConnectAny(t.Context(), json.RawMessage(`{"state":{"sessionId":"c1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	conn.Send(&session.SessionFlowInput{Messages: say("hello").Messages})
	for range conn.Receive() {
	}
	conn.Close()
	if out, err = conn.Output(); err != nil || out.SessionID != "c1" || out.SnapshotID != "" || string(out.State.Custom) != `{"topics":["hello"]}` {
		t.Errorf("client-managed output: %s, %v", jsonOf(out), err)
	}
}

func TestConnectAnyRefusesBadInit(t *testing.T) {
	r := agent.NewRegistry()
	flow := chatFlow(r, echoModel(), session.WithSnapshotStore(session.NewInMemorySnapshotStore[ChatState]()))
	for init, want := range map[string]error{
		`{"sessionld":"typo"}`:                       agent.ErrInvalidInput,
		`{"state":{"custom":{"topics":"notalist"}}}`: agent.ErrInvalidInput,
		`[1,2]`:                     agent.ErrInvalidInput,
		`{"state":{"messages":[]}}`: session.ErrServerManaged,
		`{"snapshotId":"nope"}`:     session.ErrSnapshotNotFound,
	} {
		if _, err := flow.ConnectAny(t.Context(), json.RawMessage(init)); !errors.Is(err, want) {
			t.Errorf("init %s: error %v, want %v", init, err, want)
		}
	}
}

func TestSessionFlowRunsFromJSON(t *testing.T) {
	r := agent.NewRegistry()
	store := session.NewInMemorySnapshotStore[ChatState]()
	chatFlow(r, echoModel(), session.WithSnapshotStore(store))
	run, ok := agent.AsRunnable(r.Lookup("/session-flow/chat"))
	if !ok {
		t.Fatal("a session flow is not runnable")
	}
	var chunks []string
	cb := func(_ context.Context, c json.RawMessage) error {
		chunks = append(chunks, string(c))
		return nil
	}
	out, err := run.RunJSON(t.Context(), json.RawMessage(`{"messages":[{"role":"user","content":[{"text":"one"}]}]}`), cb)
	if err != nil {
		t.Fatal(err)
	}
	var res session.AnyOutput
	if err := json.Unmarshal(out, &res); err != nil || len(res.SnapshotIDs) != 1 {
		t.Fatalf("output %s: %v", out, err)
	}
	if joined := strings.Join(chunks, "\n"); !strings.Contains(joined, `"endTurn":true`) || !strings.Contains(joined, `"phase":"generating"`) ||
		!strings.Contains(joined, `"customPatch":[{"op":"replace","path":"","value":{"topics":["one"]}}]`) {
		t.Errorf("chunks:\n%s", joined)
	}

	// With init: the next turn of the same session.
	init := json.RawMessage(`{"sessionId":"` + res.SessionID + `"}`)
	bidi := run.(interface {
		RunInitJSON(ctx context.Context, init, input json.RawMessage, cb agent.ChunkCallback) (json.RawMessage, error)
	})
	if _, err := bidi.RunInitJSON(t.Context(), init, json.RawMessage(`{"messages":[{"role":"user","content":[{"text":"two"}]}]}`), nil); err != nil {
		t.Fatal(err)
	}
	snaps, err := store.ListSnapshots(t.Context(), res.SessionID)
	if err != nil || len(snaps) != 2 || len(snaps[1].State.Custom.Topics) != 2 {
		t.Fatalf("snapshots after two runs: %d, %v", len(snaps), err)
	}

	if _, err := run.RunJSON(t.Context(), json.RawMessage(`{"mesages":[]}`), nil); !errors.Is(err, agent.ErrInvalidInput) {
		t.Errorf("a misspelt input: %v, want ErrInvalidInput", err)
	}
}

// TestRunJSONComputesPatchesForAStreamOnly: run from JSON as Genkit's reflection API
// runs a flow, a turn streams its custom-state patches to a stream, and computes none
// when no one streams.
func TestRunJSONComputesPatchesForAStreamOnly(t *testing.T) {
	r := agent.NewRegistry()
	session.DefineSessionFlow(r, "counted", countedBody(3, 1, nil))
	run, _ := agent.AsRunnable(r.Lookup("/session-flow/counted"))
	input := json.RawMessage(`{"messages":[{"role":"user","content":[{"text":"go"}]}]}`)
	before := encodings.Load()
	if _, err := run.RunJSON(t.Context(), input, nil); err != nil {
		t.Fatal(err)
	}
	unread := encodings.Load() - before // the output's state
	patches := 0
	before = encodings.Load()
	if _, err := run.RunJSON(t.Context(), input, func(_ context.Context, c json.RawMessage) error {
		if strings.Contains(string(c), `"customPatch"`) {
			patches++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	streamed := encodings.Load() - before
	if patches != 3 || streamed-unread != 3 {
		t.Errorf("streamed: %d patches, %d encodings; unread: %d encodings (want 3 patches, 3 encodings more)", patches, streamed, unread)
	}
}
