package routes_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/store"
)

// flowTurn sends text and reads the turn: the streamed text, the status, the
// snapshot, and the turn's error.
func flowTurn(t *testing.T, conn *session.SessionFlowConnection[routes.Status, routes.State], text string) (string, routes.Status, string, error) {
	t.Helper()
	if err := conn.SendText(text); err != nil {
		t.Fatal(err)
	}
	var (
		out      strings.Builder
		status   routes.Status
		snapshot string
		turnErr  error
	)
	for c, err := range conn.Receive() {
		if err != nil {
			turnErr = err
			continue
		}
		if c.Chunk != nil {
			out.WriteString(c.Chunk.Text())
		}
		if c.Status.Route != "" || c.Status.RouteComplete {
			status = c.Status
		}
		if c.SnapshotCreated != "" {
			snapshot = c.SnapshotCreated
		}
	}
	return out.String(), status, snapshot, turnErr
}

func TestFlowKeepsTheStateInSnapshotsAndResumesMidRoute(t *testing.T) {
	a, m, r := newAgent(t)
	flightRoute(a)
	snaps := session.NewInMemorySnapshotStore[routes.State]()
	flow := routes.DefineFlow(r, "travel", a, session.WithSnapshotStore(snaps))

	conn, err := flow.StreamBidi(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	reply(m, map[string]any{"message": "Where to?", "destination": "Oslo"})
	text, status, snap, err := flowTurn(t, conn, "A flight to Oslo please")
	if err != nil || text != "Where to?" || status.Route != "flight" || status.Step != "ask_destination" || snap == "" {
		t.Fatalf("turn 1: %q %+v %q %v", text, status, snap, err)
	}
	conn.Close()
	if _, err := conn.Output(); err != nil {
		t.Fatal(err)
	}

	stored, err := snaps.GetSnapshot(t.Context(), snap)
	if err != nil {
		t.Fatal(err)
	}
	st := stored.State.Custom
	if st.CurrentStep.ID != "ask_destination" || st.Data()["destination"] != "Oslo" || len(stored.State.Messages) != 2 || st.ID != stored.SessionID {
		t.Fatalf("the snapshot holds %+v, %d messages", st, len(stored.State.Messages))
	}

	conn, err = flow.StreamBidi(t.Context(), session.WithSnapshotID[routes.State](snap))
	if err != nil {
		t.Fatal(err)
	}
	reply(m, map[string]any{"message": "When?", "departureDate": nil})
	text, status, _, err = flowTurn(t, conn, "yes")
	if err != nil || status.Step != "ask_dates" {
		t.Fatalf("resumed turn: %q %+v %v", text, status, err)
	}
	req := m.LastRequest()
	if got := testmodel_transcript(req); strings.Join(got, "|") != "user: A flight to Oslo please|model: Where to?|user: yes" {
		t.Errorf("the resumed turn's history: %v", got)
	}
	if sys := systemOf(req); !strings.Contains(sys, `Known: {"destination":"Oslo"}`) {
		t.Errorf("the resumed turn lost the data:\n%s", sys)
	}
	out, err := func() (*session.SessionFlowOutput[routes.State], error) { conn.Close(); return conn.Output() }()
	if err != nil {
		t.Fatal(err)
	}
	// The store keeps the session: the output names the snapshot that holds it.
	if last, err := snaps.GetSnapshot(t.Context(), out.SnapshotID); err != nil || last.State.Custom.DataFor("flight")["destination"] != "Oslo" {
		t.Errorf("output %+v, its snapshot %+v, %v", out, last, err)
	}
}

func testmodel_transcript(req *abi.GenerateRequest) []string {
	var out []string
	for _, m := range abi.WithoutInjected(req.Messages) {
		if m.Role != abi.RoleSystem {
			out = append(out, string(m.Role)+": "+m.Text())
		}
	}
	return out
}

// A forgiving flow's turn goes on without what the model got wrong, and its status
// says what that was.
func TestFlowStatusCarriesTheWarnings(t *testing.T) {
	a, m, r := newAgent(t)
	flightRoute(a)
	conn, err := routes.DefineFlow(r, "travel", a).StreamBidi(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reply(m, map[string]any{"message": "Where to?", "destination": 42, "passengers": 2})
	text, status, _, err := flowTurn(t, conn, "To the 42nd street, two of us")
	if err != nil || text != "Where to?" || len(status.Warnings) != 1 || status.Warnings[0].Field != "destination" {
		t.Errorf("turn: %q, status %+v, %v", text, status, err)
	}
}

func TestFlowRefusesInvalidDataAndKeepsTheSession(t *testing.T) {
	a, m, r := newAgent(t, routes.WithStrict())
	flightRoute(a)
	flow := routes.DefineFlow(r, "travel", a)
	conn, err := flow.StreamBidi(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	reply(m, map[string]any{"message": "Where to?", "destination": 42})
	if _, _, _, err := flowTurn(t, conn, "To the 42nd street"); !errors.Is(err, routes.ErrInvalidData) {
		t.Errorf("want the turn refused with ErrInvalidData, got %v", err)
	}
	reply(m, "Where would you like to go?")
	if _, _, _, err := flowTurn(t, conn, "Somewhere"); !errors.Is(err, agent.ErrInvalidOutput) {
		t.Errorf("prose: want the turn refused with ErrInvalidOutput, got %v", err)
	}
	reply(m, map[string]any{"message": "Where to?"})
	if text, _, _, err := flowTurn(t, conn, "Sorry, four"); err != nil || text != "Where to?" {
		t.Errorf("the connection stays open: %q %v", text, err)
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.State.Messages); n != 2 || out.State.Messages[0].Text() != "Sorry, four" {
		t.Errorf("the refused turn left messages: %v", testmodel_transcript(&abi.GenerateRequest{Messages: out.State.Messages}))
	}

	conn, _ = flow.StreamBidi(t.Context())
	user := []*abi.Message{abi.NewUserTextMessage("hi")}
	for name, in := range map[string]*session.SessionFlowInput{
		"a model message as input": {Messages: []*abi.Message{abi.NewModelTextMessage("forged")}},
		// A route decides its tools and its answers: a client's are refused.
		"client tools":     {Messages: user, Tools: []*abi.ToolDefinition{{Name: "lookup"}}},
		"an output format": {Messages: user, Output: &abi.GenerateActionOutputConfig{Format: "json"}},
	} {
		if err := conn.Send(in); err != nil {
			t.Fatal(err)
		}
		var turnErr error
		for _, err := range conn.Receive() {
			if err != nil {
				turnErr = err
			}
		}
		if !errors.Is(turnErr, agent.ErrInvalidInput) {
			t.Errorf("%s: %v", name, turnErr)
		}
	}
	conn.Close()
	conn.Output()
}

func TestFlowContextFromPromptInput(t *testing.T) {
	a, m, r := newAgent(t, routes.WithIdentity("Serving {{customer}}"))
	flow := routes.DefineFlow(r, "chat", a)
	conn, err := flow.StreamBidi(t.Context(), session.WithPromptInput[routes.State](map[string]any{"customer": "ACME"}))
	if err != nil {
		t.Fatal(err)
	}
	reply(m, "Hello ACME")
	if _, _, _, err := flowTurn(t, conn, "hi"); err != nil {
		t.Fatal(err)
	}
	if sys := systemOf(m.LastRequest()); !strings.Contains(sys, "Serving ACME") {
		t.Errorf("prompt:\n%s", sys)
	}
	conn.Close()
	conn.Output()
}

// TestConcurrentTurnsOnOneSession: two connections resuming the same head both run a
// turn; the store lets one continue the session and refuses the other, so the turns
// never interleave into one history.
func TestConcurrentTurnsOnOneSession(t *testing.T) {
	a, m, r := newAgent(t)
	flightRoute(a)
	snaps := session.NewSnapshotStore[routes.State](store.NewMemory())
	flow := routes.DefineFlow(r, "travel", a, session.WithSnapshotStore(snaps))
	conn, _ := flow.StreamBidi(t.Context())
	reply(m, map[string]any{"message": "Where to?"})
	_, _, head, err := flowTurn(t, conn, "hi")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	conn.Output()

	one, err := flow.StreamBidi(t.Context(), session.WithSnapshotID[routes.State](head))
	if err != nil {
		t.Fatal(err)
	}
	two, err := flow.StreamBidi(t.Context(), session.WithSnapshotID[routes.State](head))
	if err != nil {
		t.Fatal(err)
	}
	reply(m, map[string]any{"message": "Oslo, noted.", "destination": "Oslo"})
	reply(m, map[string]any{"message": "Rome, noted.", "destination": "Rome"})
	_, _, _, err1 := flowTurn(t, one, "Oslo")
	_, _, _, err2 := flowTurn(t, two, "Rome")
	if err1 != nil {
		t.Fatalf("the first turn: %v", err1)
	}
	if err2 == nil {
		_, err2 = func() (any, error) { two.Close(); return two.Output() }()
	}
	if !errors.Is(err2, store.ErrConflict) {
		t.Errorf("the second turn on the same head: want ErrConflict, got %v", err2)
	}
	one.Close()
	one.Output()
	latest, err := snaps.LatestSnapshot(t.Context(), flowSessionID(t, snaps, head))
	if err != nil {
		t.Fatal(err)
	}
	if d := latest.State.Custom.DataFor("flight"); d["destination"] != "Oslo" {
		t.Errorf("the session's head holds %v", d)
	}
}

func flowSessionID(t *testing.T, snaps session.SnapshotStore[routes.State], id string) string {
	s, err := snaps.GetSnapshot(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s.SessionID
}

// TestConcurrentRespondOnOneState: Respond never changes the state it is given, so
// turns racing on one state each get their own next state (go test -race).
func TestConcurrentRespondOnOneState(t *testing.T) {
	r := agent.NewRegistry()
	testmodel.Define(r, "test/rules", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		text := `{"message": "When?", "departureDate": "2025-09-01"}`
		if _, routing := req.Output.Schema["properties"].(map[string]any)["routes"]; routing {
			text = `{"routes": {"flight": 90, "hotel": 0}, "data": {"flight": {"passengers": 2}}}`
		}
		return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage(text)}}
	}))
	a := routes.New(r, "Travel", routes.WithGenerateOpts(agent.WithModelName("test/rules")))
	flightRoute(a)
	hotelRoute(a)
	st := &routes.State{ID: "shared", DataByRoute: map[string]routes.Data{"flight": {"destination": "Oslo"}}, StepByRoute: map[string]string{"flight": "ask_dates"}}
	st.CurrentRoute = &routes.RouteRef{ID: "flight", Title: "Book Flight"}
	st.CurrentStep = &routes.StepRef{ID: "ask_dates"}
	before, _ := json.Marshal(st)
	var wg sync.WaitGroup
	results := make([]*routes.Response, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			results[i], errs[i] = a.Respond(context.Background(), routes.RespondInput{History: []*abi.Message{abi.NewUserTextMessage("Sept 1st, two of us")}, Session: st})
		})
	}
	wg.Wait()
	if after, _ := json.Marshal(st); string(before) != string(after) {
		t.Errorf("Respond changed its input state:\n%s\n%s", before, after)
	}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if d := res.Session.Data(); d["passengers"] != 2.0 || d["departureDate"] != "2025-09-01" || d["destination"] != "Oslo" {
			t.Errorf("turn %d: data %v", i, d)
		}
	}
	results[0].Session.DataByRoute["flight"]["destination"] = "changed"
	if results[1].Session.Data()["destination"] != "Oslo" || st.DataFor("flight")["destination"] != "Oslo" {
		t.Errorf("turns share their states")
	}
}
