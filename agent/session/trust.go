package session

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// checkInput refuses a turn's input that would let a client speak for the model or for
// a tool in a session the server keeps the history of: its messages are the user's,
// without tool requests or responses (those reach a session only from the model and the
// tools it ran), and a restart of an interrupted tool request must carry the very input
// the model gave it in that history, so the tool never runs with an input the model did
// not ask for.
func checkInput(in *SessionFlowInput, history []*abi.Message) error {
	if len(in.Messages) == 0 && in.Resume == nil {
		return fmt.Errorf("session: %w: a turn needs messages or a resume", agent.ErrInvalidInput)
	}
	if len(in.Messages) > 0 && in.Resume != nil {
		return fmt.Errorf("session: %w: a resume answers the pending tool requests and carries no messages", agent.ErrInvalidInput)
	}
	for i, m := range in.Messages {
		if m == nil {
			// Decoding refuses it; a flow fed by Go code checks it here.
			return fmt.Errorf("session: %w: messages[%d] is null", agent.ErrInvalidInput, i)
		}
		if m.Role != abi.RoleUser {
			return fmt.Errorf("session: %w: an input message must have role user, not %q", agent.ErrInvalidInput, m.Role)
		}
		for _, p := range m.Content {
			if p.IsToolRequest() || p.IsToolResponse() {
				return fmt.Errorf("session: %w: an input message holds a %s part; answer tool requests with a resume", agent.ErrInvalidInput, p.Kind)
			}
		}
	}
	if in.Resume == nil {
		return nil
	}
	pending := PendingToolRequests(history)
	find := func(name, ref string) *abi.ToolRequest {
		for _, q := range pending {
			if q.ToolRequest.Name == name && q.ToolRequest.Ref == ref {
				return q.ToolRequest
			}
		}
		return nil
	}
	// Checked before the turn's handlers run, so a refused resume changes nothing.
	for _, p := range in.Resume.Respond {
		if p.IsToolResponse() && find(p.ToolResponse.Name, p.ToolResponse.Ref) == nil {
			return fmt.Errorf("session: %w: the response to tool request %q (ref %q) answers nothing pending", agent.ErrInvalidResume, p.ToolResponse.Name, p.ToolResponse.Ref)
		}
	}
	for _, p := range in.Resume.Restart {
		if !p.IsToolRequest() {
			continue // Generate refuses it, naming what it is
		}
		q := find(p.ToolRequest.Name, p.ToolRequest.Ref)
		if q == nil {
			return fmt.Errorf("session: %w: the restart of tool request %q (ref %q) restarts nothing pending", agent.ErrInvalidResume, p.ToolRequest.Name, p.ToolRequest.Ref)
		}
		if !sameJSON(q.Input, p.ToolRequest.Input) {
			return fmt.Errorf("session: %w: the restart of tool request %q (ref %q) has modified inputs: a restart runs the tool with the input the model gave it", agent.ErrInvalidResume, p.ToolRequest.Name, p.ToolRequest.Ref)
		}
	}
	return nil
}

// sameJSON reports whether a and b encode to the same JSON value, whatever Go types
// hold them (a decoded snapshot holds map[string]any where a live session may hold a
// struct).
func sameJSON(a, b any) bool {
	norm := func(v any) (any, bool) {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		var out any
		return out, json.Unmarshal(raw, &out) == nil
	}
	x, ok1 := norm(a)
	y, ok2 := norm(b)
	return ok1 && ok2 && reflect.DeepEqual(x, y)
}
