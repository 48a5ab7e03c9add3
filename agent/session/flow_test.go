package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/store"
)

type ChatState struct {
	Topics []string          `json:"topics,omitempty"`
	Prefs  map[string]string `json:"prefs,omitempty"`
}

type ChatStatus struct {
	Phase string `json:"phase"`
}

// chatFlow is seed 003's chat agent (section 7.1) over the programmable model: each
// turn adds the input, streams the model's answer, records the topic and ends the turn.
func chatFlow(r *agent.Registry, m agent.Model, opts ...session.SessionFlowOption[ChatState]) *session.SessionFlow[ChatStatus, ChatState] {
	return turnFlow(r, m, true, opts...)
}

// turnFlow is a chat flow: each turn adds the input, streams a status and the model's
// answer, records the answer and, when custom is set, adds the input's text to the
// custom state's topics.
func turnFlow(r *agent.Registry, m agent.Model, custom bool, opts ...session.SessionFlowOption[ChatState]) *session.SessionFlow[ChatStatus, ChatState] {
	return session.DefineSessionFlow(r, "chat",
		func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[ChatStatus], params *session.SessionFlowParams[ChatStatus, ChatState]) error {
			sess := params.Session
			for input := range inCh {
				sess.AddMessages(input.Messages...)
				if err := resp.SendStatus(ChatStatus{Phase: "generating"}); err != nil {
					return err
				}
				for v, err := range agent.GenerateStream(ctx, r, agent.WithModel(m), agent.WithMessages(sess.Messages()...)) {
					if err != nil {
						return err
					}
					if v.Done {
						sess.AddMessages(v.Response.Message)
						continue
					}
					if err := resp.SendChunk(v.Chunk); err != nil {
						return err
					}
				}
				if custom {
					sess.UpdateCustom(func(c ChatState) ChatState {
						c.Topics = append(slices.Clone(c.Topics), input.Messages[0].Text())
						return c
					})
				}
				if err := resp.EndTurn(); err != nil {
					return err
				}
			}
			return nil
		}, opts...)
}

// echoModel answers "echo: <last user text>", streaming it in two chunks.
func echoModel() *testmodel.Model {
	return testmodel.New("test/echo", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		text := "echo: " + req.Messages[len(req.Messages)-1].Text()
		half := len(text) / 2
		return testmodel.Turn{
			Chunks: []*abi.GenerateResponseChunk{
				{Content: []*abi.Part{abi.NewTextPart(text[:half])}},
				{Content: []*abi.Part{abi.NewTextPart(text[half:])}},
			},
			Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage(text), FinishReason: abi.FinishStop},
		}
	}))
}

// turn sends text and collects the turn's stream, summarised as a list of kinds.
func turn(t *testing.T, conn *session.SessionFlowConnection[ChatStatus, ChatState], text string) (kinds []string, snapshotID, answer string) {
	t.Helper()
	if err := conn.Send(&session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(text)}, CustomPatches: true}); err != nil {
		t.Fatal(err)
	}
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.Chunk != nil:
			kinds = append(kinds, "chunk")
			answer += c.Chunk.Text()
		case c.SnapshotCreated != "":
			kinds = append(kinds, "snapshot")
			snapshotID = c.SnapshotCreated
		case c.EndTurn:
			kinds = append(kinds, "end")
		case c.Artifact != nil:
			kinds = append(kinds, "artifact:"+c.Artifact.Name)
		case c.CustomPatch != nil:
			kinds = append(kinds, "patch")
		default:
			kinds = append(kinds, "status:"+c.Status.Phase)
		}
	}
	return kinds, snapshotID, answer
}

func TestSessionFlowChatWithSnapshots(t *testing.T) {
	r := agent.NewRegistry()
	snaps := session.NewInMemorySnapshotStore[ChatState]()
	flow := chatFlow(r, echoModel(), session.WithSnapshotStore(snaps),
		session.WithSnapshotCallback(session.SnapshotOn[ChatState](session.SnapshotEventTurnEnd, session.SnapshotEventInvocationEnd)))
	d := r.Lookup("/session-flow/chat").Desc()
	if d.StreamSchema == nil || d.InitSchema == nil {
		t.Errorf("descriptor lacks schemas: %+v", d)
	}
	ctx := context.Background()
	conn, err := flow.StreamBidi(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds, snap1, answer := turn(t, conn, "Hello! Tell me about Go.")
	if want := []string{"status:generating", "chunk", "chunk", "patch", "snapshot", "end"}; !slices.Equal(kinds, want) {
		t.Errorf("turn 1 stream = %v, want %v", kinds, want)
	}
	if answer != "echo: Hello! Tell me about Go." {
		t.Errorf("answer = %q", answer)
	}
	_, snap2, _ := turn(t, conn, "What are channels?")
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(stateOf(t, snaps, out).Messages) != 4 || out.SessionID == "" || out.SnapshotID != snap2 {
		t.Fatalf("output = %+v", out)
	}
	// The invocation-end snapshot is skipped: nothing changed since the last turn end.
	if !slices.Equal(out.SnapshotIDs, []string{snap1, snap2}) {
		t.Errorf("snapshot IDs = %v, want [%s %s]", out.SnapshotIDs, snap1, snap2)
	}
	list, err := snaps.ListSnapshots(ctx, out.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].SnapshotID != snap1 || list[1].ParentID != snap1 || list[1].TurnIndex != 1 || list[0].TurnIndex != 0 {
		t.Fatalf("snapshots = %s", mustJSON(t, list))
	}
	if got := list[1].State.Custom.Topics; !slices.Equal(got, []string{"Hello! Tell me about Go.", "What are channels?"}) {
		t.Errorf("custom state = %v", got)
	}
	if list[0].Event != session.SnapshotEventTurnEnd || len(list[0].State.Messages) != 2 {
		t.Errorf("first snapshot = %s", mustJSON(t, list[0]))
	}
}

func TestSessionFlowResumeAndBranch(t *testing.T) {
	r := agent.NewRegistry()
	snaps := session.NewInMemorySnapshotStore[ChatState]()
	flow := chatFlow(r, echoModel(), session.WithSnapshotStore(snaps))
	ctx := context.Background()
	conn, _ := flow.StreamBidi(ctx)
	_, base, _ := turn(t, conn, "one")
	conn.Close()
	first, _ := conn.Output()

	// Two connections resumed from the same snapshot branch into two children.
	var children []string
	for _, text := range []string{"two-a", "two-b"} {
		c, err := flow.StreamBidi(ctx, session.WithSnapshotID[ChatState](base))
		if err != nil {
			t.Fatal(err)
		}
		_, id, answer := turn(t, c, text)
		if answer != "echo: "+text {
			t.Errorf("answer = %q", answer)
		}
		c.Close()
		out, err := c.Output()
		if err != nil {
			t.Fatal(err)
		}
		if out.SessionID != first.SessionID || len(stateOf(t, snaps, out).Messages) != 4 {
			t.Errorf("resumed output = %s", mustJSON(t, out))
		}
		children = append(children, id)
	}
	for _, id := range children {
		s, err := snaps.GetSnapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.ParentID != base || s.TurnIndex != 1 {
			t.Errorf("child %s: parent %s turn %d, want parent %s turn 1", id, s.ParentID, s.TurnIndex, base)
		}
	}
	list, _ := snaps.ListSnapshots(ctx, first.SessionID)
	var ids []string
	for _, s := range list {
		ids = append(ids, s.SnapshotID)
	}
	if !slices.Equal(ids, []string{base, children[0], children[1]}) {
		t.Errorf("list = %v, want %v", ids, []string{base, children[0], children[1]})
	}

	// WithSessionID resumes the session's latest snapshot (the second branch).
	c, err := flow.StreamBidi(ctx, session.WithSessionID[ChatState](first.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := turn(t, c, "three")
	c.Close()
	out, _ := c.Output()
	texts := []string{}
	for _, m := range stateOf(t, snaps, out).Messages {
		texts = append(texts, m.Text())
	}
	if want := []string{"one", "echo: one", "two-b", "echo: two-b", "three", "echo: three"}; !slices.Equal(texts, want) {
		t.Errorf("messages = %v, want %v", texts, want)
	}
	if s, _ := snaps.GetSnapshot(ctx, id); s.ParentID != children[1] || s.TurnIndex != 2 {
		t.Errorf("latest resume: parent %s turn %d", s.ParentID, s.TurnIndex)
	}

	// An unknown session ID starts a new session with that ID.
	c, _ = flow.StreamBidi(ctx, session.WithSessionID[ChatState]("user-123"))
	turn(t, c, "hi")
	c.Close()
	if out, _ := c.Output(); out.SessionID != "user-123" || len(stateOf(t, snaps, out).Messages) != 2 {
		t.Errorf("new session by ID = %s", mustJSON(t, out))
	}
}

func TestSessionFlowClientManagedState(t *testing.T) {
	flow := chatFlow(agent.NewRegistry(), echoModel())
	ctx := context.Background()
	state := &session.SessionState[ChatState]{
		Messages: []*abi.Message{abi.NewUserTextMessage("earlier"), abi.NewModelTextMessage("echo: earlier")},
		Custom:   ChatState{Prefs: map[string]string{"tone": "dry"}},
	}
	conn, err := flow.StreamBidi(ctx, session.WithState(state))
	if err != nil {
		t.Fatal(err)
	}
	kinds, _, _ := turn(t, conn, "now")
	if slices.Contains(kinds, "snapshot") {
		t.Error("a flow without a store took a snapshot")
	}
	conn.Close()
	out, _ := conn.Output()
	if len(out.State.Messages) != 4 || out.State.Custom.Prefs["tone"] != "dry" || len(out.SnapshotIDs) != 0 {
		t.Errorf("output = %s", mustJSON(t, out))
	}
	// The client keeps out.State and sends it next time.
	conn, _ = flow.StreamBidi(ctx, session.WithState(out.State))
	turn(t, conn, "again")
	conn.Close()
	if out, _ := conn.Output(); len(out.State.Messages) != 6 {
		t.Errorf("second round has %d messages", len(out.State.Messages))
	}
}

func TestSessionFlowStartErrors(t *testing.T) {
	ctx := context.Background()
	noStore := chatFlow(agent.NewRegistry(), echoModel())
	if _, err := noStore.StreamBidi(ctx, session.WithSnapshotID[ChatState]("abc")); !errors.Is(err, session.ErrNoSnapshotStore) {
		t.Errorf("resume without store: %v", err)
	}
	flow := chatFlow(agent.NewRegistry(), echoModel(), session.WithSnapshotStore(session.NewInMemorySnapshotStore[ChatState]()))
	if _, err := flow.StreamBidi(ctx, session.WithSnapshotID[ChatState]("feed")); !errors.Is(err, session.ErrSnapshotNotFound) || !errors.Is(err, agent.ErrNotFound) || !strings.Contains(err.Error(), "feed") {
		t.Errorf("unknown snapshot: %v", err)
	}
	_, err := flow.StreamBidi(ctx, session.WithSnapshotID[ChatState]("feed"), session.WithState(&session.SessionState[ChatState]{}))
	if !errors.Is(err, session.ErrInvalidInit) {
		t.Errorf("snapshot and state: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a callback without a store did not panic")
		}
	}()
	chatFlow(agent.NewRegistry(), echoModel(), session.WithSnapshotCallback(session.SnapshotAlways[ChatState]()))
}

func TestSnapshotCallbacks(t *testing.T) {
	ctx := context.Background()
	type seen struct {
		event     session.SnapshotEvent
		turn      int
		msgs      int
		prevMsgs  int
		prevIsNil bool
	}
	var log []seen
	record := func(ctx context.Context, sc *session.SnapshotContext[ChatState]) bool {
		s := seen{event: sc.Event, turn: sc.TurnIndex, msgs: len(sc.State.Messages), prevIsNil: sc.PrevState == nil}
		if sc.PrevState != nil {
			s.prevMsgs = len(sc.PrevState.Messages)
		}
		log = append(log, s)
		return sc.Event == session.SnapshotEventInvocationEnd
	}
	snaps := session.NewInMemorySnapshotStore[ChatState]()
	flow := chatFlow(agent.NewRegistry(), echoModel(), session.WithSnapshotStore(snaps), session.WithSnapshotCallback(record))
	conn, _ := flow.StreamBidi(ctx)
	k1, _, _ := turn(t, conn, "a")
	turn(t, conn, "b")
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(k1, "snapshot") {
		t.Error("snapshot streamed although the callback declined")
	}
	want := []seen{
		{event: session.SnapshotEventTurnEnd, turn: 0, msgs: 2, prevIsNil: true},
		{event: session.SnapshotEventTurnEnd, turn: 1, msgs: 4, prevIsNil: true},
		{event: session.SnapshotEventInvocationEnd, turn: 1, msgs: 4, prevIsNil: true},
	}
	if !slices.Equal(log, want) {
		t.Errorf("callback saw %+v\nwant %+v", log, want)
	}
	if len(out.SnapshotIDs) != 1 {
		t.Fatalf("snapshots = %v", out.SnapshotIDs)
	}
	s, _ := snaps.GetSnapshot(ctx, out.SnapshotIDs[0])
	if s.Event != session.SnapshotEventInvocationEnd || s.TurnIndex != 1 {
		t.Errorf("snapshot = %+v", s)
	}

	// SnapshotNever with a store takes none.
	never := chatFlow(agent.NewRegistry(), echoModel(), session.WithSnapshotStore(snaps), session.WithSnapshotCallback(session.SnapshotNever[ChatState]()))
	conn, _ = never.StreamBidi(ctx)
	turn(t, conn, "x")
	conn.Close()
	if out, _ := conn.Output(); len(out.SnapshotIDs) != 0 {
		t.Errorf("SnapshotNever took %v", out.SnapshotIDs)
	}
}

func TestResponderArtifactsAndSessionThroughTools(t *testing.T) {
	r := agent.NewRegistry()
	type noteIn struct {
		Topic string `json:"topic"`
	}
	// A tool reaching the session through its context.
	remember := agent.DefineTool(r, "remember", "remembers a topic", func(ctx context.Context, in noteIn) (string, error) {
		sess := session.FromContext[ChatState](ctx)
		if sess == nil {
			return "", errors.New("no session in context")
		}
		sess.UpdateCustom(func(c ChatState) ChatState { c.Topics = append(c.Topics, in.Topic); return c })
		return "ok", nil
	})
	m := testmodel.New("test/tools").
		Reply(toolReq("remember", "1", map[string]any{"topic": "go"}), toolReq("remember", "2", map[string]any{"topic": "wasm"})).
		ReplyText("noted")
	snaps := session.NewInMemorySnapshotStore[ChatState]()
	flow := session.DefineSessionFlow(r, "notes",
		func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[ChatStatus], params *session.SessionFlowParams[ChatStatus, ChatState]) error {
			for input := range inCh {
				params.Session.AddMessages(input.Messages...)
				res, err := agent.Generate(ctx, r, agent.WithModel(m), agent.WithMessages(params.Session.Messages()...), agent.WithTools(remember))
				if err != nil {
					return err
				}
				params.Session.AddMessages(res.Message)
				for _, v := range []string{"v1", "v2"} {
					if err := resp.SendArtifact(&abi.Artifact{Name: "notes.md", Parts: []*abi.Part{abi.NewTextPart(v)}}); err != nil {
						return err
					}
				}
				resp.SendArtifact(&abi.Artifact{Name: "other.txt", Parts: []*abi.Part{abi.NewTextPart("x")}})
				if err := resp.EndTurn(); err != nil {
					return err
				}
			}
			return nil
		}, session.WithSnapshotStore(snaps))
	ctx := context.Background()
	c, _ := flow.StreamBidi(ctx)
	if err := c.SendText("remember go and wasm"); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var snapID string
	for chunk, err := range c.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case chunk.Artifact != nil:
			kinds = append(kinds, chunk.Artifact.Name)
		case chunk.SnapshotCreated != "":
			snapID = chunk.SnapshotCreated
		}
		if chunk.EndTurn {
			break // breaking on EndTurn, as the seed's examples do, must be safe
		}
	}
	c.Close()
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds, []string{"notes.md", "notes.md", "other.txt"}) {
		t.Errorf("streamed artifacts = %v", kinds)
	}
	// The output carries the artifacts, not the state: the store keeps it.
	arts := out.Artifacts
	if len(arts) != 2 || arts[0].Name != "notes.md" || arts[0].Parts[0].Text != "v2" || arts[1].Name != "other.txt" {
		t.Errorf("artifacts in the output = %s", mustJSON(t, arts))
	}
	topics := stateOf(t, snaps, out).Custom.Topics
	slices.Sort(topics)
	if !slices.Equal(topics, []string{"go", "wasm"}) {
		t.Errorf("topics = %v", topics)
	}
	s, err := snaps.GetSnapshot(ctx, snapID)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.State.Custom.Topics) != 2 || len(s.State.Artifacts) != 2 {
		t.Errorf("snapshot state = %s", mustJSON(t, s.State))
	}
}

func TestSessionConcurrentUse(t *testing.T) {
	r := agent.NewRegistry()
	flow := session.DefineSessionFlow(r, "busy",
		func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[ChatStatus], params *session.SessionFlowParams[ChatStatus, ChatState]) error {
			for range inCh {
				sess := session.FromContext[ChatState](ctx)
				var wg sync.WaitGroup
				for i := range 32 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						sess.AddMessages(abi.NewUserTextMessage(fmt.Sprint(i)))
						sess.UpdateCustom(func(c ChatState) ChatState {
							c.Topics = append(slices.Clone(c.Topics), fmt.Sprint(i))
							return c
						})
						sess.AddArtifact(&abi.Artifact{Name: fmt.Sprint(i % 4)})
						_ = sess.State()
						_ = sess.Messages()
					}()
				}
				wg.Wait()
				if err := resp.EndTurn(); err != nil {
					return err
				}
			}
			return nil
		})
	c, _ := flow.StreamBidi(context.Background())
	c.Send(&session.SessionFlowInput{})
	for range c.Receive() {
	}
	c.Close()
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(out.State.Messages) != 32 || len(out.State.Custom.Topics) != 32 || len(out.State.Artifacts) != 4 {
		t.Errorf("lost updates: %d messages, %d topics, %d artifacts", len(out.State.Messages), len(out.State.Custom.Topics), len(out.State.Artifacts))
	}
}

func TestSessionFlowCancel(t *testing.T) {
	r := agent.NewRegistry()
	started := make(chan struct{})
	flow := session.DefineSessionFlow(r, "stuck",
		func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[ChatStatus], params *session.SessionFlowParams[ChatStatus, ChatState]) error {
			<-inCh
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := flow.StreamBidi(ctx)
	c.SendText("hi")
	<-started
	cancel()
	if _, err := c.Output(); !errors.Is(err, context.Canceled) {
		t.Errorf("output: %v", err)
	}
	var iterErr error
	for _, err := range c.Receive() {
		iterErr = err
	}
	if !errors.Is(iterErr, context.Canceled) {
		t.Errorf("receive: %v", iterErr)
	}
}

// corruptStore flips a byte of every blob read, or hides it, or (damaged) reports
// every read damaged, as a store that checks its files does.
type corruptStore struct {
	store.Store
	mode string
}

func (c *corruptStore) Record(ctx context.Context, ns, id string) (store.Record, error) {
	if c.mode == "damaged" {
		return store.Record{}, fmt.Errorf("%w: record %s fails its checksum", store.ErrCorrupt, id)
	}
	return c.Store.Record(ctx, ns, id)
}

func (c *corruptStore) Head(ctx context.Context, ns, session string) (store.Record, error) {
	if c.mode == "damaged" {
		return store.Record{}, fmt.Errorf("%w: the head of %s fails its checksum", store.ErrCorrupt, session)
	}
	return c.Store.Head(ctx, ns, session)
}

func (c *corruptStore) Blob(ctx context.Context, ns, key string) ([]byte, error) {
	b, err := c.Store.Blob(ctx, ns, key)
	if err != nil || c.mode == "" {
		return b, err
	}
	switch c.mode {
	case "missing":
		return nil, fmt.Errorf("%w: blob %s", store.ErrNotFound, key)
	case "damaged":
		return nil, fmt.Errorf("%w: blob %s fails its checksum", store.ErrCorrupt, key)
	}
	b = slices.Clone(b)
	b[len(b)/2] ^= 0x20
	return b, nil
}

func TestSnapshotCorruptionIsDetected(t *testing.T) {
	for _, mode := range []string{"flip", "missing", "damaged"} {
		t.Run(mode, func(t *testing.T) {
			cs := &corruptStore{Store: store.NewMemory()}
			snaps := session.NewSnapshotStore[ChatState](cs)
			flow := chatFlow(agent.NewRegistry(), echoModel(), session.WithSnapshotStore(snaps))
			ctx := context.Background()
			c, _ := flow.StreamBidi(ctx)
			_, id, _ := turn(t, c, "precious")
			c.Close()
			c.Output()

			cs.mode = mode
			fresh := session.NewSnapshotStore[ChatState](cs) // no cache: reads from the store
			_, err := fresh.GetSnapshot(ctx, id)
			if !errors.Is(err, session.ErrSnapshotCorrupt) || !strings.Contains(err.Error(), id) {
				t.Fatalf("GetSnapshot of a corrupt snapshot: %v", err)
			}
			flow2 := chatFlow(agent.NewRegistry(), echoModel(), session.WithSnapshotStore(fresh))
			if _, err := flow2.StreamBidi(ctx, session.WithSnapshotID[ChatState](id)); !errors.Is(err, session.ErrSnapshotCorrupt) {
				t.Errorf("resuming a corrupt snapshot: %v", err)
			}
			if _, err := fresh.LatestSnapshot(ctx, c.SessionID()); !errors.Is(err, session.ErrSnapshotCorrupt) {
				t.Errorf("LatestSnapshot of a corrupt session: %v", err)
			}
		})
	}
}

func TestSnapshotRecordTamperingIsDetected(t *testing.T) {
	mem := store.NewMemory()
	snaps := session.NewSnapshotStore[ChatState](mem)
	ctx := context.Background()
	snap := &session.SessionSnapshot[ChatState]{SessionID: "s", Event: session.SnapshotEventTurnEnd, State: session.SessionState[ChatState]{Messages: []*abi.Message{abi.NewUserTextMessage("x")}}}
	if err := snaps.SaveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	rec, _ := mem.Record(ctx, "default", snap.SnapshotID)
	forged := strings.Replace(string(rec.Data), `"turnIndex":0`, `"turnIndex":9`, 1)
	other := store.NewMemory()
	other.Commit(ctx, "default", store.Record{ID: snap.SnapshotID, Session: "s", Data: []byte(forged)}, nil)
	_, err := session.NewSnapshotStore[ChatState](other).GetSnapshot(ctx, snap.SnapshotID)
	if !errors.Is(err, session.ErrSnapshotCorrupt) {
		t.Errorf("tampered record: %v", err)
	}
}

// TestSettledSnapshotTamperingIsDetected: a pending snapshot's outcome, kept beside its
// record, is verified on its own: it must name its snapshot, settle a pending one with a
// settled status, and its state's pieces must hash to their digests.
func TestSettledSnapshotTamperingIsDetected(t *testing.T) {
	ctx := context.Background()
	mem := store.NewMemory()
	snaps := session.NewSnapshotStore[ChatState](mem)
	save := func(status session.SnapshotStatus) string {
		snap := &session.SessionSnapshot[ChatState]{SessionID: "s" + string(status), Event: session.SnapshotEventDetach, Status: status,
			State: session.SessionState[ChatState]{Messages: []*abi.Message{abi.NewUserTextMessage("x")}}}
		if err := snaps.SaveSnapshot(ctx, snap); err != nil {
			t.Fatal(err)
		}
		return snap.SnapshotID
	}
	pending, completed := save(session.StatusPending), save(session.StatusCompleted)
	settled := &session.SessionSnapshot[ChatState]{SnapshotID: pending, Status: session.StatusCompleted, FinishReason: abi.FinishStop,
		State: session.SessionState[ChatState]{Messages: []*abi.Message{abi.NewUserTextMessage("x"), abi.NewModelTextMessage("done")}}}
	if err := snaps.SettleSnapshot(ctx, settled); err != nil {
		t.Fatal(err)
	}
	if err := snaps.SettleSnapshot(ctx, &session.SessionSnapshot[ChatState]{SnapshotID: pending, Status: session.StatusAborted}); !errors.Is(err, session.ErrConflict) {
		t.Errorf("a second settle: %v", err)
	}
	rec, _ := mem.Record(ctx, "default", pending)
	for name, tc := range map[string]struct {
		id      string
		outcome string
	}{
		"another snapshot's":    {pending, strings.Replace(string(rec.Outcome), pending, completed, 1)},
		"a pending outcome":     {pending, strings.Replace(string(rec.Outcome), `"status":"completed"`, `"status":"pending"`, 1)},
		"on a settled snapshot": {completed, strings.Replace(string(rec.Outcome), pending, completed, 1)},
		"not JSON":              {pending, "{"},
		"a state not stored":    {pending, strings.Replace(string(rec.Outcome), `"head":"`, `"head":"0`, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			forged := &outcomeStore{Store: mem, id: tc.id, outcome: []byte(tc.outcome)}
			_, err := session.NewSnapshotStore[ChatState](forged).GetSnapshot(ctx, tc.id)
			if !errors.Is(err, session.ErrSnapshotCorrupt) || !strings.Contains(err.Error(), tc.id) {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	// Untouched, it reads settled, under its own ID.
	if got, err := session.NewSnapshotStore[ChatState](mem).GetSnapshot(ctx, pending); err != nil || got.SnapshotID != pending || got.Status != session.StatusCompleted || len(got.State.Messages) != 2 {
		t.Errorf("the settled snapshot: %+v, %v", got, err)
	}
}

// outcomeStore answers the record id with another outcome.
type outcomeStore struct {
	store.Store
	id      string
	outcome []byte
}

func (o *outcomeStore) Record(ctx context.Context, ns, id string) (store.Record, error) {
	rec, err := o.Store.Record(ctx, ns, id)
	if id == o.id {
		rec.Outcome = o.outcome
	}
	return rec, err
}

// TestSnapshotsStoreOnlyWhatChanged checks structural sharing: each turn writes one new
// message segment, the record, and the custom state only when it changed.
func TestSnapshotsStoreOnlyWhatChanged(t *testing.T) {
	mem := store.NewMemory()
	snaps := session.NewSnapshotStore[ChatState](mem)
	ctx := context.Background()
	var msgs []*abi.Message
	parent := ""
	var msgBytes int
	const turns = 200
	for i := range turns {
		u := abi.NewUserTextMessage(fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 20)))
		m := abi.NewModelTextMessage(fmt.Sprintf("answer %d: %s", i, strings.Repeat("more words ", 40)))
		msgs = append(msgs, u, m)
		for _, x := range []*abi.Message{u, m} {
			b, _ := json.Marshal(x)
			msgBytes += len(b)
		}
		snap := &session.SessionSnapshot[ChatState]{SessionID: "long", ParentID: parent, TurnIndex: i, Event: session.SnapshotEventTurnEnd,
			State: session.SessionState[ChatState]{Messages: slices.Clone(msgs), Custom: ChatState{Prefs: map[string]string{"k": "v"}}}}
		if err := snaps.SaveSnapshot(ctx, snap); err != nil {
			t.Fatal(err)
		}
		parent = snap.SnapshotID
	}
	st, _ := mem.Stats(ctx, "default")
	// One segment per turn plus one custom-state blob shared by all.
	if st.Records != turns || st.Blobs != turns+1 {
		t.Errorf("stats = %+v, want %d records and %d blobs", st, turns, turns+1)
	}
	t.Logf("stored %d bytes for %d bytes of messages (ratio %.2f)", st.Bytes, msgBytes, float64(st.Bytes)/float64(msgBytes))
	if ratio := float64(st.Bytes) / float64(msgBytes); ratio > 3 {
		t.Errorf("stored %d bytes for %d bytes of messages: ratio %.2f, want under 3", st.Bytes, msgBytes, ratio)
	}
	// Reading back from a fresh store (no cache) gives every message, verified.
	got, err := session.NewSnapshotStore[ChatState](mem).GetSnapshot(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.State.Messages) != 2*turns || got.State.Messages[2*turns-1].Text() != msgs[2*turns-1].Text() {
		t.Errorf("read back %d messages", len(got.State.Messages))
	}
	// Rewriting history (SetMessages) still stores a correct snapshot.
	edited := append(slices.Clone(msgs[:3]), abi.NewModelTextMessage("rewritten"))
	snap := &session.SessionSnapshot[ChatState]{SessionID: "long", ParentID: parent, TurnIndex: turns, Event: session.SnapshotEventTurnEnd,
		State: session.SessionState[ChatState]{Messages: edited}}
	if err := snaps.SaveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	back, err := session.NewSnapshotStore[ChatState](mem).GetSnapshot(ctx, snap.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.State.Messages) != 4 || back.State.Messages[3].Text() != "rewritten" || back.State.Messages[2].Text() != msgs[2].Text() {
		t.Errorf("edited history read back as %s", mustJSON(t, back.State.Messages))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
