package agent

import (
	"context"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// NewClientTool returns a tool that the caller of a generate call runs, not the call:
// the model sees def, and calling it interrupts the generation with the request
// (metadata {"clientTool": true}) for the caller to answer with WithToolResponses, as
// an interrupt is answered. It is how an agent offers the tools its client brings. It
// fails, wrapping ErrInvalidOption, on a definition without a name or with an input
// schema that is not a valid JSON Schema.
func NewClientTool(def *abi.ToolDefinition) (Tool, error) {
	if def == nil || def.Name == "" {
		return nil, fmt.Errorf("agent: %w: a client tool needs a name", ErrInvalidOption)
	}
	if def.InputSchema != nil {
		if _, err := schema.Compile(def.InputSchema); err != nil {
			return nil, fmt.Errorf("agent: %w: client tool %q: its input schema: %w", ErrInvalidOption, def.Name, err)
		}
	}
	return clientTool{def}, nil
}

type clientTool struct{ def *abi.ToolDefinition }

func (t clientTool) Name() string                    { return t.def.Name }
func (t clientTool) Definition() *abi.ToolDefinition { return t.def }
func (t clientTool) Desc() ActionDesc                { return ToolDesc(t.def) }

func (t clientTool) Run(context.Context, any) (any, error) {
	return nil, Interrupt(map[string]any{"clientTool": true})
}
