package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/terrarium-ai/terrarium/internal/schema"
)

// ChunkCallback receives the chunks a running action streams, as JSON.
type ChunkCallback = func(ctx context.Context, chunk json.RawMessage) error

// Runnable is an action that runs from its JSON input, as Genkit's reflection API and
// Terrarium's server run actions. cb, when not nil, receives what the action streams.
type Runnable interface {
	Action
	RunJSON(ctx context.Context, input json.RawMessage, cb ChunkCallback) (json.RawMessage, error)
}

type funcAction[In, Out any] struct {
	desc ActionDesc
	fn   func(context.Context, In) (Out, error)
}

// NewAction returns an action of type t backed by a Go function, without registering
// it; its input and output schemas are inferred from In and Out. RunJSON checks the
// input against the schema before decoding it.
func NewAction[In, Out any](t ActionType, name, description string, fn func(ctx context.Context, input In) (Out, error)) Runnable {
	return &funcAction[In, Out]{
		desc: ActionDesc{Key: Key(t, name), Type: t, Name: name, Description: description,
			InputSchema: schema.For[In](), OutputSchema: schema.For[Out]()},
		fn: fn,
	}
}

func (a *funcAction[In, Out]) Desc() ActionDesc { return a.desc }

func (a *funcAction[In, Out]) RunJSON(ctx context.Context, input json.RawMessage, _ ChunkCallback) (json.RawMessage, error) {
	in, err := DecodeInput[In](a.desc, input)
	if err != nil {
		return nil, err
	}
	out, err := a.fn(ctx, in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// DecodeInput decodes an action's JSON input into In after checking it against the
// action's input schema; an empty input is In's zero value. Errors wrap
// ErrInvalidInput and name the action.
func DecodeInput[In any](d ActionDesc, input json.RawMessage) (In, error) {
	var in In
	if len(input) == 0 || string(input) == "null" {
		return in, nil
	}
	if d.InputSchema != nil {
		v, err := schema.Compile(d.InputSchema)
		if err != nil {
			return in, fmt.Errorf("agent: action %s has an invalid input schema: %w", d.Key, err)
		}
		if err := v.ValidateJSON(input); err != nil {
			return in, fmt.Errorf("agent: action %s: %w: %v", d.Key, ErrInvalidInput, err)
		}
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return in, fmt.Errorf("agent: action %s: %w: %v", d.Key, ErrInvalidInput, err)
	}
	return in, nil
}
