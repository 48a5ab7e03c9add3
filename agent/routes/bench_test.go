package routes_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
)

// instantRouter answers at once, as a model following the agent's schemas would: the
// routing call scores the flight route, the answer asks for the date. It counts calls.
func instantRouter(calls *atomic.Int64) agent.Model {
	routing := abi.NewModelTextMessage(`{"routes": {"flight": 90, "hotel": 5}}`)
	answer := abi.NewModelTextMessage(`{"message": "Which day do you want to leave for Oslo?", "departureDate": null}`)
	plain := abi.NewModelTextMessage("Which day do you want to leave for Oslo?")
	return agent.NewModel("bench/instant", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		calls.Add(1)
		msg := plain
		if req.Output != nil && req.Output.Schema != nil {
			msg = answer
			if _, ok := req.Output.Schema["properties"].(map[string]any)["routes"]; ok {
				msg = routing
			}
		}
		if cb != nil {
			if err := cb(ctx, &abi.GenerateResponseChunk{Content: msg.Content}); err != nil {
				return nil, err
			}
		}
		return &abi.GenerateResponse{Message: msg, FinishReason: abi.FinishStop}, nil
	})
}

// BenchmarkRoutedTurn measures one routed turn with an instant model, so what remains
// is the framework's cost, and reports the model calls a turn makes: a plain
// agent.Generate for reference, a turn with one route (no routing call), a turn with
// two routes (routing call, then the answer), and the same streamed.
func BenchmarkRoutedTurn(b *testing.B) {
	history := []*abi.Message{
		abi.NewUserTextMessage("I want to fly to Oslo"),
		abi.NewModelTextMessage("When do you want to leave?"),
		abi.NewUserTextMessage("Hmm, let me think about it"),
	}
	state := &routes.State{
		CurrentRoute: &routes.RouteRef{ID: "flight", Title: "Book Flight"},
		CurrentStep:  &routes.StepRef{ID: "ask_dates"},
		DataByRoute:  map[string]routes.Data{"flight": {"destination": "Oslo"}},
		StepByRoute:  map[string]string{"flight": "ask_dates"},
	}
	setup := func(routesN int) (*routes.Agent, *atomic.Int64) {
		var calls atomic.Int64
		r := agent.NewRegistry()
		r.MustRegister(instantRouter(&calls))
		a := routes.New(r, "Travel Agent", routes.WithGenerateOpts(agent.WithModelName("bench/instant")),
			routes.WithIdentity("I help travellers."))
		a.CreateGuideline(routes.Guideline{Action: "Be brief"})
		flightRoute(a)
		if routesN > 1 {
			hotelRoute(a)
		}
		return a, &calls
	}
	report := func(b *testing.B, calls *atomic.Int64) {
		b.ReportMetric(float64(calls.Load())/float64(b.N), "calls/turn")
	}
	ctx := context.Background()

	b.Run("generate", func(b *testing.B) {
		var calls atomic.Int64
		r := agent.NewRegistry()
		r.MustRegister(instantRouter(&calls))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := agent.Generate(ctx, r, agent.WithModelName("bench/instant"), agent.WithSystem("You are a travel agent."), agent.WithMessages(history...)); err != nil {
				b.Fatal(err)
			}
		}
		report(b, &calls)
	})
	b.Run("generate+schema", func(b *testing.B) {
		var calls atomic.Int64
		r := agent.NewRegistry()
		r.MustRegister(instantRouter(&calls))
		out := map[string]any{"type": "object", "properties": map[string]any{
			"message": map[string]any{"type": "string"}, "departureDate": map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "null"}}},
		}, "required": []any{"message"}, "additionalProperties": false}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := agent.Generate(ctx, r, agent.WithModelName("bench/instant"), agent.WithSystem("You are a travel agent."), agent.WithMessages(history...), agent.WithOutputSchema(out)); err != nil {
				b.Fatal(err)
			}
		}
		report(b, &calls)
	})
	for _, tc := range []struct {
		name   string
		routes int
		stream bool
	}{{"routes=1", 1, false}, {"routes=2", 2, false}, {"routes=2,stream", 2, true}} {
		b.Run(tc.name, func(b *testing.B) {
			a, calls := setup(tc.routes)
			in := routes.RespondInput{History: history, Session: state}
			b.ReportAllocs()
			for b.Loop() {
				if tc.stream {
					for _, err := range a.RespondStream(ctx, in) {
						if err != nil {
							b.Fatal(err)
						}
					}
					continue
				}
				res, err := a.Respond(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				if res.Session.CurrentStep.ID != "ask_dates" {
					b.Fatalf("step %s", res.Session.CurrentStep.ID)
				}
			}
			report(b, calls)
		})
	}
}
