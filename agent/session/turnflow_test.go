package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/store"
)

// A turn flow runs one turn of a session flow from JSON, streaming its chunks: a new
// session's, then a kept one's; an interrupted turn says what waits.
func TestTurnFlow(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/chat")
	m.ReplyText("Hello.").ReplyText("Again.").Reply(toolReq("ask", "q", map[string]any{"question": "why?"}))
	ask := agent.NewTool("ask", "Asks.", func(context.Context, struct {
		Question string `json:"question"`
	}) (string, error) {
		return "", agent.Interrupt(map[string]any{"asked": true})
	})
	chat := session.DefineAgent[Status, State](r, "chat", session.WithGenerateOpts[State](agent.WithModelName("test/chat"), agent.WithTools(ask)),
		session.WithSnapshotStore(session.NewSnapshotStore[State](store.NewMemory())))
	flow := session.NewTurnFlow(chat)
	if d := flow.Desc(); d.Key != "/flow/chat" || d.Type != agent.ActionTypeFlow || d.InputSchema == nil {
		t.Errorf("desc %+v", d)
	}
	run := func(input string) (session.TurnFlowOutput, int, error) {
		t.Helper()
		chunks := 0
		raw, err := flow.RunJSON(t.Context(), json.RawMessage(input), func(context.Context, json.RawMessage) error {
			chunks++
			return nil
		})
		var out session.TurnFlowOutput
		if err == nil {
			err = json.Unmarshal(raw, &out)
		}
		return out, chunks, err
	}
	first, chunks, err := run(`{"text": "hi"}`)
	if err != nil || first.Text != "Hello." || first.FinishReason != abi.FinishStop || first.SessionID == "" || first.SnapshotID == "" || chunks < 2 {
		t.Fatalf("first turn: %+v, %d chunks, %v", first, chunks, err)
	}
	second, _, err := run(`{"text": "again", "sessionId": "` + first.SessionID + `"}`)
	if err != nil || second.Text != "Again." || second.SessionID != first.SessionID {
		t.Fatalf("the next turn of the session: %+v %v", second, err)
	}
	wantConversation(t, m.LastRequest(), "user: hi", "model: Hello.", "user: again")
	asked, _, err := run(`{"text": "ask me"}`)
	if err != nil || asked.FinishReason != abi.FinishInterrupted || len(asked.Pending) != 1 || asked.Pending[0].Request.Name != "ask" ||
		asked.Pending[0].Interrupt.(map[string]any)["asked"] != true {
		t.Errorf("an interrupted turn: %+v %v", asked, err)
	}
	if _, _, err := run(`{"text": ""}`); !errors.Is(err, agent.ErrInvalidInput) {
		t.Errorf("no text: %v", err)
	}
}
