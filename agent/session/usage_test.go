package session_test

import (
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// The EndTurn chunk carries what the turn's model calls used, summed.
func TestAgentTurnUsage(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/chat")
	m.Push(testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelMessage(toolReq("add", "a", map[string]any{"a": 1, "b": 2})),
		Usage: &abi.GenerationUsage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}}},
		testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage("3"),
			Usage: &abi.GenerationUsage{InputTokens: 15, OutputTokens: 1, TotalTokens: 16, CachedContentTokens: 10}}}).
		ReplyText("no usage")
	chat := session.DefineAgent[Status, State](r, "chat", session.WithGenerateOpts[State](
		agent.WithModelName("test/chat"), agent.WithTools(newAdd())))
	conn, err := chat.StreamBidi(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	usage := func(text string) *abi.GenerationUsage {
		t.Helper()
		if err := conn.SendText(text); err != nil {
			t.Fatal(err)
		}
		var u *abi.GenerationUsage
		for c, err := range conn.Receive() {
			if err != nil {
				t.Fatal(err)
			}
			if c.EndTurn {
				u = c.Usage
			}
		}
		return u
	}
	if u := usage("1+2?"); u == nil || u.InputTokens != 25 || u.OutputTokens != 3 || u.TotalTokens != 28 || u.CachedContentTokens != 10 {
		t.Errorf("usage %+v, want both calls' summed", u)
	}
	if u := usage("again"); u != nil {
		t.Errorf("a turn whose model reported nothing: usage %+v, want none", u)
	}
	finish(t, conn)

	// A connection without the flow's types carries it too.
	m.Push(testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage("counted"), Usage: &abi.GenerationUsage{InputTokens: 7}}})
	anyConn, err := chat.ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	anyConn.Send(&session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage("hi")}})
	var u *abi.GenerationUsage
	for c, err := range anyConn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.EndTurn {
			u = c.Usage
		}
	}
	if u == nil || u.InputTokens != 7 {
		t.Errorf("usage through ConnectAny: %+v", u)
	}
	anyConn.Close()
	anyConn.Output()
}
