package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// TurnFlowInput is the input of a turn flow: the user's text, and the session it
// continues, if any.
type TurnFlowInput struct {
	// Text is the user's message.
	Text string `json:"text" jsonschema:"description=The user's message,minLength=1"`
	// SessionID continues that session of an agent that keeps its sessions; empty
	// starts a new one.
	SessionID string `json:"sessionId,omitempty" jsonschema:"description=The session to continue (empty: a new one)"`
}

// TurnFlowOutput is the output of a turn flow: the answer, and where the session
// stands.
type TurnFlowOutput struct {
	SessionID string `json:"sessionId"`
	// Text is the model's text over the turn.
	Text string `json:"text"`
	// FinishReason is the turn's ("interrupted": Pending waits for an answer).
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
	// Pending are the tool requests waiting for an answer.
	Pending []PendingRequest `json:"pending,omitempty"`
	// SnapshotID is the snapshot the turn ended at, if one was taken.
	SnapshotID string `json:"snapshotId,omitempty"`
}

// PendingRequest is a tool request waiting for an answer, and what its interrupt says
// (askUser's question).
type PendingRequest struct {
	Request   *abi.ToolRequest `json:"request"`
	Interrupt any              `json:"interrupt,omitempty"`
}

// NewTurnFlow returns a flow action of the same name as f that runs one turn of it, a
// new session's or a kept one's: what tools that run flows but not session flows run,
// Genkit's CLI (genkit flow:run <agent> '{"text": "..."}') and its Developer UI. It
// streams the turn's chunks, as f does, and answers with the model's text. A refused
// turn is its error.
func NewTurnFlow(f AnyFlow) agent.Runnable {
	d := f.Desc()
	desc := agent.ActionDesc{Key: agent.Key(agent.ActionTypeFlow, d.Name), Type: agent.ActionTypeFlow, Name: d.Name,
		Description: fmt.Sprintf("One turn of %s (the session flow %s): its answer's text.", d.Name, d.Key),
		InputSchema: schema.For[TurnFlowInput](), OutputSchema: schema.For[TurnFlowOutput](), StreamSchema: d.StreamSchema,
		Metadata: map[string]any{"turnOf": d.Key}}
	return &turnFlow{desc: desc, flow: f}
}

type turnFlow struct {
	desc agent.ActionDesc
	flow AnyFlow
}

func (t *turnFlow) Desc() agent.ActionDesc { return t.desc }

func (t *turnFlow) RunJSON(ctx context.Context, input json.RawMessage, cb agent.ChunkCallback) (json.RawMessage, error) {
	in, err := agent.DecodeInput[TurnFlowInput](t.desc, input)
	if err != nil {
		return nil, err
	}
	var init json.RawMessage
	if in.SessionID != "" {
		init, _ = json.Marshal(SessionFlowInit[struct{}]{SessionID: in.SessionID})
	}
	conn, err := t.flow.ConnectAny(ctx, init)
	if err != nil {
		return nil, err
	}
	defer func() {
		conn.Close()
		conn.Output()
	}()
	if err := conn.Send(&SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(in.Text)}}); err != nil {
		return nil, err
	}
	out := TurnFlowOutput{SessionID: conn.SessionID()}
	var text strings.Builder
	for c, err := range conn.Receive() {
		if err != nil {
			return nil, err
		}
		if cb != nil {
			raw, err := json.Marshal(c)
			if err != nil {
				return nil, err
			}
			if err := cb(ctx, raw); err != nil {
				return nil, err
			}
		}
		if c.SnapshotCreated != "" {
			out.SnapshotID = c.SnapshotCreated
		}
		if c.EndTurn {
			out.FinishReason = c.FinishReason
		}
		if c.Chunk == nil {
			continue
		}
		for _, p := range c.Chunk.Content {
			switch {
			case p.IsText() && c.Chunk.Role == abi.RoleModel:
				text.WriteString(p.Text)
			case p.IsToolRequest() && p.Metadata["interrupt"] != nil:
				// Whatever the chunk's role: the requests pending stream as the
				// model's or the tool's.
				out.Pending = append(out.Pending, PendingRequest{Request: p.ToolRequest, Interrupt: p.Metadata["interrupt"]})
			}
		}
	}
	out.Text = text.String()
	return json.Marshal(out)
}
