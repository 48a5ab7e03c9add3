package routes_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
)

func scores(flight, hotel float64) map[string]any {
	return map[string]any{"flight": flight, "hotel": hotel}
}

func TestChangeOfMindKeepsTheFirstRoutesData(t *testing.T) {
	bothWays(t, func(t *testing.T, w way) *conversation {
		a, m, _ := newAgent(t)
		flightRoute(a)
		hotelRoute(a)
		c := converse(t, a, w)

		reply(m, map[string]any{"routes": scores(90, 10), "data": map[string]any{"flight": map[string]any{"destination": "Paris"}}})
		reply(m, map[string]any{"message": "When do you want to leave?", "departureDate": nil})
		res := c.say("I want to fly to Paris")
		if res.Session.CurrentRoute.ID != "flight" || res.Session.CurrentStep.ID != "ask_dates" {
			t.Fatalf("turn 1: %+v %+v", res.Session.CurrentRoute, res.Session.CurrentStep)
		}
		if len(m.Requests()) != 2 {
			t.Errorf("turn 1: %d model calls, want 2 (routing, answer)", len(m.Requests()))
		}

		reply(m, map[string]any{"routes": scores(30, 90), "data": map[string]any{"hotel": map[string]any{"city": "Rome"}, "flight": map[string]any{"destination": "Rome"}}})
		reply(m, map[string]any{"message": "How many nights in Rome?", "nights": nil})
		res = c.say("Actually, I changed my mind: a hotel in Rome instead")
		if res.Session.CurrentRoute.ID != "hotel" || res.Session.CurrentStep.ID != "ask_nights" {
			t.Fatalf("turn 2: %+v %+v", res.Session.CurrentRoute, res.Session.CurrentStep)
		}
		if got := res.Session.DataFor("flight"); got["destination"] != "Paris" || len(got) != 1 {
			t.Errorf("turn 2: the flight's data %v, want it kept as it was", got)
		}
		if got := res.Session.Data(); got["city"] != "Rome" {
			t.Errorf("turn 2: hotel data %v", got)
		}

		reply(m, map[string]any{"routes": scores(10, 95), "data": map[string]any{"hotel": map[string]any{"nights": 3}}})
		res = c.say("3 nights")
		if !res.RouteComplete || res.Message != "" {
			t.Fatalf("turn 3: want the hotel route complete, got %+v", res)
		}

		reply(m, map[string]any{"routes": scores(90, 20)})
		reply(m, map[string]any{"message": "Back to Paris: when do you leave?", "departureDate": nil})
		res = c.say("Now, about that flight")
		if res.Session.CurrentRoute.ID != "flight" || res.Session.CurrentStep.ID != "ask_dates" {
			t.Fatalf("turn 4: the flight must resume where it was, got %+v %+v", res.Session.CurrentRoute, res.Session.CurrentStep)
		}
		if got := res.Session.Data(); got["destination"] != "Paris" {
			t.Errorf("turn 4: flight data %v", got)
		}
		var visits []string
		for _, v := range res.Session.RouteHistory {
			visits = append(visits, v.RouteID+map[bool]string{true: "+", false: "-"}[v.Completed]+map[bool]string{true: "", false: "/exited"}[v.ExitedAt == nil])
		}
		if want := []string{"flight-/exited", "hotel+/exited", "flight-"}; !slices.Equal(visits, want) {
			t.Errorf("route history %v, want %v", visits, want)
		}
		return c
	})
}

func TestRoutingMargin(t *testing.T) {
	for _, tc := range []struct {
		name          string
		flight, hotel float64
		want          string
	}{
		{"a small wobble stays", 50, 65, "flight"},
		{"just under the margin stays", 50, 69.9, "flight"},
		{"a clear preference switches", 50, 70, "hotel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, m, _ := newAgent(t)
			flightRoute(a)
			hotelRoute(a)
			c := converse(t, a, ways[0])
			reply(m, map[string]any{"routes": scores(90, 10)})
			reply(m, map[string]any{"message": "Where to?"})
			c.say("I want to travel")
			reply(m, map[string]any{"routes": scores(tc.flight, tc.hotel)})
			reply(m, map[string]any{"message": "Sure."})
			res := c.say("hmm, maybe somewhere nice")
			if got := res.Session.CurrentRoute.ID; got != tc.want {
				t.Errorf("scores flight %v, hotel %v: route %q, want %q", tc.flight, tc.hotel, got, tc.want)
			}
		})
	}

	t.Run("no route scores the minimum", func(t *testing.T) {
		a, m, _ := newAgent(t)
		flightRoute(a)
		hotelRoute(a)
		reply(m, map[string]any{"routes": scores(40, 30)})
		reply(m, "Hello! How can I help?")
		res := converse(t, a, ways[0]).say("Hello")
		if res.Session.CurrentRoute != nil || res.Message != "Hello! How can I help?" {
			t.Errorf("want an answer outside any route, got %+v", res)
		}
		if outputProps(m.LastRequest()) != nil {
			t.Errorf("outside a route the answer is text, got schema %v", outputProps(m.LastRequest()))
		}
	})

	t.Run("one route makes no routing call", func(t *testing.T) {
		a, m, _ := newAgent(t)
		flightRoute(a)
		reply(m, map[string]any{"message": "Where to?"})
		res := converse(t, a, ways[0]).say("Hello")
		if len(m.Requests()) != 1 || res.Session.CurrentRoute.ID != "flight" {
			t.Errorf("%d calls, route %+v", len(m.Requests()), res.Session.CurrentRoute)
		}
		if strings.Contains(systemOf(m.LastRequest()), "Score from 0 to 100") {
			t.Errorf("the answer's prompt asks for scores")
		}
	})
}

type Support struct {
	Issue string `json:"issue,omitempty"`
	Order string `json:"order,omitempty"`
}

// supportRoute branches after triage on AI-evaluated conditions.
func supportRoute(a *routes.Agent) {
	rt := a.CreateRoute(routes.RouteOptions{ID: "support", Title: "Support", Conditions: []string{"The user has a problem with an order"}, Schema: routes.SchemaFor[Support]()})
	triage := rt.InitialStep().NextStep(routes.StepSpec{ID: "triage", Prompt: "Ask what went wrong", Collect: []string{"issue"}})
	triage.NextStep(routes.StepSpec{ID: "refund", Prompt: "Offer a refund", Condition: "The customer wants their money back"}).NextStep(routes.StepSpec{Step: routes.EndRoute})
	triage.NextStep(routes.StepSpec{ID: "repair", Prompt: "Arrange a repair", Condition: "The customer wants the item fixed"}).NextStep(routes.StepSpec{Step: routes.EndRoute})
}

func TestConditionsAreJudgedByTheModel(t *testing.T) {
	t.Run("one route", func(t *testing.T) {
		a, m, _ := newAgent(t)
		supportRoute(a)
		c := converse(t, a, ways[1])
		reply(m, map[string]any{"message": "What went wrong?", "issue": "broken blender"})
		c.say("My blender arrived broken")
		reply(m, map[string]any{"step": "repair"})
		reply(m, "I'll arrange a repair.")
		res := c.say("Can you fix it?")
		if res.Session.CurrentStep.ID != "repair" {
			t.Fatalf("step %q, want repair", res.Session.CurrentStep.ID)
		}
		reqs := m.Requests()
		if len(reqs) != 3 {
			t.Fatalf("%d calls, want 3: the branch costs one call with a single route", len(reqs))
		}
		choose := reqs[1]
		if sys := systemOf(choose); !strings.Contains(sys, "repair: Arrange a repair (when: The customer wants the item fixed)") ||
			!strings.Contains(sys, "refund: Offer a refund (when: The customer wants their money back)") {
			t.Errorf("the conditions are not in the routing prompt:\n%s", sys)
		}
		if enum := choose.Output.Schema["properties"].(map[string]any)["step"].(map[string]any)["enum"]; len(enum.([]any)) != 2 {
			t.Errorf("step enum %v", enum)
		}
	})

	t.Run("folded into the routing call", func(t *testing.T) {
		a, m, _ := newAgent(t)
		supportRoute(a)
		flightRoute(a)
		c := converse(t, a, ways[0])
		reply(m, map[string]any{"routes": map[string]any{"support": 90, "flight": 0}})
		reply(m, map[string]any{"message": "Sorry! What went wrong?", "issue": nil})
		c.say("I have a problem with an order")
		reply(m, map[string]any{"routes": map[string]any{"support": 90, "flight": 0}, "step": "refund", "data": map[string]any{"support": map[string]any{"issue": "broken blender"}}})
		reply(m, "I'll refund you.")
		res := c.say("My blender is broken, I want my money back")
		if res.Session.CurrentStep.ID != "refund" {
			t.Fatalf("step %q, want refund", res.Session.CurrentStep.ID)
		}
		if n := len(m.Requests()); n != 4 {
			t.Errorf("%d calls over two turns, want 4: the step is chosen by the routing call", n)
		}
	})
}

func TestGuidelinesRulesAndProhibitionsOnlyWhereTheyApply(t *testing.T) {
	a, m, _ := newAgent(t)
	a.CreateGuideline(routes.Guideline{Action: "Be polite"})
	a.CreateGuideline(routes.Guideline{Action: "Shout", Disabled: true})
	flight := a.CreateRoute(routes.RouteOptions{
		ID: "flight", Title: "Book Flight", Schema: routes.SchemaFor[Flight](),
		Guidelines:   []routes.Guideline{{Condition: "the user is in a hurry", Action: "Keep it short"}},
		Rules:        []string{"Quote prices in euros"},
		Prohibitions: []string{"Book without confirmation"},
	})
	flight.InitialStep().
		NextStep(routes.StepSpec{ID: "ask_destination", Prompt: "Ask where", Collect: []string{"destination"}}).
		NextStep(routes.StepSpec{ID: "ask_dates", Prompt: "Ask when", Collect: []string{"departureDate"}, Guidelines: []routes.Guideline{{Action: "Suggest weekdays"}}})
	hotelRoute(a)

	c := converse(t, a, ways[0])
	reply(m, map[string]any{"routes": scores(10, 90)})
	reply(m, map[string]any{"message": "Which city?"})
	c.say("A hotel please")
	hotel := systemOf(m.LastRequest())

	reply(m, map[string]any{"routes": scores(95, 10), "data": map[string]any{"flight": map[string]any{"destination": "Oslo"}}})
	reply(m, map[string]any{"message": "When?"})
	c.say("No, a flight to Oslo")
	dates := systemOf(m.LastRequest())

	for _, tc := range []struct {
		text          string
		hotel, flight bool
	}{
		{"Be polite", true, true},
		{"Shout", false, false},
		{"When the user is in a hurry: Keep it short", false, true},
		{"Quote prices in euros", false, true},
		{"Book without confirmation", false, true},
		{"Suggest weekdays", false, true},
	} {
		if strings.Contains(hotel, tc.text) != tc.hotel {
			t.Errorf("%q in the hotel prompt: %v, want %v", tc.text, !tc.hotel, tc.hotel)
		}
		if strings.Contains(dates, tc.text) != tc.flight {
			t.Errorf("%q in the flight prompt: %v, want %v", tc.text, !tc.flight, tc.flight)
		}
	}
	if !strings.Contains(dates, "## You must NEVER\n- Book without confirmation") {
		t.Errorf("prohibitions section:\n%s", dates)
	}
}

func TestDomainRestrictionHidesTools(t *testing.T) {
	charged := false
	charge := agent.NewTool("charge", "Charges a card.", func(ctx context.Context, in struct {
		Amount float64 `json:"amount"`
	}) (string, error) {
		charged = true
		return "ok", nil
	})
	forecast := agent.NewTool("forecast", "Weather forecast.", func(ctx context.Context, in struct {
		City string `json:"city"`
	}) (string, error) {
		return "sunny", nil
	})
	setup := func(t *testing.T) (*routes.Agent, *conversation, func(any)) {
		a, m, _ := newAgent(t)
		a.AddDomain("payment", charge)
		a.AddDomain("weather", forecast)
		rt := a.CreateRoute(routes.RouteOptions{ID: "flight", Title: "Book Flight", Schema: routes.SchemaFor[Flight](), Domains: []string{"weather"}})
		rt.InitialStep().NextStep(routes.StepSpec{ID: "ask_destination", Prompt: "Ask where", Collect: []string{"destination"}})
		return a, converse(t, a, ways[0]), func(v any) { reply(m, v) }
	}
	a, _, _ := setup(t)
	if got := a.DomainsForRoute("flight"); len(got) != 1 || got["weather"] == nil {
		t.Errorf("DomainsForRoute: %v", got)
	}
	if got := a.DomainsForRouteByTitle("Book Flight"); len(got) != 1 {
		t.Errorf("DomainsForRouteByTitle: %v", got)
	}

	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			a, c, script := setup(t)
			c.way = w
			// A tool of a domain the route may use runs, and shows among the calls.
			script(abi.NewToolRequestPart(&abi.ToolRequest{Name: "forecast", Ref: "f1", Input: map[string]any{"city": "Oslo"}}))
			script(map[string]any{"message": "Sunny in Oslo. Where to?"})
			res := c.say("hi, how is the weather in Oslo?")
			if len(res.ToolCalls) != 1 || res.ToolCalls[0].ToolName != "forecast" || res.ToolCalls[0].Result != "sunny" || res.Message != "Sunny in Oslo. Where to?" {
				t.Errorf("an allowed tool: %+v, %q", res.ToolCalls, res.Message)
			}

			// The model asks for a tool of a domain the route may not use: refused on
			// both paths, and the tool never runs.
			c2 := converse(t, a, w)
			script(abi.NewToolRequestPart(&abi.ToolRequest{Name: "charge", Input: map[string]any{"amount": 100}}))
			_, err := c2.try("charge me")
			if !errors.Is(err, agent.ErrUnknownTool) || charged {
				t.Errorf("a hidden tool: err %v, ran %v", err, charged)
			}
		})
	}
}
