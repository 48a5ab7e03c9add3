package routes_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/store"
)

// userTurn is a turn's new message.
func userTurn(text string) []*abi.Message { return []*abi.Message{abi.NewUserTextMessage(text)} }

// Item 6: an agent with persistence saves every turn by itself and resumes a session
// by its ID alone, drafts, route, step and history included, as a new process would.
func TestPersistenceSavesEveryTurnAndResumesByID(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := epoch
			tick := func() time.Time { clock = clock.Add(time.Minute); return clock }
			m := routes.NewManager(st, routes.WithManagerClock(tick))
			// Each turn runs in an agent of its own, as after a restart: only the
			// manager's store carries the session from one to the next.
			process := func() (*routes.Agent, *testmodel.Model) {
				a, model, _ := newAgent(t, routes.WithPersistence(m), routes.WithClock(tick))
				flightRoute(a)
				hotelRoute(a)
				return a, model
			}

			a, model := process()
			reply(model, map[string]any{"routes": scores(90, 0), "data": map[string]any{"flight": map[string]any{"destination": "Paris"}}})
			reply(model, map[string]any{"message": "When do you leave?"})
			res, err := a.Respond(ctx, routes.RespondInput{History: userTurn("I want to fly to Paris"), Session: &routes.State{Metadata: map[string]any{"channel": "web"}}})
			if err != nil {
				t.Fatal(err)
			}
			id := res.Session.ID
			if id == "" {
				t.Fatal("a new session has no ID")
			}
			saved, err := m.Session(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := stateJSON(t, saved.State), stateJSON(t, res.Session); got != want {
				t.Errorf("saved state\n %s\nwant\n %s", got, want)
			}
			if saved.AgentName != a.Name() || saved.Metadata["channel"] != "web" || saved.CurrentStep != "ask_dates" || saved.MessageCount != 2 || saved.CreatedAt.IsZero() {
				t.Errorf("saved session %+v", saved)
			}

			a, model = process()
			reply(model, map[string]any{"routes": scores(10, 90), "data": map[string]any{"hotel": map[string]any{"city": "Rome"}}})
			reply(model, map[string]any{"message": "How many nights in Rome?"})
			if _, err := a.Respond(ctx, routes.RespondInput{SessionID: id, History: userTurn("Actually, a hotel in Rome first")}); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(testmodel_transcript(model.LastRequest()), "|"); got != "user: I want to fly to Paris|model: When do you leave?|user: Actually, a hotel in Rome first" {
				t.Errorf("the resumed conversation: %s", got)
			}

			a, model = process()
			reply(model, map[string]any{"routes": scores(90, 10)})
			reply(model, map[string]any{"message": "Back to Paris: when do you leave?"})
			res, err = a.Respond(ctx, routes.RespondInput{SessionID: id, History: userTurn("Now back to my flight")})
			if err != nil {
				t.Fatal(err)
			}
			if res.Session.CurrentRoute.ID != "flight" || res.Session.CurrentStep.ID != "ask_dates" || res.Session.Data()["destination"] != "Paris" || res.Session.DataFor("hotel")["city"] != "Rome" {
				t.Errorf("drafts, route and step not resumed: %s", stateJSON(t, res.Session))
			}
			saved, err = m.Session(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(saved.State.RouteHistory) != 3 || saved.MessageCount != 6 || !saved.UpdatedAt.After(saved.CreatedAt) || saved.State.Metadata["channel"] != "web" ||
				!saved.State.UpdatedAt.After(saved.State.CreatedAt) {
				t.Errorf("after three turns: %+v, state %s", saved, stateJSON(t, saved.State))
			}
			msgs, _ := m.Messages(ctx, id, 0)
			if last := msgs[len(msgs)-1]; last.Role != routes.RoleAgent || last.Route != "flight" || last.Step != "ask_dates" {
				t.Errorf("the answer's record %+v", last)
			}

			// A failed turn saves nothing.
			a, model = process()
			model.Push(testmodel.Turn{Err: errors.New("the model is down")})
			if _, err := a.Respond(ctx, routes.RespondInput{SessionID: id, History: userTurn("hello?")}); err == nil {
				t.Fatal("the failing model's turn succeeded")
			}
			if again, _ := m.Session(ctx, id); again.MessageCount != 6 || !again.UpdatedAt.Equal(saved.UpdatedAt) {
				t.Errorf("a failed turn changed the session: %+v", again)
			}
		})
	}
}

func stateJSON(t *testing.T, st *routes.State) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPersistenceRefusesWhatItCannotDo(t *testing.T) {
	ctx := context.Background()
	m := routes.NewManager(store.NewMemory())
	a, _, _ := newAgent(t, routes.WithPersistence(m))
	flightRoute(a)
	if _, err := a.Respond(ctx, routes.RespondInput{SessionID: "nope", History: userTurn("hi")}); !errors.Is(err, routes.ErrSessionNotFound) {
		t.Errorf("an unknown session: %v", err)
	}
	if _, err := a.Respond(ctx, routes.RespondInput{SessionID: "s", Session: &routes.State{}, History: userTurn("hi")}); !errors.Is(err, agent.ErrInvalidInput) {
		t.Errorf("a SessionID and a Session: %v", err)
	}
	b, _, _ := newAgent(t)
	flightRoute(b)
	if _, err := b.Respond(ctx, routes.RespondInput{SessionID: "s", History: userTurn("hi")}); !errors.Is(err, agent.ErrInvalidInput) {
		t.Errorf("a SessionID for an agent without persistence: %v", err)
	}
	if err := panics(func() { routes.New(agent.NewRegistry(), "x", routes.WithPersistence(nil)) }); !errors.Is(err, agent.ErrInvalidOption) {
		t.Errorf("WithPersistence(nil): %v", err)
	}
}

func TestPersistenceWithoutAutoSaveOnlyLoads(t *testing.T) {
	ctx := context.Background()
	m := routes.NewManager(store.NewMemory())
	s, err := m.CreateSession(ctx, routes.SessionData{ID: "trip", State: &routes.State{DataByRoute: map[string]routes.Data{"flight": {"destination": "Oslo"}}, CurrentRoute: &routes.RouteRef{ID: "flight"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, model, _ := newAgent(t, routes.WithPersistence(m, routes.WithAutoSave(false)))
	flightRoute(a)
	reply(model, map[string]any{"message": "When?"})
	res, err := a.Respond(ctx, routes.RespondInput{SessionID: s.ID, History: userTurn("Oslo it is")})
	if err != nil || res.Session.Data()["destination"] != "Oslo" || res.Session.CurrentStep.ID != "ask_dates" {
		t.Fatalf("the loaded session: %+v, %v", res, err)
	}
	if again, _ := m.Session(ctx, s.ID); again.MessageCount != 0 || again.CurrentStep != "" {
		t.Errorf("the turn was saved: %+v", again)
	}
}

// Two turns at once on one session: one is saved, the other fails with
// store.ErrConflict rather than overwrite it, and leaves no messages.
func TestPersistenceSerializesTurnsOfOneSession(t *testing.T) {
	ctx := context.Background()
	m := routes.NewManager(store.NewMemory())
	r := agent.NewRegistry()
	var arrived sync.WaitGroup
	arrived.Add(2)
	testmodel.Define(r, "test/both", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		arrived.Done()
		arrived.Wait() // both turns have loaded the session
		return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage(`{"message": "Where to?"}`), FinishReason: abi.FinishStop}}
	}))
	a := routes.New(r, "Racer", routes.WithGenerateOpts(agent.WithModelName("test/both")), routes.WithPersistence(m))
	flightRoute(a)
	if _, err := m.CreateSession(ctx, routes.SessionData{ID: "trip"}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, text := range []string{"first", "second"} {
		go func() {
			_, err := a.Respond(ctx, routes.RespondInput{SessionID: "trip", History: userTurn(text)})
			errs <- err
		}()
	}
	var failed []error
	for range 2 {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) != 1 || !errors.Is(failed[0], store.ErrConflict) {
		t.Fatalf("want one turn refused with ErrConflict, got %v", failed)
	}
	msgs, _ := m.Messages(ctx, "trip", 0)
	var texts []string
	for _, msg := range msgs {
		texts = append(texts, msg.Content)
	}
	if len(texts) != 2 || texts[1] != "Where to?" || !slices.Contains([]string{"first", "second"}, texts[0]) {
		t.Errorf("messages %v: want only the saved turn's", texts)
	}
}

// A kept session's own context changes between turns through the manager.
func TestManagerUpdateContextReachesTheNextTurn(t *testing.T) {
	ctx := context.Background()
	m := routes.NewManager(store.NewMemory())
	a, model, _ := newAgent(t, routes.WithPersistence(m), routes.WithIdentity("Hello {{user}}."), routes.WithContext(map[string]any{"user": "guest"}))
	flightRoute(a)
	reply(model, map[string]any{"message": "Where to?"})
	res, err := a.Respond(ctx, routes.RespondInput{History: userTurn("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpdateContext(ctx, res.Session.ID, map[string]any{"user": "Ann"}); err != nil {
		t.Fatal(err)
	}
	reply(model, map[string]any{"message": "Where to, Ann?"})
	if _, err := a.Respond(ctx, routes.RespondInput{SessionID: res.Session.ID, History: userTurn("Oslo")}); err != nil {
		t.Fatal(err)
	}
	if sys := systemOf(model.LastRequest()); !strings.Contains(sys, "Hello Ann.") {
		t.Errorf("the session's context is not in the prompt:\n%s", sys)
	}
	if _, err := m.UpdateContext(ctx, "nope", map[string]any{"user": "Bob"}); !errors.Is(err, routes.ErrSessionNotFound) {
		t.Errorf("an unknown session: %v", err)
	}
}
