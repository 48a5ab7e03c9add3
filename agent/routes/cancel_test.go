package routes_test

import (
	"context"
	"errors"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
)

// TestCancellation: cancelling the context ends a turn on both paths, whatever the
// model is doing, and the state handed in is untouched.
func TestCancellation(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			r := agent.NewRegistry()
			started := make(chan struct{})
			agent.DefineModel(r, "test/slow", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			})
			a := routes.New(r, "Slow", routes.WithGenerateOpts(agent.WithModelName("test/slow")))
			flightRoute(a)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-started
				cancel()
			}()
			st := routes.NewState("s")
			_, err := w.do(ctx, a, routes.RespondInput{History: []*abi.Message{abi.NewUserTextMessage("hi")}, Session: st})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("want context.Canceled, got %v", err)
			}
			if st.CurrentRoute != nil || st.DataByRoute != nil {
				t.Errorf("the state handed in changed: %+v", st)
			}
		})
	}
}

// TestBreakingOutOfTheStream: a consumer that stops reading ends the turn; nothing is
// yielded after it stopped.
func TestBreakingOutOfTheStream(t *testing.T) {
	a, m, _ := newAgent(t)
	flightRoute(a)
	m.Push(testmodelTurn(`{"message": "Where`, ` would you`, ` like to fly?"}`))
	n := 0
	for c, err := range a.RespondStream(t.Context(), routes.RespondInput{History: []*abi.Message{abi.NewUserTextMessage("hi")}}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if c.Delta != "Where" {
			t.Errorf("first delta %q", c.Delta)
		}
		break
	}
	if n != 1 {
		t.Errorf("%d chunks", n)
	}
}
