package session_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// lookup is a client tool: the client runs it.
var lookup = &abi.ToolDefinition{Name: "lookup", Description: "Looks a word up.",
	InputSchema: map[string]any{"type": "object", "properties": map[string]any{"word": map[string]any{"type": "string"}}, "required": []any{"word"}}}

// A client's tool is offered beside the agent's own; the model calling it ends the
// turn with the request pending, the client's answer continues the turn, and the
// session keeps the exchange.
func TestAgentClientToolRoundTrip(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/chat")
	m.Reply(toolReq("lookup", "c1", map[string]any{"word": "terrarium"})).ReplyText("A glass garden.")
	chat := session.DefineAgent[Status, State](r, "chat", session.WithGenerateOpts[State](
		agent.WithModelName("test/chat"), agent.WithTools(newAdd())))
	conn, err := chat.StreamBidi(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	in := say("What is a terrarium?")
	in.Tools = []*abi.ToolDefinition{lookup}
	_, pending, _, err := agentTurn(t, conn, in)
	if err != nil || len(pending) != 1 || pending[0].ToolRequest.Name != "lookup" ||
		pending[0].Metadata["interrupt"].(map[string]any)["clientTool"] != true {
		t.Fatalf("the turn ends with the client's request pending: %v %+v", err, pending)
	}
	if got := m.LastRequest().Tools; len(got) != 2 || got[0].Name != "add" || got[1].Name != "lookup" {
		t.Errorf("the model was offered %+v, want the agent's add and the client's lookup", got)
	}
	text, pending, _, err := agentTurn(t, conn, &session.SessionFlowInput{Tools: in.Tools, Resume: &abi.Resume{Respond: []*abi.Part{
		abi.NewToolResponsePart(&abi.ToolResponse{Name: "lookup", Ref: "c1", Output: "a glass garden"})}}})
	if err != nil || len(pending) != 0 || text != "A glass garden." {
		t.Fatalf("the answer continues the turn: %q %v %v", text, pending, err)
	}
	wantConversation(t, m.LastRequest(), "user: What is a terrarium?", "model: call(lookup)", "tool: result(lookup)")
	if got := finish(t, conn).State.Messages; len(got) != 4 {
		t.Errorf("the session keeps %d messages, want the question, the call, its answer and the reply", len(got))
	}
}

// Client tools the agent cannot offer are refused before anything runs, and the
// session stays open.
func TestAgentRefusesClientTools(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/chat")
	m.ReplyText("ok")
	open := session.DefineAgent[Status, State](r, "open", session.WithGenerateOpts[State](
		agent.WithModelName("test/chat"), agent.WithTools(newAdd())))
	closed := session.DefineAgent[Status, State](r, "closed", session.WithGenerateOpts[State](
		agent.WithModelName("test/chat")), session.WithClientTools[State](false))
	for _, c := range []struct {
		name string
		flow *session.SessionFlow[Status, State]
		defs []*abi.ToolDefinition
		want string
	}{
		{"forbidden", closed, []*abi.ToolDefinition{lookup}, "agent closed takes no client tools"},
		{"clash", open, []*abi.ToolDefinition{{Name: "add"}}, `client tool "add" has the name of one of agent open's own tools`},
		{"twice", open, []*abi.ToolDefinition{lookup, lookup}, `client tool "lookup" is given twice`},
		{"no name", open, []*abi.ToolDefinition{{Description: "?"}}, "a client tool needs a name"},
		{"bad schema", open, []*abi.ToolDefinition{{Name: "x", InputSchema: map[string]any{"type": 7}}}, `client tool "x": its input schema`},
	} {
		conn, err := c.flow.StreamBidi(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		in := say("hi")
		in.Tools = c.defs
		_, _, _, err = agentTurn(t, conn, in)
		if !errors.Is(err, agent.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidInput saying %q", c.name, err, c.want)
		}
		if out := finish(t, conn); len(out.State.Messages) != 0 {
			t.Errorf("%s: the refused turn left %d messages", c.name, len(out.State.Messages))
		}
	}
	if len(m.Requests()) != 0 {
		t.Errorf("the model was called %d times for refused turns", len(m.Requests()))
	}
}

// A turn's output format replaces the agent's for that turn, and an answer that does
// not match it fails the turn.
func TestAgentTurnOutput(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/chat")
	m.ReplyText("```json\n{\"city\": \"Lisbon\"}\n```").ReplyText("plain").ReplyText(`{"city": 3}`)
	chat := session.DefineAgent[Status, State](r, "chat", session.WithGenerateOpts[State](agent.WithModelName("test/chat")))
	conn, err := chat.StreamBidi(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	city := &abi.GenerateActionOutputConfig{Format: "json", JSONSchema: map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}}
	in := say("Where?")
	in.Output = city
	if _, _, _, err := agentTurn(t, conn, in); err != nil {
		t.Fatal(err)
	}
	if o := m.LastRequest().Output; o == nil || o.Format != "json" || o.Schema == nil {
		t.Errorf("the model was asked for %+v, want the turn's JSON schema", o)
	}
	if _, _, _, err := agentTurn(t, conn, say("And now?")); err != nil || (m.LastRequest().Output != nil && m.LastRequest().Output.Format == "json") {
		t.Errorf("the next turn asks for the agent's format again: %v %+v", err, m.LastRequest().Output)
	}
	bad := say("Where else?")
	bad.Output = city
	if _, _, _, err := agentTurn(t, conn, bad); !errors.Is(err, agent.ErrInvalidOutput) {
		t.Errorf("an answer off the schema: %v, want ErrInvalidOutput", err)
	}
	conn.Close()
	conn.Output()

	conn, _ = chat.StreamBidi(t.Context())
	in.Output = &abi.GenerateActionOutputConfig{Format: "json", JSONSchema: map[string]any{"type": 7}}
	if _, _, _, err := agentTurn(t, conn, in); !errors.Is(err, agent.ErrInvalidInput) {
		t.Errorf("an invalid schema: %v, want the turn refused", err)
	}
	finish(t, conn)
}
