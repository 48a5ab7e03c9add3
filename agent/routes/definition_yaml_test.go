package routes_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
)

const travelFile = `
name: Travel Agent
description: Books trips.
identity: "I am {{agentName}}."
context:
  agentName: Skye
composition: fluid
terms:
  - name: PNR
    description: Passenger name record, the booking's reference.
    synonyms: [booking reference]
guidelines:
  - action: Be brief.
  - condition: the user is angry
    action: Apologise.
    enabled: false
domains:
  weather: [forecast]
routes:
  - id: flight
    title: Book Flight
    conditions: [The user wants to fly]
    domains: [weather]
    rules: [Quote prices in euros]
    prohibitions: [Book without confirmation]
    schema:
      type: object
      properties:
        destination: {type: string}
        departureDate: {type: string}
        passengers: {type: integer, minimum: 1, maximum: 9}
    initialData:
      passengers: 1
    steps:
      - id: ask_destination
        prompt: Ask where they want to fly
        collect: [destination]
        skipIf: destination != nil
      - id: ask_dates
        prompt: Ask about travel dates
        collect: [departureDate]
        requires: [destination]
        skipIf: departureDate != nil
        guidelines:
          - action: Suggest weekdays.
      - id: confirm
        prompt: Confirm the booking
        next:
          - step: END_ROUTE
            condition: the user confirmed
          - step: ask_dates
            condition: the user wants other dates
  - title: Chat
`

func TestDefinitionFromYAML(t *testing.T) {
	var def routes.Definition
	if err := yaml.Unmarshal([]byte(travelFile), &def); err != nil {
		t.Fatal(err)
	}
	r := agent.NewRegistry()
	agent.DefineTool(r, "forecast", "Weather.", func(ctx context.Context, in struct {
		City string `json:"city"`
	}) (string, error) {
		return "sunny", nil
	})
	a, err := routes.Build(r, def)
	if err != nil {
		t.Fatal(err)
	}
	flight := a.Route("flight")
	if flight == nil || a.Route(routes.RouteID("Chat")) == nil {
		t.Fatalf("routes: %v", a.Routes())
	}
	want := []string{
		"- ask_destination: Ask where they want to fly [collects destination] [may be skipped] -> ask_dates",
		"- ask_dates: Ask about travel dates [collects departureDate] [requires destination] [may be skipped] -> confirm",
		"- confirm: Confirm the booking -> END_ROUTE (if the user confirmed) | ask_dates (if the user wants other dates)",
	}
	for _, w := range want {
		if !strings.Contains(flight.Describe(), w) {
			t.Errorf("Describe lacks %q:\n%s", w, flight.Describe())
		}
	}
	if got := a.DomainsForRoute("flight"); len(got["weather"]) != 1 {
		t.Errorf("domains %v", got)
	}
	skip := flight.Step("ask_destination")
	for _, tc := range []struct {
		data routes.Data
		want bool
	}{{routes.Data{"destination": "Oslo"}, true}, {routes.Data{}, false}, {nil, false}} {
		if got := routes.SkipsForTest(skip, tc.data); got != tc.want {
			t.Errorf("skipIf on %v: %v", tc.data, got)
		}
	}
}

func TestDefinitionErrorsNameTheField(t *testing.T) {
	r := agent.NewRegistry()
	for _, tc := range []struct {
		name, file, path, msg string
	}{
		{"unknown tool", "name: a\ndomains: {pay: [charge]}", "domains.pay[0]", `tool "charge"`},
		{"collect not in schema", "name: a\nroutes:\n  - title: T\n    schema: {type: object, properties: {x: {type: string}}}\n    steps:\n      - collect: [y]", "routes[0].steps[0].collect", `collect "y"`},
		{"skipIf misspelt", "name: a\nroutes:\n  - title: T\n    schema: {type: object, properties: {x: {type: string}}}\n    steps:\n      - prompt: p\n        skipIf: xx != nil", "routes[0].steps[0].skipIf", "unknown name xx"},
		{"skipIf not a condition", "name: a\nroutes:\n  - title: T\n    schema: {type: object, properties: {x: {type: string}}}\n    steps:\n      - prompt: p\n        skipIf: x", "routes[0].steps[0].skipIf", "bool"},
		{"unknown step", "name: a\nroutes:\n  - title: T\n    steps:\n      - prompt: p\n        next: [{step: nowhere}]", "routes[0].steps[0].next[0].step", `unknown step "nowhere"`},
		{"cycle", "name: a\nroutes:\n  - title: T\n    steps:\n      - {id: a, prompt: p, next: [{step: b}]}\n      - {id: b, prompt: q, next: [{step: a}]}", "routes[0].steps", "cycle with no way out"},
		{"unknown domain", "name: a\nroutes:\n  - title: T\n    domains: [pay]", "routes[0].domains[0]", `unknown domain "pay"`},
		{"no title", "name: a\nroutes:\n  - description: d", "routes[0].title", "needs a title"},
		{"guideline without action", "name: a\nguidelines: [{condition: c}]", "guidelines[0].action", "needs an action"},
		{"strict without responses", "name: a\ncomposition: strict_canned", "composition", "canned responses"},
		{"unknown composition", "name: a\ncomposition: poetic", "composition", `WithComposition("poetic")`},
		{"margin out of range", "name: a\nroutingMargin: 120", "routingMargin", "want 0 to 100"},
		{"score out of range", "name: a\nminRouteScore: -1", "minRouteScore", "want 0 to 100"},
		{"no name", "description: d", "name", "needs a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var def routes.Definition
			if err := yaml.Unmarshal([]byte(tc.file), &def); err != nil {
				t.Fatal(err)
			}
			_, err := routes.Build(r, def)
			var de *routes.DefinitionError
			if !errors.As(err, &de) || de.Path != tc.path || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, routes.ErrInvalidDefinition) {
				t.Fatalf("want a DefinitionError at %s saying %q, got %#v: %v", tc.path, tc.msg, de, err)
			}
			if _, err := yaml.PathString("$." + de.Path); err != nil {
				t.Errorf("the path %q is not a YAML path a loader can look up: %v", de.Path, err)
			}
		})
	}
}
