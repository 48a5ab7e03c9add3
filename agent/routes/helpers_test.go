package routes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// epoch is the fixed clock of every test agent, so that states compare.
var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// newAgent returns an agent over a scripted model, with a fixed clock.
func newAgent(t testing.TB, opts ...routes.Option) (*routes.Agent, *testmodel.Model, *agent.Registry) {
	t.Helper()
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/scripted")
	opts = append([]routes.Option{
		routes.WithGenerateOpts(agent.WithModelName("test/scripted")),
		routes.WithClock(func() time.Time { return epoch }),
	}, opts...)
	return routes.New(r, "Test Agent", opts...), m, r
}

// reply scripts one answer: JSON for a value, text for a string, streamed in pieces
// of 7 bytes (cutting escapes and runes), so that streaming is tested by every
// scenario that runs both ways.
func reply(m *testmodel.Model, v any) {
	var text string
	switch v := v.(type) {
	case string:
		text = v
	case *abi.Part:
		m.Reply(v)
		return
	default:
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		text = string(b)
	}
	var pieces []string
	for i := 0; i < len(text); i += 7 {
		pieces = append(pieces, text[i:min(i+7, len(text))])
	}
	m.Push(testmodelTurn(pieces...))
}

// way is one way of running a turn: Respond, or RespondStream read to its end.
type way struct {
	name string
	do   func(ctx context.Context, a *routes.Agent, in routes.RespondInput) (*routes.Response, error)
}

var ways = []way{
	{"Respond", func(ctx context.Context, a *routes.Agent, in routes.RespondInput) (*routes.Response, error) {
		return a.Respond(ctx, in)
	}},
	{"RespondStream", func(ctx context.Context, a *routes.Agent, in routes.RespondInput) (*routes.Response, error) {
		var acc strings.Builder
		for c, err := range a.RespondStream(ctx, in) {
			if err != nil {
				return nil, err
			}
			acc.WriteString(c.Delta)
			if c.Accumulated != acc.String() {
				return nil, fmt.Errorf("accumulated %q, deltas add up to %q", c.Accumulated, acc.String())
			}
			if c.Done {
				return &routes.Response{Message: c.Accumulated, Session: c.Session, ToolCalls: c.ToolCalls, RouteComplete: c.RouteComplete, Warnings: c.Warnings}, nil
			}
		}
		return nil, fmt.Errorf("the stream ended without a final chunk")
	}},
}

// conversation drives an agent turn by turn, keeping the history and the state.
type conversation struct {
	t       testing.TB
	a       *routes.Agent
	way     way
	history []*abi.Message
	state   *routes.State
	results []*routes.Response
}

func converse(t testing.TB, a *routes.Agent, w way) *conversation {
	return &conversation{t: t, a: a, way: w, state: routes.NewState("s1")}
}

// say runs a turn and fails the test on an error.
func (c *conversation) say(text string) *routes.Response {
	c.t.Helper()
	r, err := c.try(text)
	if err != nil {
		c.t.Fatalf("%s: turn %q: %v", c.way.name, text, err)
	}
	return r
}

// try runs a turn; on success the history and state move on.
func (c *conversation) try(text string) (*routes.Response, error) {
	history := append(c.history[:len(c.history):len(c.history)], abi.NewUserTextMessage(text))
	r, err := c.way.do(context.Background(), c.a, routes.RespondInput{History: history, Session: c.state})
	if err != nil {
		return nil, err
	}
	c.history = history
	if r.Message != "" {
		c.history = append(c.history, abi.NewModelTextMessage(r.Message))
	}
	c.state = r.Session
	c.results = append(c.results, r)
	return r, nil
}

// bothWays runs a scenario with Respond and with RespondStream, and fails unless both
// gave the same responses.
func bothWays(t *testing.T, scenario func(t *testing.T, w way) *conversation) {
	t.Helper()
	var runs [][]*routes.Response
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) { runs = append(runs, scenario(t, w).results) })
	}
	if len(runs) == len(ways) {
		sameResults(t, runs[0], runs[1])
	}
}

// sameResults fails unless two runs of a scenario gave equal responses.
func sameResults(t *testing.T, a, b []*routes.Response) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d turns against %d", len(a), len(b))
	}
	for i := range a {
		ja, _ := json.Marshal(a[i])
		jb, _ := json.Marshal(b[i])
		if !reflect.DeepEqual(normalize(ja), normalize(jb)) {
			t.Errorf("turn %d differs:\n  %s\n  %s", i, ja, jb)
		}
	}
}

func normalize(b []byte) any {
	var v any
	json.Unmarshal(b, &v)
	return v
}

// systemOf returns the system prompt of a request.
func systemOf(req *abi.GenerateRequest) string {
	for _, m := range req.Messages {
		if m.Role == abi.RoleSystem {
			return m.Text()
		}
	}
	return ""
}

// outputProps returns the property names of a request's output schema.
func outputProps(req *abi.GenerateRequest) []string {
	if req.Output == nil || req.Output.Schema == nil {
		return nil
	}
	props, _ := req.Output.Schema["properties"].(map[string]any)
	var out []string
	for k := range props {
		out = append(out, k)
	}
	return out
}

// testmodelTurn is a streamed turn: each piece a chunk, the whole the message.
func testmodelTurn(pieces ...string) testmodel.Turn {
	var chunks []*abi.GenerateResponseChunk
	whole := ""
	for _, p := range pieces {
		chunks = append(chunks, &abi.GenerateResponseChunk{Content: []*abi.Part{abi.NewTextPart(p)}})
		whole += p
	}
	return testmodel.Turn{Chunks: chunks, Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage(whole), FinishReason: abi.FinishStop}}
}
