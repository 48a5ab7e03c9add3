package routes_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
)

var cannedFlight = []routes.CannedResponse{
	{ID: "ask_destination", Template: "Where would you like to fly?"},
	{ID: "confirm", Template: "Your flight to {{destination}} is noted."},
}

func TestStrictComposition(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			a, m, _ := newAgent(t, routes.WithComposition(routes.CannedStrict), routes.WithCannedResponses(cannedFlight...))
			flightRoute(a)
			c := converse(t, a, w)
			reply(m, map[string]any{"response": "ask_destination", "destination": nil})
			res := c.say("I want to fly")
			if res.Message != "Where would you like to fly?" {
				t.Errorf("message %q", res.Message)
			}
			req := m.LastRequest()
			enum := req.Output.Schema["properties"].(map[string]any)["response"].(map[string]any)["enum"].([]any)
			if len(enum) != 1 || enum[0] != "ask_destination" {
				t.Errorf("offered %v: a response naming data not known yet cannot be said", enum)
			}
			if _, ok := req.Output.Schema["properties"].(map[string]any)["message"]; ok {
				t.Errorf("strict composition asks for no free message")
			}

			reply(m, map[string]any{"response": "confirm", "departureDate": nil})
			c.state.DataByRoute["flight"] = routes.Data{"destination": "Lisbon"}
			res = c.say("Lisbon")
			if res.Message != "Your flight to Lisbon is noted." {
				t.Errorf("canned response filled from data: %q", res.Message)
			}

			for _, answer := range []any{
				"Sure, I'll book it right away!",
				map[string]any{"response": "made_up"},
			} {
				reply(m, answer)
				before := c.state
				_, err := c.try("and back?")
				if !errors.Is(err, routes.ErrNotCanned) {
					t.Errorf("answer %v: want ErrNotCanned, got %v", answer, err)
				}
				if c.state != before {
					t.Errorf("a refused answer changed the state")
				}
			}
			// A canned response with a free message besides: the message is a field
			// the answer does not have, ignored unless the agent is strict.
			reply(m, map[string]any{"message": "free text", "response": "confirm"})
			if res := c.say("and back?"); res.Message != "Your flight to Lisbon is noted." {
				t.Errorf("a canned response with an extra message: %q", res.Message)
			}
		})
	}
	t.Run("strict agent", func(t *testing.T) {
		a, m, _ := newAgent(t, routes.WithComposition(routes.CannedStrict), routes.WithCannedResponses(cannedFlight...), routes.WithStrict())
		flightRoute(a)
		c := converse(t, a, ways[0])
		reply(m, map[string]any{"message": "free text", "response": "ask_destination"})
		if _, err := c.try("I want to fly"); !errors.Is(err, routes.ErrNotCanned) {
			t.Errorf("a free message besides the response: want ErrNotCanned, got %v", err)
		}
	})
	if _, err := func() (r any, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = p.(error)
			}
		}()
		a, _, _ := newAgent(t, routes.WithComposition(routes.CannedStrict))
		flightRoute(a)
		return nil, a.Validate()
	}(); !errors.Is(err, routes.ErrInvalidDefinition) {
		t.Errorf("strict composition without canned responses: %v", err)
	}
}

func TestCannedFluidAndComposited(t *testing.T) {
	t.Run("fluid picks a canned response or writes its own", func(t *testing.T) {
		for _, w := range ways {
			a, m, _ := newAgent(t, routes.WithComposition(routes.CannedFluid), routes.WithCannedResponses(cannedFlight...))
			flightRoute(a)
			c := converse(t, a, w)
			reply(m, map[string]any{"message": "", "response": "ask_destination"})
			if res := c.say("I want to fly"); res.Message != "Where would you like to fly?" {
				t.Errorf("%s: canned: %q", w.name, res.Message)
			}
			reply(m, map[string]any{"message": "Lovely choice! When?", "response": nil, "destination": "Rome"})
			if res := c.say("Rome"); res.Message != "Lovely choice! When?" {
				t.Errorf("%s: own: %q", w.name, res.Message)
			}
		}
	})
	t.Run("composited writes from the responses", func(t *testing.T) {
		a, m, _ := newAgent(t, routes.WithComposition(routes.CannedComposited), routes.WithCannedResponses(cannedFlight...))
		flightRoute(a)
		reply(m, map[string]any{"message": "Hi! Where would you like to fly?"})
		res := converse(t, a, ways[1]).say("I want to fly")
		if res.Message != "Hi! Where would you like to fly?" {
			t.Errorf("message %q", res.Message)
		}
		if sys := systemOf(m.LastRequest()); !strings.Contains(sys, "keeping their wording") || !strings.Contains(sys, "- ask_destination: Where would you like to fly?") {
			t.Errorf("the responses are not in the prompt:\n%s", sys)
		}
	})
}

type Bill struct {
	Expression string  `json:"expression,omitempty"`
	Value      float64 `json:"value,omitempty"`
}

type calcIn struct {
	Expression string `json:"expression"`
}

type calcOut struct {
	Value      float64 `json:"value"`
	Expression string  `json:"expression"`
}

// billRoute asks for an expression, computes it with the step tool calc, reports.
func billRoute(a *routes.Agent, calc agent.Tool) {
	rt := a.CreateRoute(routes.RouteOptions{ID: "bill", Title: "Split the bill", Schema: routes.SchemaFor[Bill]()})
	rt.InitialStep().
		NextStep(routes.StepSpec{ID: "ask", Prompt: "Ask for the sum to compute", Collect: []string{"expression"}}).
		NextStep(routes.StepSpec{ID: "compute", Tool: calc}).
		NextStep(routes.StepSpec{ID: "report", Prompt: "Tell each person's share: {{value}}"}).
		NextStep(routes.StepSpec{Step: routes.EndRoute})
}

func TestStepTool(t *testing.T) {
	calc := agent.NewTool("calc", "Evaluates a division.", func(ctx context.Context, in calcIn) (calcOut, error) {
		if in.Expression != "120/4" {
			return calcOut{}, errors.New("unexpected expression " + in.Expression)
		}
		return calcOut{Value: 30, Expression: in.Expression}, nil
	})
	bothWays(t, func(t *testing.T, w way) *conversation {
		a, m, _ := newAgent(t)
		billRoute(a, calc)
		c := converse(t, a, w)
		reply(m, map[string]any{"message": "What is the sum?", "expression": "120/4"})
		c.say("Split 120 between 4 of us")
		reply(m, "That's 30 each.")
		res := c.say("go ahead")
		if res.Session.CurrentStep.ID != "report" || res.Session.Data()["value"] != 30.0 {
			t.Fatalf("step %q, data %v", res.Session.CurrentStep.ID, res.Session.Data())
		}
		if len(res.ToolCalls) != 1 || res.ToolCalls[0].ToolName != "calc" {
			t.Errorf("tool calls %+v", res.ToolCalls)
		}
		sys := systemOf(m.LastRequest())
		if !strings.Contains(sys, `Tool calc returned: {"expression":"120/4","value":30}`) || !strings.Contains(sys, "Do now: Tell each person's share: 30") {
			t.Errorf("the tool's result is not in the prompt:\n%s", sys)
		}
		return c
	})
}
