package routes_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
)

// panics runs fn and returns the error it panicked with.
func panics(fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", p)
			}
		}
	}()
	fn()
	return nil
}

func TestInvalidDefinitionsFailAtDefinition(t *testing.T) {
	for _, tc := range []struct {
		name string
		def  func(a *routes.Agent)
		want string
	}{
		{"collect of a field not in the schema", func(a *routes.Agent) {
			rt := a.CreateRoute(routes.RouteOptions{Title: "Book Flight", Schema: routes.SchemaFor[Flight]()})
			rt.InitialStep().NextStep(routes.StepSpec{Collect: []string{"destinaton"}})
		}, `collect "destinaton": not a property of the route's schema (it has "departureDate", "destination", "passengers")`},
		{"collect without a schema", func(a *routes.Agent) {
			a.CreateRoute(routes.RouteOptions{Title: "Chat"}).InitialStep().NextStep(routes.StepSpec{Collect: []string{"x"}})
		}, "the route has no schema"},
		{"requires of a field not in the schema", func(a *routes.Agent) {
			rt := a.CreateRoute(routes.RouteOptions{Title: "Book Flight", Schema: routes.SchemaFor[Flight]()})
			rt.InitialStep().NextStep(routes.StepSpec{Requires: []string{"city"}})
		}, `requires "city"`},
		{"transition to a step of another route", func(a *routes.Agent) {
			other := a.CreateRoute(routes.RouteOptions{Title: "Other"}).InitialStep().NextStep(routes.StepSpec{ID: "elsewhere", Prompt: "x"})
			a.CreateRoute(routes.RouteOptions{Title: "Mine"}).InitialStep().NextStep(routes.StepSpec{Step: other})
		}, `transition to step "elsewhere" of another route`},
		{"two steps with one ID", func(a *routes.Agent) {
			rt := a.CreateRoute(routes.RouteOptions{Title: "Mine"})
			rt.InitialStep().NextStep(routes.StepSpec{ID: "x", Prompt: "a"}).NextStep(routes.StepSpec{ID: "x", Prompt: "b"})
		}, `two steps have the ID "x"`},
		{"two routes with one title", func(a *routes.Agent) {
			a.CreateRoute(routes.RouteOptions{Title: "Mine"})
			a.CreateRoute(routes.RouteOptions{Title: "Mine"})
		}, "have the same ID"},
		{"a schema that is not an object", func(a *routes.Agent) {
			a.CreateRoute(routes.RouteOptions{Title: "Mine", Schema: map[string]any{"type": "string"}})
		}, "the data of a route is an object"},
		{"initial data against the schema", func(a *routes.Agent) {
			a.CreateRoute(routes.RouteOptions{Title: "Book Flight", Schema: routes.SchemaFor[Flight](), InitialData: routes.Data{"passengers": 0}})
		}, "initial data"},
		{"END_ROUTE has no transitions", func(a *routes.Agent) {
			routes.EndRoute.NextStep(routes.StepSpec{Prompt: "after the end"})
		}, "END_ROUTE has no transitions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _, _ := newAgent(t)
			err := panics(func() { tc.def(a) })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a panic with %q, got %v", tc.want, err)
			}
			if !strings.Contains(tc.want, "END_ROUTE") && !errors.Is(err, routes.ErrInvalidDefinition) {
				t.Errorf("%v does not wrap ErrInvalidDefinition", err)
			}
		})
	}
}

func TestCycleWithNoWayOut(t *testing.T) {
	a, _, _ := newAgent(t)
	rt := a.CreateRoute(routes.RouteOptions{Title: "Loop"})
	ask := rt.InitialStep().NextStep(routes.StepSpec{ID: "ask", Prompt: "Ask"})
	confirm := ask.NextStep(routes.StepSpec{ID: "confirm", Prompt: "Confirm"})
	confirm.NextStep(routes.StepSpec{Step: ask})
	err := a.Validate()
	if !errors.Is(err, routes.ErrInvalidDefinition) || !strings.Contains(err.Error(), `steps "ask", "confirm" form a cycle with no way out`) {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := a.Respond(t.Context(), routes.RespondInput{}); !errors.Is(err, routes.ErrInvalidDefinition) {
		t.Errorf("Respond with an invalid definition: %v", err)
	}
	if err := panics(func() { routes.DefineFlow(a.Registry(), "loop", a) }); err == nil || !strings.Contains(fmt.Sprint(err), "cycle") {
		t.Errorf("DefineFlow with an invalid definition: %v", err)
	}

	confirm.NextStep(routes.StepSpec{Step: routes.EndRoute, Condition: "the user confirmed"})
	if err := a.Validate(); err != nil {
		t.Errorf("a way out added: %v", err)
	}
	self := a.CreateRoute(routes.RouteOptions{Title: "Self"})
	s := self.InitialStep().NextStep(routes.StepSpec{ID: "again", Prompt: "again"})
	s.NextStep(routes.StepSpec{Step: s})
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), `steps "again" form a cycle`) {
		t.Errorf("a step leading only to itself: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	a, _, _ := newAgent(t)
	rt := flightRoute(a)
	got := rt.Describe()
	for _, want := range []string{
		`Route "Book Flight" (flight)`,
		"- ask_destination: Ask where they want to fly [collects destination] [may be skipped] -> ask_dates",
		"- ask_dates: Ask about travel dates [collects departureDate] [requires destination] [may be skipped] -> ask_passengers",
		"-> END_ROUTE",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe lacks %q:\n%s", want, got)
		}
	}
	if id := routes.RouteID("User Onboarding"); !strings.HasPrefix(id, "route_user_onboarding_") || id != routes.RouteID("User Onboarding") || id == routes.RouteID("User onboarding!") {
		t.Errorf("RouteID: %q", id)
	}
}

func TestConfigure(t *testing.T) {
	a, m, _ := newAgent(t)
	rt := a.CreateRoute(routes.RouteOptions{ID: "onboarding", Title: "User Onboarding", Schema: routes.SchemaFor[Onboarding](), InitialStep: &routes.StepSpec{ID: "welcome"}})
	rt.InitialStep().Configure(routes.StepSpec{Prompt: "Welcome! Ask for name and email", Collect: []string{"name", "email"}}).NextStep(routes.StepSpec{Step: routes.EndRoute})
	if rt.InitialStep().ID() != "welcome" || rt.InitialStep().Description() != "Welcome! Ask for name and email" {
		t.Errorf("initial step %q %q", rt.InitialStep().ID(), rt.InitialStep().Description())
	}
	reply(m, map[string]any{"message": "Welcome!"})
	converse(t, a, ways[0]).say("hi")
	if props := sorted(outputProps(m.LastRequest())); strings.Join(props, ",") != "email,message,name" {
		t.Errorf("configured collect: %v", props)
	}
	if err := panics(func() { rt.InitialStep().Configure(routes.StepSpec{Collect: []string{"phone"}}) }); !errors.Is(err, routes.ErrInvalidDefinition) {
		t.Errorf("configure with an unknown field: %v", err)
	}
}

func TestInvalidOptions(t *testing.T) {
	r := agent.NewRegistry()
	for name, opt := range map[string]routes.Option{
		"an output option":     routes.WithGenerateOpts(agent.WithOutputFormat("json")),
		"messages":             routes.WithGenerateOpts(agent.WithMessages(abi.NewUserTextMessage("hi"))),
		"a margin over 100":    routes.WithRoutingMargin(120),
		"a negative min score": routes.WithMinRouteScore(-1),
		"an unknown mode":      routes.WithComposition("creative"),
		"a context not object": routes.WithContext([]string{"a"}),
	} {
		if err := panics(func() { routes.New(r, "a", opt) }); !errors.Is(err, agent.ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSkippedStepsThatLoop: steps that skip each other in a cycle (which has a way
// out, so the definition is valid) must not send traversal round forever.
func TestSkippedStepsThatLoop(t *testing.T) {
	a, m, _ := newAgent(t)
	rt := a.CreateRoute(routes.RouteOptions{Title: "Loop", Schema: routes.SchemaFor[Onboarding](), InitialData: routes.Data{"name": "Ann"}})
	first := rt.InitialStep().NextStep(routes.StepSpec{ID: "a", Prompt: "A", SkipIf: has("name")})
	second := first.NextStep(routes.StepSpec{ID: "b", Prompt: "B", SkipIf: has("name"), Condition: "the user wants B"})
	first.NextStep(routes.StepSpec{Step: routes.EndRoute, Condition: "the user is done"})
	second.NextStep(routes.StepSpec{Step: first})
	reply(m, map[string]any{"step": "b"})
	reply(m, "Here is A.")
	res := converse(t, a, ways[0]).say("hi")
	if res.Session.CurrentStep.ID != "a" || res.Message != "Here is A." {
		t.Errorf("step %q, message %q", res.Session.CurrentStep.ID, res.Message)
	}
}
