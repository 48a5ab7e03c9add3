package agent

import (
	"context"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
)

const interruptedMessage = "a tool is waiting for a response; resume with WithToolResponses or WithToolRestarts"

// resume answers the interrupted tool requests at the end of *msgs. On success it
// replaces the model message with one whose interrupts are marked resolved and appends
// the tool message, so the loop can call the model again. If a restarted tool
// interrupts again, it returns the response to hand back instead. Nothing is run and
// *msgs is untouched unless every pending request is answered exactly once by a part
// matching its name and ref.
func (c *call) resume(ctx context.Context, model Model, r *abi.Resume, msgs *[]*abi.Message) (*abi.GenerateResponse, error) {
	h := *msgs
	if len(h) == 0 {
		return nil, fmt.Errorf("agent: %w: there is no conversation to resume", ErrInvalidResume)
	}
	last := h[len(h)-1]
	if last.Role != abi.RoleModel || len(last.ToolRequests()) == 0 {
		return nil, fmt.Errorf("agent: %w: the conversation ends with a %s message, not a model message with tool requests: nothing is waiting", ErrInvalidResume, last.Role)
	}
	waiting := map[int]bool{}
	for i, p := range last.Content {
		if !p.IsToolRequest() {
			continue
		}
		_, isInterrupt := p.Metadata["interrupt"]
		_, hasOutput := p.Metadata["pendingOutput"]
		switch {
		case isInterrupt:
			waiting[i] = true
		case !hasOutput:
			return nil, fmt.Errorf("agent: %w: tool request %s has neither a result nor an interrupt: the conversation was not interrupted", ErrInvalidResume, describeRequest(p.ToolRequest))
		}
	}
	if len(waiting) == 0 {
		return nil, fmt.Errorf("agent: %w: no tool request is waiting (already answered?)", ErrInvalidResume)
	}
	responded := map[int]*abi.Part{}
	restarted := map[int]*abi.Part{}
	match := func(verb, name, ref string) (int, error) {
		for i := range waiting {
			tr := last.Content[i].ToolRequest
			if tr.Name != name || tr.Ref != ref {
				continue
			}
			if responded[i] != nil || restarted[i] != nil {
				return 0, fmt.Errorf("agent: %w: tool request %s is answered twice", ErrInvalidResume, describeRequest(tr))
			}
			return i, nil
		}
		return 0, fmt.Errorf("agent: %w: %s names tool request %s, which is not waiting for an answer", ErrInvalidResume, verb, describeRequest(&abi.ToolRequest{Name: name, Ref: ref}))
	}
	for _, p := range r.Respond {
		if !p.IsToolResponse() {
			return nil, fmt.Errorf("agent: %w: a response must be a tool response part, got a %s part", ErrInvalidResume, p.Kind)
		}
		i, err := match("a response", p.ToolResponse.Name, p.ToolResponse.Ref)
		if err != nil {
			return nil, err
		}
		responded[i] = p
	}
	for _, p := range r.Restart {
		if !p.IsToolRequest() {
			return nil, fmt.Errorf("agent: %w: a restart must be a tool request part, got a %s part", ErrInvalidResume, p.Kind)
		}
		i, err := match("a restart", p.ToolRequest.Name, p.ToolRequest.Ref)
		if err != nil {
			return nil, err
		}
		restarted[i] = p
	}
	for i := range waiting {
		if responded[i] == nil && restarted[i] == nil {
			return nil, fmt.Errorf("agent: %w: tool request %s is still waiting: respond to it or restart it", ErrInvalidResume, describeRequest(last.Content[i].ToolRequest))
		}
	}

	calls := map[int]toolCall{}
	for i, p := range restarted {
		md, _ := p.Metadata["resumed"].(map[string]any)
		if md == nil {
			md = map[string]any{}
		}
		calls[i] = toolCall{req: p.ToolRequest, resumed: md}
	}
	results, err := c.runTools(ctx, model, calls)
	if err != nil {
		return nil, err
	}
	// Everything answered so far becomes a result; interrupts stay only where a
	// restarted tool interrupted again.
	for i, p := range last.Content {
		if !p.IsToolRequest() || results[i] != nil {
			continue
		}
		if rp := responded[i]; rp != nil {
			results[i] = &toolResult{output: rp.ToolResponse.Output}
		} else if out, ok := p.Metadata["pendingOutput"]; ok {
			results[i] = &toolResult{output: out}
		}
	}
	if interrupted(results) {
		return &abi.GenerateResponse{
			Message:       markInterrupted(last, results),
			FinishReason:  abi.FinishInterrupted,
			FinishMessage: interruptedMessage,
			Request:       &abi.GenerateRequest{Messages: h[:len(h)-1]},
		}, nil
	}
	resolved := last.Clone()
	var parts []*abi.Part
	for i, p := range resolved.Content {
		if !p.IsToolRequest() {
			continue
		}
		if md, ok := p.Metadata["interrupt"]; ok {
			p.Metadata["resolvedInterrupt"] = md
		}
		delete(p.Metadata, "interrupt")
		delete(p.Metadata, "pendingOutput")
		if len(p.Metadata) == 0 {
			p.Metadata = nil
		}
		if rp := responded[i]; rp != nil {
			// Keep the client's content and metadata, marked as a client answer.
			c := rp.Clone()
			if c.Metadata == nil {
				c.Metadata = map[string]any{}
			}
			c.Metadata["interruptResponse"] = true
			parts = append(parts, c)
			continue
		}
		parts = append(parts, responsePart(p.ToolRequest, results[i]))
	}
	toolMsg := abi.NewMessage(abi.RoleTool, parts...)
	out := append(append([]*abi.Message(nil), h[:len(h)-1]...), resolved, toolMsg)
	*msgs = out
	return nil, nil
}

func describeRequest(tr *abi.ToolRequest) string {
	if tr.Ref == "" {
		return fmt.Sprintf("%q", tr.Name)
	}
	return fmt.Sprintf("%q (ref %q)", tr.Name, tr.Ref)
}
