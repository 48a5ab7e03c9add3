// Travel: a routed conversation (seed 002) that books flights and hotels, where the
// traveller changes their mind midway and comes back.
//
// Two routes collect their data step by step: the flight's destination, date and
// passengers, the hotel's city and nights. The traveller starts a flight, switches to
// a hotel, completes it, and returns to the flight, which resumes where it was with
// its destination kept. Each turn shows the route, the step, the data, and the model
// calls it took: two with routing, none when the route completes.
//
// The model is a small rule-based stand-in (package rules: regular expressions over
// the traveller's words, answers from the step's prompt), so the example runs offline.
//
//	go run ./examples/travel
//
// The same agent is written as an agent file in travel.yaml, its model the same rules
// as a WebAssembly plugin (model/), for terrarium serve and terrarium chat:
//
//	go run ./cmd/terrarium serve ./examples/travel
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/examples/travel/rules"
)

// Flight is the flight route's data.
type Flight struct {
	Destination   string `json:"destination,omitempty" jsonschema:"description=City of arrival"`
	DepartureDate string `json:"departureDate,omitempty" jsonschema:"description=YYYY-MM-DD"`
	Passengers    int    `json:"passengers,omitempty" jsonschema:"minimum=1,maximum=9"`
}

// Hotel is the hotel route's data.
type Hotel struct {
	City   string `json:"city,omitempty"`
	Nights int    `json:"nights,omitempty" jsonschema:"minimum=1,maximum=30"`
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "travel:", err)
		os.Exit(1)
	}
}

func known(field string) func(routes.Data) bool {
	return func(d routes.Data) bool { return d.Has(field) }
}

// travelAgent defines Skye, the travel agent, answering with the named model: a
// flight route (destination, date, passengers) and a hotel route (city, nights).
func travelAgent(r *agent.Registry, model string) *routes.Agent {
	a := routes.New(r, "Skye",
		routes.WithDescription("A travel agent."),
		routes.WithGoal("Book the trip the traveller wants."),
		routes.WithGenerateOpts(agent.WithModelName(model)),
	)
	a.CreateGuideline(routes.Guideline{Action: "Confirm what you understood before asking the next question"})
	flight := a.CreateRoute(routes.RouteOptions{
		ID: "flight", Title: "Book a flight", Conditions: []string{"The traveller wants to fly somewhere"},
		Schema: routes.SchemaFor[Flight](), Prohibitions: []string{"Book without a departure date"},
	})
	flight.InitialStep().
		NextStep(routes.StepSpec{ID: "ask_destination", Prompt: "Ask the destination", Collect: []string{"destination"}, SkipIf: known("destination")}).
		NextStep(routes.StepSpec{ID: "ask_date", Prompt: "Ask the day of departure", Collect: []string{"departureDate"}, Requires: []string{"destination"}}).
		NextStep(routes.StepSpec{ID: "ask_passengers", Prompt: "Ask the number of passengers", Collect: []string{"passengers"}}).
		NextStep(routes.StepSpec{Step: routes.EndRoute})
	hotel := a.CreateRoute(routes.RouteOptions{
		ID: "hotel", Title: "Book a hotel", Conditions: []string{"The traveller wants a room"},
		Schema: routes.SchemaFor[Hotel](),
	})
	hotel.InitialStep().
		NextStep(routes.StepSpec{ID: "ask_city", Prompt: "Ask the city", Collect: []string{"city"}}).
		NextStep(routes.StepSpec{ID: "ask_nights", Prompt: "Ask the number of nights", Collect: []string{"nights"}}).
		NextStep(routes.StepSpec{Step: routes.EndRoute})
	return a
}

func run(ctx context.Context, w io.Writer) error {
	r := agent.NewRegistry()
	var calls atomic.Int64
	testmodel.Define(r, "demo/travel", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		calls.Add(1)
		return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage(rules.Answer(req)), FinishReason: abi.FinishStop}}
	}))

	a := travelAgent(r, "demo/travel")

	var history []*abi.Message
	state := routes.NewState("trip-1")
	for _, text := range []string{
		"I'd like to fly to Lisbon",
		"Actually, I changed my mind: find me a hotel in Porto instead",
		"3 nights",
		"Now back to my flight",
		"On 2025-07-14",
		"2 passengers",
	} {
		fmt.Fprintf(w, "traveller: %s\n", text)
		history = append(history, abi.NewUserTextMessage(text))
		before := calls.Load()
		var res *routes.Response
		var reply strings.Builder
		for chunk, err := range a.RespondStream(ctx, routes.RespondInput{History: history, Session: state}) {
			if err != nil {
				return err
			}
			reply.WriteString(chunk.Delta)
			if chunk.Done {
				res = &routes.Response{Message: chunk.Accumulated, Session: chunk.Session, RouteComplete: chunk.RouteComplete}
			}
		}
		state = res.Session
		if res.Message != "" {
			history = append(history, abi.NewModelTextMessage(res.Message))
			fmt.Fprintf(w, "skye: %s\n", reply.String())
		}
		data, _ := json.Marshal(state.Data())
		fmt.Fprintf(w, "  [route %s, step %s, data %s, model calls: %d]\n", state.CurrentRoute.ID, state.CurrentStep.ID, data, calls.Load()-before)
		if res.RouteComplete {
			fmt.Fprintf(w, "  [%s complete: the application books it]\n", state.CurrentRoute.Title)
		}
	}
	flightData, err := routes.DataAs[Flight](state.DataFor("flight"))
	if err != nil {
		return err
	}
	hotelData, err := routes.DataAs[Hotel](state.DataFor("hotel"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "booked: flight to %s on %s for %d; hotel in %s for %d nights\n",
		flightData.Destination, flightData.DepartureDate, flightData.Passengers, hotelData.City, hotelData.Nights)
	return nil
}
