package routes_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
)

// visits shows a route history as route(from)+ for completed visits.
func visits(st *routes.State) []string {
	var out []string
	for _, v := range st.RouteHistory {
		s := v.RouteID
		if v.From != "" {
			s += "(" + v.From + ")"
		}
		if v.Completed {
			s += "+"
		}
		out = append(out, s)
	}
	return out
}

// Item 5: a route's OnComplete names the route that follows it; the turn after the
// completion enters it, with its own data, and the route history shows the chain.
func TestOnCompleteChainsRoutes(t *testing.T) {
	bothWays(t, func(t *testing.T, w way) *conversation {
		a, m, _ := newAgent(t)
		flight := a.CreateRoute(routes.RouteOptions{ID: "flight", Title: "Book Flight", Schema: routes.SchemaFor[Flight](), OnComplete: "Book Hotel"})
		flight.InitialStep().
			NextStep(routes.StepSpec{ID: "ask_destination", Prompt: "Ask where", Collect: []string{"destination"}}).
			NextStep(routes.StepSpec{Step: routes.EndRoute})
		hotel := a.CreateRoute(routes.RouteOptions{ID: "hotel", Title: "Book Hotel", Schema: routes.SchemaFor[Hotel](), InitialData: routes.Data{"nights": 2}})
		hotel.InitialStep().
			NextStep(routes.StepSpec{ID: "ask_city", Prompt: "Ask the city", Collect: []string{"city"}}).
			NextStep(routes.StepSpec{Step: routes.EndRoute})
		c := converse(t, a, w)

		reply(m, map[string]any{"routes": scores(90, 10), "data": map[string]any{"flight": map[string]any{"destination": "Rome"}}})
		res := c.say("A flight to Rome")
		if !res.RouteComplete || res.Session.NextRoute != "hotel" {
			t.Fatalf("the completing turn: complete %v, next route %q", res.RouteComplete, res.Session.NextRoute)
		}

		// The user's words favour neither route: the chained one is where the
		// conversation is, and stays.
		reply(m, map[string]any{"routes": scores(50, 50)})
		reply(m, map[string]any{"message": "Which city will you stay in?"})
		res = c.say("Great, what now?")
		if res.Session.CurrentRoute.ID != "hotel" || res.Session.CurrentStep.ID != "ask_city" || res.Session.NextRoute != "" {
			t.Fatalf("the next turn: route %+v, step %+v, next %q", res.Session.CurrentRoute, res.Session.CurrentStep, res.Session.NextRoute)
		}
		if got := res.Session.Data(); len(got) != 1 || got["nights"] != float64(2) {
			t.Errorf("the hotel starts with its own data: %v", got)
		}
		if got := res.Session.DataFor("flight"); got["destination"] != "Rome" {
			t.Errorf("the flight keeps its data: %v", got)
		}
		if got, want := visits(res.Session), []string{"flight+", "hotel(flight)"}; !slices.Equal(got, want) {
			t.Errorf("route history %v, want %v", got, want)
		}
		return c
	})
}

// A function chooses the next route from the data; a route it does not name ends the
// chain with a warning.
func TestOnCompleteFuncChoosesFromTheData(t *testing.T) {
	for _, tc := range []struct {
		email, next string
		warned      bool
	}{
		{"ann@example.com", "vip", false},
		{"ann@elsewhere.org", "", false},
		{"ann@typo.com", "", true},
	} {
		a, m, _ := newAgent(t)
		rt := a.CreateRoute(routes.RouteOptions{ID: "onboarding", Title: "User Onboarding", Schema: routes.SchemaFor[Onboarding](),
			OnCompleteFunc: func(d routes.Data) string {
				email, _ := d["email"].(string)
				switch {
				case strings.HasSuffix(email, "@example.com"):
					return "vip"
				case strings.HasSuffix(email, "@typo.com"):
					return "no such route"
				}
				return ""
			}})
		rt.InitialStep().NextStep(routes.StepSpec{ID: "ask_email", Prompt: "Ask the email", Collect: []string{"email"}}).NextStep(routes.StepSpec{Step: routes.EndRoute})
		vip := a.CreateRoute(routes.RouteOptions{ID: "vip", Title: "VIP welcome"})
		vip.InitialStep().NextStep(routes.StepSpec{ID: "welcome", Prompt: "Welcome them"})

		c := converse(t, a, ways[0])
		reply(m, map[string]any{"routes": map[string]any{"onboarding": 90, "vip": 0}, "data": map[string]any{"onboarding": map[string]any{"email": tc.email}}})
		res := c.say("Sign me up: " + tc.email)
		if !res.RouteComplete || res.Session.NextRoute != tc.next {
			t.Errorf("%s: complete %v, next %q, want %q", tc.email, res.RouteComplete, res.Session.NextRoute, tc.next)
		}
		if warned := slices.Contains(codes(res.Warnings), "next_route"); warned != tc.warned {
			t.Errorf("%s: warnings %v", tc.email, res.Warnings)
		}
	}
}

func TestOnCompleteIsChecked(t *testing.T) {
	a, _, _ := newAgent(t)
	a.CreateRoute(routes.RouteOptions{Title: "Book Flight", OnComplete: "Book Spaceship"})
	if err := a.Validate(); !errors.Is(err, routes.ErrInvalidDefinition) || !strings.Contains(err.Error(), "Book Spaceship") {
		t.Errorf("a next route that does not exist: %v", err)
	}
	if err := panics(func() {
		a.CreateRoute(routes.RouteOptions{Title: "Both", OnComplete: "Book Flight", OnCompleteFunc: func(routes.Data) string { return "" }})
	}); !errors.Is(err, routes.ErrInvalidDefinition) {
		t.Errorf("OnComplete and OnCompleteFunc together: %v", err)
	}

	_, err := routes.Build(agent.NewRegistry(), routes.Definition{Name: "x", Routes: []routes.RouteDef{
		{ID: "a", Title: "A", OnComplete: "b"},
		{ID: "c", Title: "C", OnComplete: "A"},
	}})
	var de *routes.DefinitionError
	if !errors.As(err, &de) || de.Path != "routes[0].onComplete" {
		t.Errorf("an agent file's unknown next route: %v", err)
	}
}
