package session_test

import (
	"context"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/prompt"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// A session flow keeps a conversation across turns; with a snapshot store, every turn
// ends with a snapshot the session can be resumed from.
func ExampleDefineSessionFlow() {
	type Counter struct {
		Turns int `json:"turns"`
	}
	r := agent.NewRegistry()
	store := session.NewInMemorySnapshotStore[Counter]()
	echo := session.DefineSessionFlow(r, "echo",
		func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[struct{}], p *session.SessionFlowParams[struct{}, Counter]) error {
			for in := range inCh {
				p.Session.AddMessages(in.Messages...)
				p.Session.UpdateCustom(func(c Counter) Counter { c.Turns++; return c })
				reply := abi.NewModelTextMessage("you said: " + in.Messages[0].Text())
				p.Session.AddMessages(reply)
				if err := resp.SendChunk(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: reply.Content}); err != nil {
					return err
				}
				if err := resp.EndTurn(); err != nil {
					return err
				}
			}
			return nil
		},
		session.WithSnapshotStore(store))

	ctx := context.Background()
	conn, _ := echo.StreamBidi(ctx)
	var snapshot string
	for _, text := range []string{"hello", "again"} {
		conn.SendText(text)
		for chunk, err := range conn.Receive() {
			if err != nil {
				fmt.Println(err)
				return
			}
			if chunk.Chunk != nil {
				fmt.Println(chunk.Chunk.Text())
			}
			if chunk.SnapshotCreated != "" {
				snapshot = chunk.SnapshotCreated
			}
		}
	}
	conn.Close()
	conn.Output()

	// A later connection resumes from the last snapshot.
	resumed, _ := echo.StreamBidi(ctx, session.WithSnapshotID[Counter](snapshot))
	resumed.SendText("still there?")
	for range resumed.Receive() {
	}
	resumed.Close()
	// The store keeps the session: the output names its snapshot.
	out, _ := resumed.Output()
	last, _ := store.GetSnapshot(ctx, out.SnapshotID)
	fmt.Println(last.State.Custom.Turns, "turns,", len(last.State.Messages), "messages")
	// Output:
	// you said: hello
	// you said: again
	// 3 turns, 6 messages
}

// DefineAgent writes the turn loop from a prompt, re-rendered each turn from the
// session's prompt input and state.
func ExampleDefineAgent() {
	type Mood struct {
		Mood string `json:"mood"`
	}
	r := agent.NewRegistry()
	model := testmodel.Define(r, "demo/model").ReplyText("Happy to help!")
	support := prompt.Define(r, "support",
		agent.WithModelName("demo/model"),
		agent.WithSystem("You help with {{product}}. The customer feels {{@state.mood}}."),
	)
	desk := session.DefineAgent[struct{}, Mood](r, "desk",
		session.WithBasePrompt[Mood, any](support, map[string]any{"product": "Terrarium"}),
		session.WithSnapshotStore(session.NewInMemorySnapshotStore[Mood]()))

	conn, _ := desk.StreamBidi(context.Background())
	conn.SendText("Hi!")
	for chunk, err := range conn.Receive() {
		if err != nil {
			fmt.Println(err)
			return
		}
		if chunk.Chunk != nil {
			fmt.Println(chunk.Chunk.Text())
		}
		if chunk.EndTurn {
			fmt.Println("finish:", chunk.FinishReason)
		}
	}
	conn.Close()
	conn.Output()
	fmt.Println(model.LastRequest().Messages[0].Text())
	// Output:
	// Happy to help!
	// finish: stop
	// You help with Terrarium. The customer feels .
}
