package agent

import (
	"context"

	"github.com/terrarium-ai/terrarium/abi"
)

// GenerateFunc runs a whole generate call (the tool loop included) from its
// serializable form.
type GenerateFunc = func(ctx context.Context, opts *abi.GenerateActionOptions) (*abi.GenerateResponse, error)

// ToolFunc runs one tool call with its JSON-decoded input.
type ToolFunc = func(ctx context.Context, input any) (any, error)

// Middleware wraps the three layers of a generate call; a nil field leaves its layer
// alone. Retries, fallbacks, logging and tracing live here. The messages a middleware
// is given (GenerateActionOptions.Messages, GenerateRequest.Messages) may be the
// caller's, shared rather than copied: change them by setting a new slice, never by
// writing into the one given.
type Middleware struct {
	// Generate wraps the whole call, once per call.
	Generate func(next GenerateFunc) GenerateFunc
	// Model wraps each call of a model, which it is given.
	Model func(m Model, next ModelFunc) ModelFunc
	// Tool wraps each call of a tool, which it is given.
	Tool func(t Tool, next ToolFunc) ToolFunc
}

func wrapGenerate(mw []Middleware, fn GenerateFunc) GenerateFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i].Generate != nil {
			fn = mw[i].Generate(fn)
		}
	}
	return fn
}

func wrapModel(mw []Middleware, m Model, fn ModelFunc) ModelFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i].Model != nil {
			fn = mw[i].Model(m, fn)
		}
	}
	return fn
}

func wrapTool(mw []Middleware, t Tool, fn ToolFunc) ToolFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i].Tool != nil {
			fn = mw[i].Tool(t, fn)
		}
	}
	return fn
}

type middlewareModel struct {
	Model
	mw []Middleware
}

// WrapModel returns m with model middleware applied to every call, wherever the model
// is used: this is how a model gets retries or backups of its own. Only the Model field
// of each middleware is used.
func WrapModel(m Model, mw ...Middleware) Model {
	return &middlewareModel{Model: m, mw: mw}
}

func (w *middlewareModel) Generate(ctx context.Context, req *abi.GenerateRequest, cb ModelStreamCallback) (*abi.GenerateResponse, error) {
	return wrapModel(w.mw, w.Model, w.Model.Generate)(ctx, req, cb)
}
