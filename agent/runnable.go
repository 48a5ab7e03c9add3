package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// AsRunnable returns a view of an action that runs from JSON, as Genkit's reflection
// API runs actions, or false when the action cannot run on its own (a handler needs a
// session, a prompt is rendered by its users):
//
//   - a Runnable, as it is;
//   - a Model: input GenerateRequest, chunks GenerateResponseChunk, output
//     GenerateResponse (one model call: no tool loop, no output parsing);
//   - a Tool: input checked against the tool's input schema, output the tool's.
//
// Models and tools served by plugins run alike.
func AsRunnable(a Action) (Runnable, bool) {
	switch a := a.(type) {
	case Runnable:
		return a, true
	case Model:
		return runnableModel{a}, true
	case Tool:
		return runnableTool{a}, true
	}
	return nil, false
}

type runnableModel struct{ Model }

func (m runnableModel) RunJSON(ctx context.Context, input json.RawMessage, cb ChunkCallback) (json.RawMessage, error) {
	req, err := DecodeInput[*abi.GenerateRequest](m.Desc(), input)
	if err != nil {
		return nil, err
	}
	if req == nil {
		return nil, fmt.Errorf("agent: model %s: %w: a request is required", m.Name(), ErrInvalidInput)
	}
	var stream ModelStreamCallback
	if cb != nil {
		stream = func(ctx context.Context, c *abi.GenerateResponseChunk) error {
			b, err := json.Marshal(c)
			if err != nil {
				return fmt.Errorf("agent: encoding a chunk of model %s: %w", m.Name(), err)
			}
			return cb(ctx, b)
		}
	}
	resp, err := m.Generate(ctx, req, stream)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}

type runnableTool struct{ Tool }

func (t runnableTool) RunJSON(ctx context.Context, input json.RawMessage, _ ChunkCallback) (json.RawMessage, error) {
	def := t.Definition()
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if def.InputSchema != nil {
		v, err := schema.Compile(def.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("agent: tool %s has an invalid input schema: %w", def.Name, err)
		}
		if err := v.ValidateJSON(input); err != nil {
			return nil, fmt.Errorf("agent: tool %s: %w: %v", def.Name, ErrInvalidToolInput, err)
		}
	}
	var in any
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("agent: tool %s: %w: %v", def.Name, ErrInvalidToolInput, err)
	}
	out, err := t.Run(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %s: %w", def.Name, err)
	}
	if mp, ok := out.(*MultipartToolResponse); ok {
		return json.Marshal(mp)
	}
	return json.Marshal(out)
}
