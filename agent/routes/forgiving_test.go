package routes_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
)

// codes lists the codes of a turn's warnings, and the fields they name.
func codes(ws []routes.Warning) []string {
	var out []string
	for _, w := range ws {
		c := string(w.Code)
		if w.Field != "" {
			c += ":" + w.Field
		}
		out = append(out, c)
	}
	return out
}

// Item 1: a model says "not stated" with a blank string as often as with null; the
// seed's skipIf idiom (!!data.name) takes it so. Neither a blank nor a value the
// route's schema marks as empty is collected: the step stays, the field missing.
func TestEmptyValuesAreNotCollected(t *testing.T) {
	bothWays(t, func(t *testing.T, w way) *conversation {
		a, m, _ := newAgent(t)
		onboarding(a, nil, true)
		c := converse(t, a, w)
		reply(m, map[string]any{"message": "Hello! What's your name?", "name": "", "email": "   "})
		res := c.say("Hi")
		if res.Session.CurrentStep.ID != "ask_name" || len(res.Session.Data()) != 0 {
			t.Fatalf("blank values: step %q, data %v; want ask_name and nothing collected", res.Session.CurrentStep.ID, res.Session.Data())
		}
		reply(m, map[string]any{"message": "Thanks Ann! Your email?", "name": "Ann", "email": ""})
		c.say("I'm Ann")
		reply(m, map[string]any{"message": "And your email?", "name": " ", "email": nil})
		res = c.say("hmm")
		if res.Session.CurrentStep.ID != "ask_email" || res.Session.Data()["name"] != "Ann" || res.Session.Data().Has("email") {
			t.Errorf("a blank never replaces what is known: step %q, data %v", res.Session.CurrentStep.ID, res.Session.Data())
		}
		if len(res.Warnings) != 0 {
			t.Errorf("not stated is no fault: %v", res.Warnings)
		}
		return c
	})

	t.Run("marked empty by the schema", func(t *testing.T) {
		a, m, _ := newAgent(t)
		rt := a.CreateRoute(routes.RouteOptions{ID: "signup", Title: "Sign up", Schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":     map[string]any{"type": "string", routes.EmptyKeyword: []any{"unknown", "N/A"}},
				"children": map[string]any{"type": "integer", routes.EmptyKeyword: 0},
			},
		}})
		rt.InitialStep().
			NextStep(routes.StepSpec{ID: "ask_name", Prompt: "Ask the name", Collect: []string{"name"}}).
			NextStep(routes.StepSpec{ID: "ask_children", Prompt: "Ask the number of children", Collect: []string{"children"}})
		c := converse(t, a, ways[0])
		reply(m, map[string]any{"message": "Your name?", "name": "N/A", "children": 0})
		if res := c.say("Hi"); res.Session.CurrentStep.ID != "ask_name" || len(res.Session.Data()) != 0 {
			t.Errorf("values marked empty: step %q, data %v", res.Session.CurrentStep.ID, res.Session.Data())
		}
		reply(m, map[string]any{"message": "How many children?", "name": "Ann", "children": 2})
		c.say("Ann, two kids")
		if got := c.state.Data(); got["name"] != "Ann" || got["children"] != float64(2) {
			t.Errorf("values not marked: %v", got)
		}
	})

	t.Run("from the routing call", func(t *testing.T) {
		a, m, _ := newAgent(t)
		flightRoute(a)
		hotelRoute(a)
		reply(m, map[string]any{"routes": scores(90, 0), "data": map[string]any{"flight": map[string]any{"destination": "", "passengers": 2}}})
		reply(m, map[string]any{"message": "Where to?"})
		res := converse(t, a, ways[0]).say("A flight for two")
		if res.Session.CurrentStep.ID != "ask_destination" || res.Session.Data().Has("destination") || res.Session.Data()["passengers"] != float64(2) {
			t.Errorf("step %q, data %v", res.Session.CurrentStep.ID, res.Session.Data())
		}
	})

	if (routes.Data{"name": " \t"}).Has("name") || !(routes.Data{"n": 0}).Has("n") {
		t.Errorf("Has: a blank string is not known, a zero is")
	}
}

// Item 2: the model's answer as real models write it. Each scenario starts at the
// onboarding route's first step (name, then email).
func TestForgivingAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   any
		message  string
		data     routes.Data
		warnings []string
		calls    int // model calls, when not 1
	}{
		{
			name:     "prose instead of JSON",
			answer:   "Hello there! What's your name?",
			message:  "Hello there! What's your name?",
			warnings: []string{"no_json"},
		},
		{
			name:    "fields beyond the step's",
			answer:  map[string]any{"message": "Thanks Ann!", "name": "Ann", "email": "ann@example.com", "mood": "cheerful"},
			message: "Thanks Ann!",
			data:    routes.Data{"name": "Ann", "email": "ann@example.com"},
		},
		{
			name:     "a field of the wrong type",
			answer:   map[string]any{"message": "Thanks!", "name": 42, "email": "ann@example.com"},
			message:  "Thanks!",
			data:     routes.Data{"email": "ann@example.com"},
			warnings: []string{"invalid_field:name"},
		},
		{
			name:    "JSON in a code fence amid commentary",
			answer:  "Sure! Here is my answer:\n```json\n{\"message\": \"Nice to meet you, Ann.\", \"name\": \"Ann\"}\n```\nLet me know if you need anything else.",
			message: "Nice to meet you, Ann.",
			data:    routes.Data{"name": "Ann"},
		},
		{
			name:    "the message around the JSON",
			answer:  "Nice to meet you, Ann! What's your email?\n\n```json\n{\"name\": \"Ann\"}\n```",
			message: "Nice to meet you, Ann! What's your email?",
			data:    routes.Data{"name": "Ann"},
		},
		{
			name:     "a blank message",
			answer:   map[string]any{"message": "", "name": "Ann"},
			message:  "Thanks, Ann. What's your email?",
			data:     routes.Data{"name": "Ann"},
			warnings: []string{"no_message"},
			calls:    2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothWays(t, func(t *testing.T, w way) *conversation {
				a, m, _ := newAgent(t)
				onboarding(a, nil, true)
				c := converse(t, a, w)
				reply(m, tc.answer)
				if tc.calls == 2 {
					reply(m, "Thanks, Ann. What's your email?")
				}
				res := c.say("I'm Ann, ann@example.com")
				if res.Message != tc.message {
					t.Errorf("message %q, want %q", res.Message, tc.message)
				}
				if got := res.Session.Data(); len(got) != len(tc.data) || !equalData(got, tc.data) {
					t.Errorf("data %v, want %v", got, tc.data)
				}
				if got := codes(res.Warnings); !slices.Equal(got, tc.warnings) {
					t.Errorf("warnings %v (%+v), want %v", got, res.Warnings, tc.warnings)
				}
				if want := max(tc.calls, 1); len(m.Requests()) != want {
					t.Errorf("%d model calls, want %d", len(m.Requests()), want)
				}
				if res.Session.CurrentStep.ID != "ask_name" {
					t.Errorf("step %q: the answer's data moves the route on the next turn", res.Session.CurrentStep.ID)
				}
				return c
			})
		})
	}

	t.Run("known fields not the step's are kept", func(t *testing.T) {
		a, m, _ := newAgent(t)
		onboarding(a, nil, true)
		c := converse(t, a, ways[0])
		c.state = &routes.State{}
		reply(m, map[string]any{"message": "Your name?", "name": "Ann"})
		c.say("Hi, I'm Ann")
		reply(m, map[string]any{"message": "Your email?", "name": "Bob", "email": "ann@example.com"})
		res := c.say("ann@example.com")
		if got := res.Session.Data(); got["name"] != "Ann" || got["email"] != "ann@example.com" {
			t.Errorf("data %v: a known field beyond the step's is not the answer's to change", got)
		}
	})

	t.Run("the warning is in the trace", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(tp)
		defer otel.SetTracerProvider(prev)

		a, m, _ := newAgent(t)
		onboarding(a, nil, true)
		reply(m, map[string]any{"message": "Thanks!", "name": 42})
		converse(t, a, ways[0]).say("I'm 42")
		var events []string
		for _, s := range rec.Ended() {
			if s.Name() != a.Name() {
				continue
			}
			for _, e := range s.Events() {
				for _, kv := range e.Attributes {
					if kv.Key == "code" || kv.Key == "field" {
						events = append(events, e.Name+" "+string(kv.Key)+"="+kv.Value.Emit())
					}
				}
			}
		}
		if want := []string{"routes.warning code=invalid_field", "routes.warning field=name"}; !slices.Equal(events, want) {
			t.Errorf("the turn's span events %v, want %v", events, want)
		}
	})
}

func equalData(a, b routes.Data) bool {
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// Routing answers go wrong too: prose, scores as strings, a field of the wrong type.
func TestForgivingRouting(t *testing.T) {
	bothWays(t, func(t *testing.T, w way) *conversation {
		a, m, _ := newAgent(t)
		flightRoute(a)
		hotelRoute(a)
		c := converse(t, a, w)

		reply(m, "The user seems to want a flight.")
		reply(m, "Hello! Where would you like to go?")
		res := c.say("I want to fly")
		if res.Session.CurrentRoute != nil || res.Message != "Hello! Where would you like to go?" || !slices.Equal(codes(res.Warnings), []string{"routing"}) {
			t.Fatalf("a routing answer in prose: route %+v, message %q, warnings %v", res.Session.CurrentRoute, res.Message, res.Warnings)
		}

		reply(m, "```json\n"+`{"routes": {"flight": "90", "hotel": 5}, "data": {"flight": {"destination": "Oslo", "passengers": "two"}}, "reasoning": "a flight"}`+"\n```")
		reply(m, map[string]any{"message": "When do you leave for Oslo?"})
		res = c.say("To Oslo, the two of us")
		if res.Session.CurrentRoute == nil || res.Session.CurrentRoute.ID != "flight" || res.Session.CurrentStep.ID != "ask_dates" {
			t.Fatalf("a score in a string still counts: %+v %+v", res.Session.CurrentRoute, res.Session.CurrentStep)
		}
		if got := res.Session.Data(); got["destination"] != "Oslo" || got.Has("passengers") {
			t.Errorf("data %v: the good field kept, the bad one dropped", got)
		}
		if got := codes(res.Warnings); !slices.Equal(got, []string{"invalid_field:passengers"}) {
			t.Errorf("warnings %v", got)
		}

		reply(m, map[string]any{"routes": map[string]any{"flight": []any{90}, "hotel": "high"}})
		reply(m, map[string]any{"message": "When do you leave?"})
		res = c.say("hmm")
		if res.Session.CurrentRoute.ID != "flight" || !slices.Equal(codes(res.Warnings), []string{"routing"}) {
			t.Errorf("scores of the wrong type: route %q, warnings %v", res.Session.CurrentRoute.ID, res.Warnings)
		}
		return c
	})
}

// A strict agent refuses what a forgiving one absorbs.
func TestStrictAgentRefusesWhatTheModelGetsWrong(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer any
		want   error
	}{
		{"prose", "Hello! What's your name?", agent.ErrInvalidOutput},
		{"a field the schema lacks", map[string]any{"message": "Hi", "name": "Ann", "mood": "cheerful"}, agent.ErrInvalidOutput},
		{"a field of the wrong type", map[string]any{"message": "Hi", "name": 42}, routes.ErrInvalidData},
	} {
		a, m, _ := newAgent(t, routes.WithStrict())
		onboarding(a, nil, true)
		reply(m, tc.answer)
		if _, err := converse(t, a, ways[0]).try("I'm Ann"); !errors.Is(err, tc.want) {
			t.Errorf("%s: want %v, got %v", tc.name, tc.want, err)
		}
	}
	a, m, _ := newAgent(t, routes.WithStrict())
	flightRoute(a)
	hotelRoute(a)
	reply(m, "The user seems to want a flight.")
	if _, err := converse(t, a, ways[0]).try("I want to fly"); !errors.Is(err, agent.ErrInvalidOutput) || !strings.Contains(err.Error(), "routing") {
		t.Errorf("a routing answer in prose: %v", err)
	}
}

// Item 4: with one route there is no routing call, so the answer is what extracts
// the data: it may fill every field of the route still missing, not only its step's.
func TestSingleRouteExtractionSeesTheWholeRoute(t *testing.T) {
	bothWays(t, func(t *testing.T, w way) *conversation {
		a, m, _ := newAgent(t)
		flightRoute(a)
		c := converse(t, a, w)
		reply(m, map[string]any{"message": "Paris on July 1st for two: noted.", "destination": "Paris", "departureDate": "2025-07-01", "passengers": 2})
		c.say("Fly me to Paris on 2025-07-01, two of us")
		if got := sorted(outputProps(m.LastRequest())); !slices.Equal(got, []string{"departureDate", "destination", "message", "passengers"}) {
			t.Errorf("the answer may fill %v", got)
		}
		if sys := systemOf(m.LastRequest()); !strings.Contains(sys, "Fill destination, departureDate, passengers in your answer") {
			t.Errorf("the prompt does not ask for the route's fields:\n%s", sys)
		}
		res := c.say("Thanks")
		if !res.RouteComplete || len(m.Requests()) != 1 {
			t.Errorf("everything was said in the first message: complete %v after %d calls", res.RouteComplete, len(m.Requests()))
		}
		return c
	})
}
