// Agent: a prompt-driven support agent (DefineAgent).
//
// The prompt lives in prompts/support.prompt (Dotprompt: YAML front matter, Handlebars
// body) and is rendered again every turn from the session's prompt input ({{company}})
// and its current state ({{@state.mood}}). A tool records the customer's mood; another
// issues refunds and interrupts the turn until a human approves. The session is
// snapshotted every turn, and the approval arrives later, in another connection
// resumed from the snapshot.
//
// The model is the programmable test model with a script, so the example runs offline
// and prints exactly what the model was sent each turn.
//
//	go run ./examples/agent
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/prompt"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// SupportState is the session's own state; the prompt reads it as @state.
type SupportState struct {
	Mood    string `json:"mood"`
	Refunds int    `json:"refunds,omitempty"`
}

// Status is what the agent streams besides text.
type Status struct {
	Note string `json:"note,omitempty"`
}

type moodInput struct {
	Mood string `json:"mood" jsonschema:"description=calm, annoyed or angry"`
}

type refundInput struct {
	Order  string  `json:"order"`
	Amount float64 `json:"amount"`
}

func main() {
	if err := run(context.Background(), os.Stdout, promptDir()); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// promptDir finds prompts/ next to this file, wherever the example runs from.
func promptDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "prompts")
}

func run(ctx context.Context, w io.Writer, prompts string) error {
	r := agent.NewRegistry()

	setMood := agent.DefineTool(r, "set_mood", "Records the customer's mood.",
		func(ctx context.Context, in moodInput) (string, error) {
			session.FromContext[SupportState](ctx).UpdateCustom(func(s SupportState) SupportState {
				s.Mood = in.Mood
				return s
			})
			return "recorded", nil
		})
	refund := agent.DefineTool(r, "refund", "Refunds an order. A human approves it first.",
		func(ctx context.Context, in refundInput) (string, error) {
			md, resumed := agent.Resumed(ctx)
			if !resumed {
				return "", agent.Interrupt(map[string]any{"approve": fmt.Sprintf("Refund %.2f EUR for order %s?", in.Amount, in.Order)})
			}
			if md["approved"] != true {
				return "refund declined by the supervisor", nil
			}
			session.FromContext[SupportState](ctx).UpdateCustom(func(s SupportState) SupportState {
				s.Refunds++
				return s
			})
			return "refunded " + in.Order, nil
		})

	model := testmodel.Define(r, "demo/support")
	model.Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "set_mood", Ref: "m1", Input: map[string]any{"mood": "annoyed"}}))
	model.ReplyText("I'm sorry the blender arrived broken. I can refund it.")
	model.Reply(abi.NewTextPart("Refunding order 1042."), abi.NewToolRequestPart(&abi.ToolRequest{Name: "refund", Ref: "r1", Input: map[string]any{"order": "1042", "amount": 59.9}}))
	model.ReplyText("Done: 59.90 EUR are on their way back to you.")

	if _, err := prompt.LoadDir(r, prompts); err != nil {
		return err
	}
	support, err := prompt.Lookup(r, "support")
	if err != nil {
		return err
	}
	snapshots := session.NewInMemorySnapshotStore[SupportState]()
	desk := session.DefineAgent[Status, SupportState](r, "supportDesk",
		session.WithBasePrompt[SupportState](support, nil),
		session.WithGenerateOpts[SupportState](agent.WithTools(setMood, refund)),
		session.WithSnapshotStore(snapshots),
	)

	conn, err := desk.StreamBidi(ctx, session.WithPromptInput[SupportState](map[string]any{"company": "Blendr"}))
	if err != nil {
		return err
	}
	if _, err := say(w, conn, &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage("My blender arrived broken!")}}); err != nil {
		return err
	}
	snapshot, err := say(w, conn, &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage("Yes, refund it please.")}})
	if err != nil {
		return err
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		return err
	}
	// The store keeps the session: the output names its snapshot, which holds the state.
	last, err := snapshots.GetSnapshot(ctx, out.SnapshotID)
	if err != nil {
		return err
	}
	pending := session.PendingToolRequests(last.State.Messages)
	fmt.Fprintf(w, "waiting for approval: %v\n", pending[0].Metadata["interrupt"])

	// Later, in another connection: the supervisor approves.
	conn, err = desk.StreamBidi(ctx, session.WithSnapshotID[SupportState](snapshot))
	if err != nil {
		return err
	}
	approval := pending[0].Clone()
	approval.Metadata = map[string]any{"resumed": map[string]any{"approved": true}}
	if _, err := say(w, conn, &session.SessionFlowInput{Resume: &abi.Resume{Restart: []*abi.Part{approval}}}); err != nil {
		return err
	}
	conn.Close()
	if out, err = conn.Output(); err != nil {
		return err
	}
	if last, err = snapshots.GetSnapshot(ctx, out.SnapshotID); err != nil {
		return err
	}
	fmt.Fprintf(w, "state: mood %q, refunds %d, %d messages\n", last.State.Custom.Mood, last.State.Custom.Refunds, len(last.State.Messages))

	fmt.Fprintln(w, "\nwhat the model was sent, call by call:")
	for i, req := range model.Requests() {
		var lines []string
		for _, l := range strings.Split(req.Messages[0].Text(), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		fmt.Fprintf(w, "call %d: %s\n", i+1, strings.Join(lines, " / "))
	}
	return nil
}

// say sends one input, prints the streamed answer and returns the turn's snapshot.
func say(w io.Writer, conn *session.SessionFlowConnection[Status, SupportState], in *session.SessionFlowInput) (string, error) {
	if len(in.Messages) > 0 {
		fmt.Fprintf(w, "> %s\n", in.Messages[0].Text())
	} else {
		fmt.Fprintln(w, "> (approval)")
	}
	if err := conn.Send(in); err != nil {
		return "", err
	}
	var snapshot string
	for chunk, err := range conn.Receive() {
		if err != nil {
			return "", err
		}
		if chunk.Chunk != nil && chunk.Chunk.Role == abi.RoleModel {
			if text := chunk.Chunk.Text(); text != "" {
				fmt.Fprintln(w, text)
			}
		}
		if chunk.SnapshotCreated != "" {
			snapshot = chunk.SnapshotCreated
		}
	}
	return snapshot, nil
}
