package routes_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent/routes"
)

func TestRenderTemplate(t *testing.T) {
	vars := map[string]any{
		"name":  "Alice",
		"user":  map[string]any{"name": "Alice", "age": 30},
		"items": []any{"apple", "banana", "cherry"},
		"mixed": []any{1, map[string]any{"a": true}},
		"none":  nil,
		"typed": struct {
			First string `json:"firstName"`
		}{"Bob"},
	}
	for tmpl, want := range map[string]string{
		"Hello {{name}}, welcome to {{ company }}!":            "",
		"Hello {{user.name}}, you are {{user.age}} years old!": "Hello Alice, you are 30 years old!",
		"Items: {{items}}":           "Items: apple, banana, cherry",
		"User data: {{user}}":        `User data: {"age":30,"name":"Alice"}`,
		"Mixed: {{mixed}}":           `Mixed: 1, {"a":true}`,
		"None: [{{none}}]":           "None: []",
		"Typed: {{typed.firstName}}": "Typed: Bob",
		"No variables":               "No variables",
	} {
		got, err := routes.RenderTemplate(tmpl, vars, routes.MissingError)
		if want == "" {
			if !errors.Is(err, routes.ErrMissingVariable) || !strings.Contains(err.Error(), "{{company}}") {
				t.Errorf("%q: want an error naming {{company}}, got %q, %v", tmpl, got, err)
			}
			got, err = routes.RenderTemplate(tmpl, vars, routes.MissingEmpty)
			if err != nil || got != "Hello Alice, welcome to !" {
				t.Errorf("%q lenient: %q, %v", tmpl, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", tmpl, got, err, want)
		}
	}
}

func TestTemplatesRenderFromTheContext(t *testing.T) {
	a, m, _ := newAgent(t,
		routes.WithIdentity("I am {{name}}, here to help you, {{user.firstName}}."),
		routes.WithContext(map[string]any{"name": "HelperBot", "user": map[string]any{"firstName": "Alice", "age": 30}}),
		routes.WithDescription("Literal {{not rendered}}"),
	)
	a.CreateGuideline(routes.Guideline{Condition: "User is {{user.age}} years old", Action: "Be helpful to {{user.firstName}}"})
	a.CreateTerm(routes.Term{Name: "{{name}} Plus", Description: "The paid plan of {{name}}", Synonyms: []string{"premium"}})
	rt := a.CreateRoute(routes.RouteOptions{Title: "User Onboarding", Description: "Standard {{onboarding}}"})
	rt.InitialStep().NextStep(routes.StepSpec{Prompt: "Welcome {{user.firstName}}! Let's get you set up."})
	reply(m, "Welcome!")
	c := converse(t, a, ways[0])
	if _, err := a.Respond(t.Context(), routes.RespondInput{Session: c.state, Context: map[string]any{"user": map[string]any{"firstName": "Zoe", "age": 7}}}); err != nil {
		t.Fatal(err)
	}
	sys := systemOf(m.LastRequest())
	for _, want := range []string{
		"You are Test Agent. Literal {{not rendered}}",
		"I am HelperBot, here to help you, Zoe.",
		"When User is 7 years old: Be helpful to Zoe",
		"- HelperBot Plus (also: premium): The paid plan of HelperBot",
		"Standard {{onboarding}}",
		"Do now: Welcome Zoe! Let's get you set up.",
	} {
		if !strings.Contains(sys, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, sys)
		}
	}
}

func TestSectionsAreReplaceable(t *testing.T) {
	a, m, _ := newAgent(t,
		routes.WithSection(routes.SectionIdentity, func(in *routes.PromptInput) (string, error) {
			base, err := routes.DefaultSection(routes.SectionIdentity)(in)
			return "IDENTITY<" + base + ">", err
		}),
		routes.WithSection(routes.SectionContext, nil),
		routes.WithContext(map[string]any{"secret": "do not show"}),
	)
	a.CreateCapability(routes.Capability{Title: "Refunds", Description: "Can refund orders"})
	reply(m, "Hello")
	converse(t, a, ways[0]).say("hi")
	sys := systemOf(m.LastRequest())
	if !strings.HasPrefix(sys, "IDENTITY<You are Test Agent.>") || strings.Contains(sys, "do not show") || !strings.Contains(sys, "## Capabilities\n- Refunds: Can refund orders") {
		t.Errorf("sections:\n%s", sys)
	}
	if err := panics(func() { routes.New(a.Registry(), "x", routes.WithSection("nope", nil)) }); !errors.Is(err, routes.ErrInvalidDefinition) {
		t.Errorf("an unknown section: %v", err)
	}
}
