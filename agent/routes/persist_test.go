package routes_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
)

// stores opens each store kind the manager must work on.
func stores(t *testing.T) map[string]store.Store {
	db, err := badgerstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return map[string]store.Store{"memory": store.NewMemory(), "badger": db}
}

func TestManager(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := epoch
			m := routes.NewManager(st, routes.WithManagerClock(func() time.Time { clock = clock.Add(time.Second); return clock }))

			first, err := m.CreateSession(ctx, routes.SessionData{UserID: "u1", AgentName: "Travel Agent", Metadata: map[string]any{"channel": "web"}})
			if err != nil {
				t.Fatal(err)
			}
			if first.ID == "" || first.Status != routes.SessionActive {
				t.Fatalf("created %+v", first)
			}
			if _, err := m.CreateSession(ctx, routes.SessionData{ID: first.ID}); err == nil {
				t.Errorf("a second session with the same ID was created")
			}
			second, _ := m.CreateSession(ctx, routes.SessionData{ID: "s2", UserID: "u1"})
			m.CreateSession(ctx, routes.SessionData{ID: "other", UserID: "u2"})

			if got, err := m.FindActiveSession(ctx, "u1"); err != nil || got.ID != "s2" {
				t.Errorf("active session of u1: %+v, %v", got, err)
			}
			if _, err := m.Abandon(ctx, second.ID); err != nil {
				t.Fatal(err)
			}
			if got, err := m.FindActiveSession(ctx, "u1"); err != nil || got.ID != first.ID {
				t.Errorf("after abandoning s2, active: %+v, %v", got, err)
			}
			all, err := m.UserSessions(ctx, "u1", 0)
			if err != nil || len(all) != 2 || all[0].ID != "s2" || all[0].Status != routes.SessionAbandoned || all[1].ID != first.ID {
				t.Errorf("sessions of u1: %v", ids(all))
			}
			if one, _ := m.UserSessions(ctx, "u1", 1); len(one) != 1 || one[0].ID != "s2" {
				t.Errorf("limit 1: %v", ids(one))
			}

			state := &routes.State{CurrentRoute: &routes.RouteRef{ID: "flight"}, CurrentStep: &routes.StepRef{ID: "ask_dates"}, DataByRoute: map[string]routes.Data{"flight": {"destination": "Oslo"}}}
			saved, err := m.SaveState(ctx, first.ID, state)
			if err != nil || saved.CurrentRoute != "flight" || saved.CurrentStep != "ask_dates" || saved.State.Data()["destination"] != "Oslo" {
				t.Errorf("SaveState: %+v, %v", saved, err)
			}
			for i, msg := range []routes.MessageData{
				{Role: routes.RoleUser, Content: "A flight to Oslo"},
				{Role: routes.RoleAgent, Content: "When?", Route: "flight", Step: "ask_dates"},
				{Role: routes.RoleUser, Content: "Friday"},
			} {
				msg.SessionID = first.ID
				if _, err := m.SaveMessage(ctx, msg); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
			if _, err := m.SaveMessage(ctx, routes.MessageData{SessionID: "nope", Role: routes.RoleUser}); !errors.Is(err, routes.ErrSessionNotFound) {
				t.Errorf("a message of an unknown session: %v", err)
			}
			msgs, err := m.Messages(ctx, first.ID, 2)
			if err != nil || len(msgs) != 2 || msgs[0].Content != "When?" || msgs[1].Content != "Friday" {
				t.Errorf("last two messages: %+v, %v", msgs, err)
			}
			history, err := m.History(ctx, first.ID, 0)
			if err != nil || len(history) != 3 || history[1].Role != "model" || history[1].Text() != "When?" {
				t.Errorf("history: %v, %v", history, err)
			}
			done, err := m.Complete(ctx, first.ID)
			if err != nil || done.Status != routes.SessionCompleted || done.CompletedAt == nil || done.MessageCount != 3 || done.LastMessageAt == nil || done.State.Data()["destination"] != "Oslo" {
				t.Errorf("completed: %+v, %v", done, err)
			}
			if _, err := m.FindActiveSession(ctx, "u1"); !errors.Is(err, routes.ErrSessionNotFound) {
				t.Errorf("no active session left: %v", err)
			}
			if _, err := m.Session(ctx, "missing"); !errors.Is(err, routes.ErrSessionNotFound) {
				t.Errorf("unknown session: %v", err)
			}
			if _, err := m.Complete(ctx, "missing"); !errors.Is(err, routes.ErrSessionNotFound) {
				t.Errorf("completing an unknown session: %v", err)
			}
			if _, err := m.SetStatus(ctx, first.ID, "paused"); err == nil {
				t.Errorf("an unknown status was accepted")
			}
		})
	}
}

// TestManagerConcurrentWriters: writers racing on one session's messages and status
// all land, each once, in some order.
func TestManagerConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	m := routes.NewManager(store.NewMemory())
	s, err := m.CreateSession(ctx, routes.SessionData{UserID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := m.SaveMessage(ctx, routes.MessageData{SessionID: s.ID, Role: routes.RoleUser, Content: fmt.Sprint(i)}); err != nil {
				t.Error(err)
			}
			if _, err := m.SaveState(ctx, s.ID, &routes.State{Metadata: map[string]any{"writer": i}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	msgs, err := m.Messages(ctx, s.ID, 0)
	if err != nil || len(msgs) != 8 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	seen := map[string]bool{}
	for _, msg := range msgs {
		seen[msg.Content] = true
	}
	if len(seen) != 8 {
		t.Errorf("messages lost or doubled: %v", seen)
	}
}

func ids(sessions []*routes.SessionData) []string {
	var out []string
	for _, s := range sessions {
		out = append(out, s.ID)
	}
	return out
}
