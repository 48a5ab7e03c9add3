package routes_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/agent/routes"
)

// Item 3: a template naming a variable the context lacks renders it as nothing; the
// turn goes on, and says so once: a warning naming every such variable, a log line.
func TestMissingVariablesRenderEmptyAndAreReported(t *testing.T) {
	bothWays(t, func(t *testing.T, w way) *conversation {
		var logs bytes.Buffer
		a, m, _ := newAgent(t,
			routes.WithIdentity("I am {{name}}, here to help you, {{user.firstName}}."),
			routes.WithContext(map[string]any{"name": "Skye"}),
			routes.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		)
		a.CreateGuideline(routes.Guideline{Action: "Greet {{user.firstName}} by name"})
		rt := a.CreateRoute(routes.RouteOptions{ID: "onboarding", Title: "User Onboarding", Schema: routes.SchemaFor[Onboarding]()})
		rt.InitialStep().NextStep(routes.StepSpec{ID: "ask_name", Prompt: "{{greeting}} Ask the name", Collect: []string{"name"}})
		reply(m, map[string]any{"message": "Hello! Your name?"})
		c := converse(t, a, w)
		res := c.say("Hi")
		if res.Message != "Hello! Your name?" {
			t.Fatalf("message %q", res.Message)
		}
		sys := systemOf(m.LastRequest())
		if !strings.Contains(sys, "I am Skye, here to help you, .") || !strings.Contains(sys, "Do now:  Ask the name") {
			t.Errorf("missing variables do not render as nothing:\n%s", sys)
		}
		if len(res.Warnings) != 1 || res.Warnings[0].Code != routes.WarnMissingVariables ||
			!strings.Contains(res.Warnings[0].Message, "{{user.firstName}}, {{greeting}}") {
			t.Errorf("want one warning naming both variables once, got %+v", res.Warnings)
		}
		if lines := strings.Count(logs.String(), "\n"); lines != 1 || !strings.Contains(logs.String(), "variables=\"[user.firstName greeting]\"") {
			t.Errorf("want one log line naming the variables, got %d:\n%s", lines, logs.String())
		}
		return c
	})

	t.Run("MissingError keeps the strictness", func(t *testing.T) {
		a, m, _ := newAgent(t, routes.WithIdentity("Hello {{user.firstName}}"), routes.WithMissingVariables(routes.MissingError))
		onboarding(a, nil, true)
		reply(m, map[string]any{"message": "Your name?"})
		_, err := converse(t, a, ways[0]).try("Hi")
		if !errors.Is(err, routes.ErrMissingVariable) || !strings.Contains(err.Error(), "{{user.firstName}}") || len(m.Requests()) != 0 {
			t.Errorf("want the turn failed naming the variable before any call, got %v after %d calls", err, len(m.Requests()))
		}
		if err := panics(func() { routes.New(a.Registry(), "x", routes.WithMissingVariables(7)) }); err == nil {
			t.Errorf("an unknown Missing is accepted")
		}
	})
}

// Item 7: the context changes between turns: the agent's for every conversation,
// a State's for its own, each reflected in the next turn's prompt.
func TestUpdateContext(t *testing.T) {
	a, m, _ := newAgent(t,
		routes.WithIdentity("Hello {{user.firstName}} from {{city}}."),
		routes.WithContext(map[string]any{"user": map[string]any{"firstName": "Alice"}, "city": "Lyon"}),
	)
	onboarding(a, nil, true)
	first := converse(t, a, ways[0])
	second := converse(t, a, ways[1])
	turn := func(c *conversation, want string) {
		t.Helper()
		reply(m, map[string]any{"message": "Your name?"})
		c.say("Hi")
		if sys := systemOf(m.LastRequest()); !strings.Contains(sys, want) {
			t.Errorf("want %q in the prompt:\n%s", want, sys)
		}
	}
	turn(first, "Hello Alice from Lyon.")

	if err := a.UpdateContext(map[string]any{"user": map[string]any{"firstName": "Bob"}}); err != nil {
		t.Fatal(err)
	}
	turn(first, "Hello Bob from Lyon.")
	turn(second, "Hello Bob from Lyon.")

	// One conversation's own context, over the agent's.
	if err := first.state.UpdateContext(map[string]any{"city": "Porto"}); err != nil {
		t.Fatal(err)
	}
	turn(first, "Hello Bob from Porto.")
	turn(second, "Hello Bob from Lyon.")
	if got := first.state.Context; got["city"] != "Porto" {
		t.Errorf("the turn's State keeps the conversation's context: %v", got)
	}

	// A nil value removes a key: the agent's shows through again.
	first.state.UpdateContext(map[string]any{"city": nil})
	turn(first, "Hello Bob from Lyon.")
	if got := a.Context(); got["city"] != "Lyon" || got["user"].(map[string]any)["firstName"] != "Bob" {
		t.Errorf("the agent's context %v", got)
	}
	if err := a.UpdateContext([]int{1}); err == nil {
		t.Errorf("a context that is not an object is accepted")
	}
}

// Turns read the context once, at their start, while UpdateContext changes it.
func TestUpdateContextDuringTurns(t *testing.T) {
	a, m, _ := newAgent(t, routes.WithIdentity("Hello {{n}}."))
	onboarding(a, nil, true)
	var wg sync.WaitGroup
	for i := range 8 {
		reply(m, map[string]any{"message": "Your name?"})
		wg.Add(2)
		go func() {
			defer wg.Done()
			a.UpdateContext(map[string]any{"n": i})
		}()
		go func() {
			defer wg.Done()
			if _, err := a.Respond(t.Context(), routes.RespondInput{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
