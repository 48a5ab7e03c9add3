package routes_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent/routes"
)

type Onboarding struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

type Flight struct {
	Destination   string `json:"destination,omitempty"`
	DepartureDate string `json:"departureDate,omitempty"`
	Passengers    int    `json:"passengers,omitempty" jsonschema:"minimum=1,maximum=9"`
}

type Hotel struct {
	City   string `json:"city,omitempty"`
	Nights int    `json:"nights,omitempty" jsonschema:"minimum=1"`
}

func has(field string) func(routes.Data) bool {
	return func(d routes.Data) bool { return d.Has(field) }
}

// onboarding is the seed's onboarding route: ask_name, ask_email, complete, END_ROUTE.
func onboarding(a *routes.Agent, initial routes.Data, withComplete bool) *routes.Route {
	rt := a.CreateRoute(routes.RouteOptions{ID: "onboarding", Title: "User Onboarding", Schema: routes.SchemaFor[Onboarding](), InitialData: initial})
	askName := rt.InitialStep().NextStep(routes.StepSpec{ID: "ask_name", Prompt: "What's your name?", Collect: []string{"name"}, SkipIf: has("name")})
	askEmail := askName.NextStep(routes.StepSpec{ID: "ask_email", Prompt: "What's your email?", Collect: []string{"email"}, SkipIf: has("email")})
	last := askEmail
	if withComplete {
		last = askEmail.NextStep(routes.StepSpec{ID: "complete", Prompt: "All done! Thank you."})
	}
	last.NextStep(routes.StepSpec{Step: routes.EndRoute})
	return rt
}

// flightRoute is the seed's flight route: destination, dates (requiring the
// destination), passengers, each skipped once known.
func flightRoute(a *routes.Agent) *routes.Route {
	rt := a.CreateRoute(routes.RouteOptions{ID: "flight", Title: "Book Flight", Conditions: []string{"The user wants to fly somewhere"}, Schema: routes.SchemaFor[Flight]()})
	rt.InitialStep().
		NextStep(routes.StepSpec{ID: "ask_destination", Prompt: "Ask where they want to fly", Collect: []string{"destination"}, SkipIf: has("destination")}).
		NextStep(routes.StepSpec{ID: "ask_dates", Prompt: "Ask about travel dates", Collect: []string{"departureDate"}, SkipIf: has("departureDate"), Requires: []string{"destination"}}).
		NextStep(routes.StepSpec{ID: "ask_passengers", Prompt: "How many passengers?", Collect: []string{"passengers"}, SkipIf: has("passengers")}).
		NextStep(routes.StepSpec{Step: routes.EndRoute})
	return rt
}

func hotelRoute(a *routes.Agent) *routes.Route {
	rt := a.CreateRoute(routes.RouteOptions{ID: "hotel", Title: "Book Hotel", Conditions: []string{"The user wants a hotel room"}, Schema: routes.SchemaFor[Hotel]()})
	rt.InitialStep().
		NextStep(routes.StepSpec{ID: "ask_city", Prompt: "Ask in which city", Collect: []string{"city"}, SkipIf: has("city")}).
		NextStep(routes.StepSpec{ID: "ask_nights", Prompt: "Ask how many nights", Collect: []string{"nights"}, SkipIf: has("nights")}).
		NextStep(routes.StepSpec{Step: routes.EndRoute})
	return rt
}

func TestOnboardingCompletesAtOnceWhenPreFilled(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			a, m, _ := newAgent(t)
			onboarding(a, routes.Data{"name": "Ann", "email": "ann@example.com"}, false)
			res := converse(t, a, w).say("Hi, update my profile")
			if !res.RouteComplete || res.Message != "" {
				t.Fatalf("want the route complete with an empty message, got %+v", res)
			}
			if n := len(m.Requests()); n != 0 {
				t.Errorf("%d model calls; a route completing on entry needs none", n)
			}
			if got := res.Session.CurrentStep.ID; got != routes.EndRouteID {
				t.Errorf("current step %q, want END_ROUTE", got)
			}
			d, err := routes.DataAs[Onboarding](res.Session.Data())
			if err != nil || d != (Onboarding{Name: "Ann", Email: "ann@example.com"}) {
				t.Errorf("data %+v, %v", d, err)
			}
			if h := res.Session.RouteHistory; len(h) != 1 || !h[0].Completed || h[0].ExitedAt == nil {
				t.Errorf("route history %+v", h)
			}
		})
	}
}

func TestOnboardingTurnByTurn(t *testing.T) {
	bothWays(t, func(t *testing.T, w way) *conversation {
		a, m, _ := newAgent(t)
		onboarding(a, nil, true)
		c := converse(t, a, w)
		type turn struct {
			say, step string
			answer    any
			collect   []string
		}
		for i, tt := range []turn{
			// Every answer may fill the route's fields still missing, not only its step's.
			{"Hi", "ask_name", map[string]any{"message": "Hello! What's your name?", "name": nil}, []string{"email", "message", "name"}},
			{"I'm Ann", "ask_name", map[string]any{"message": "Thanks Ann! And your email?", "name": "Ann"}, []string{"email", "message", "name"}},
			{"ann@example.com", "ask_email", map[string]any{"message": "Got it.", "email": "ann@example.com"}, []string{"email", "message"}},
			{"great", "complete", "All done! Thank you.", nil},
		} {
			reply(m, tt.answer)
			res := c.say(tt.say)
			if res.Session.CurrentStep.ID != tt.step {
				t.Fatalf("turn %d: step %q, want %q", i, res.Session.CurrentStep.ID, tt.step)
			}
			req := m.LastRequest()
			if props := outputProps(req); !slices.Equal(sorted(props), tt.collect) {
				t.Errorf("turn %d: output fields %v, want %v", i, props, tt.collect)
			}
			if len(m.Requests()) != i+1 {
				t.Errorf("turn %d: %d model calls so far, want one a turn", i, len(m.Requests()))
			}
		}
		res := c.say("bye")
		if !res.RouteComplete || res.Message != "" || len(m.Requests()) != 4 {
			t.Errorf("the turn after the last step: %+v, %d calls", res, len(m.Requests()))
		}
		if got := c.state.Data(); got["name"] != "Ann" || got["email"] != "ann@example.com" {
			t.Errorf("data %v", got)
		}
		if !strings.Contains(systemOf(m.Requests()[0]), "Do now: What's your name?") {
			t.Errorf("the step's prompt is not in the system prompt:\n%s", systemOf(m.Requests()[0]))
		}
		return c
	})
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestRequiresHoldsAStepBack(t *testing.T) {
	a, m, _ := newAgent(t)
	rt := a.CreateRoute(routes.RouteOptions{ID: "flight", Title: "Book Flight", Schema: routes.SchemaFor[Flight]()})
	rt.InitialStep().NextStep(routes.StepSpec{ID: "ask_dates", Prompt: "Ask about travel dates", Collect: []string{"departureDate"}, Requires: []string{"destination"}})
	reply(m, "Where would you like to go?")
	res := converse(t, a, ways[0]).say("I want to travel")
	if step := res.Session.CurrentStep; step == nil || step.ID != rt.InitialStep().ID() {
		t.Errorf("without a destination the conversation must stay at the initial step, got %+v", step)
	}
	if props := sorted(outputProps(m.LastRequest())); !slices.Equal(props, []string{"departureDate", "destination", "message", "passengers"}) {
		t.Errorf("the answer may fill any field still missing, and asked for %v", props)
	}

	b, m2, _ := newAgent(t)
	rt2 := b.CreateRoute(routes.RouteOptions{ID: "flight", Title: "Book Flight", Schema: routes.SchemaFor[Flight](), InitialData: routes.Data{"destination": "Paris"}})
	rt2.InitialStep().NextStep(routes.StepSpec{ID: "ask_dates", Prompt: "Ask about travel dates", Collect: []string{"departureDate"}, Requires: []string{"destination"}})
	reply(m2, map[string]any{"message": "When do you leave for Paris?"})
	res = converse(t, b, ways[0]).say("I want to travel")
	if res.Session.CurrentStep.ID != "ask_dates" {
		t.Errorf("with the destination known the step is entered, got %q", res.Session.CurrentStep.ID)
	}
}

func TestSkipIfFromExtractedDataCompletesTheRoute(t *testing.T) {
	bothWays(t, func(t *testing.T, w way) *conversation {
		a, m, _ := newAgent(t)
		flightRoute(a)
		hotelRoute(a)
		reply(m, map[string]any{
			"routes": map[string]any{"flight": 95, "hotel": 5},
			"data":   map[string]any{"flight": map[string]any{"destination": "Paris", "departureDate": "2025-07-01", "passengers": 2}},
		})
		c := converse(t, a, w)
		res := c.say("Book me a flight to Paris on July 1st for two")
		if !res.RouteComplete || res.Message != "" {
			t.Fatalf("every step skipped: want the route complete, got %+v", res)
		}
		if n := len(m.Requests()); n != 1 {
			t.Errorf("%d model calls, want only the routing call", n)
		}
		d, _ := routes.DataAs[Flight](res.Session.DataFor("flight"))
		if d != (Flight{Destination: "Paris", DepartureDate: "2025-07-01", Passengers: 2}) {
			t.Errorf("data %+v", d)
		}
		if res.Session.DataFor("hotel") != nil {
			t.Errorf("a route not chosen got data: %v", res.Session.DataFor("hotel"))
		}
		return c
	})
}

func TestStrictAgentRefusesInvalidDataAndMergesNothing(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			for _, tc := range []struct {
				name       string
				passengers any
				want       string
			}{
				{"out of range", 12, "maximum"},
				{"wrong type", "two", "integer"},
			} {
				a, m, _ := newAgent(t, routes.WithStrict())
				flightRoute(a)
				c := converse(t, a, w)
				c.state = &routes.State{}
				reply(m, map[string]any{"message": "Where to?", "destination": "Rome"})
				c.say("I want to fly")
				reply(m, map[string]any{"message": "When?", "departureDate": "2025-08-01"})
				c.say("To Rome")
				reply(m, map[string]any{"message": "How many?", "passengers": tc.passengers})
				before := c.state
				_, err := c.try("August 1st, with my family")
				if !errors.Is(err, routes.ErrInvalidData) || !strings.Contains(err.Error(), "passengers") || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: want ErrInvalidData naming passengers and %q, got %v", tc.name, tc.want, err)
				}
				if c.state != before || before.Data().Has("passengers") {
					t.Errorf("%s: the state changed: %v", tc.name, c.state.Data())
				}
			}
		})
	}
}
