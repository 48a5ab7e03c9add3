package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/terrarium-ai/terrarium/abi"
)

// Handler is called at points of a turn (abi.HookTurnStart, HookBeforeGenerate,
// HookAfterGenerate, HookTurnEnd) to read and change the session, and answers with a
// directive: continue, reply with a text and end the turn, or halt the session. Native
// Go handlers (NewHandler) and handlers served by plugins implement it alike; they reach
// the session through the context (SessionFromContext, AnySessionFromContext).
type Handler interface {
	Action
	Name() string
	// Points lists the points the handler runs at.
	Points() []abi.HookPoint
	// Handle runs the handler. A nil directive means continue.
	Handle(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error)
}

// HandlerFunc is the body of a handler defined in Go.
type HandlerFunc func(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error)

type funcHandler struct {
	name, description string
	points            []abi.HookPoint
	fn                HandlerFunc
}

// NewHandler returns a handler backed by a Go function, without registering it. It
// panics if a point is not one of the four lifecycle points.
func NewHandler(name, description string, fn HandlerFunc, points ...abi.HookPoint) Handler {
	for _, p := range points {
		if !p.Valid() {
			panic(fmt.Sprintf("agent: handler %q: unknown hook point %q", name, p))
		}
	}
	return &funcHandler{name: name, description: description, points: points, fn: fn}
}

// DefineHandler creates a handler backed by a Go function and registers it. It panics
// if the name is taken.
func DefineHandler(r *Registry, name, description string, fn HandlerFunc, points ...abi.HookPoint) Handler {
	h := NewHandler(name, description, fn, points...)
	r.MustRegister(h)
	return h
}

func (h *funcHandler) Name() string            { return h.name }
func (h *funcHandler) Points() []abi.HookPoint { return h.points }
func (h *funcHandler) Desc() ActionDesc        { return HandlerDesc(h.name, h.description, h.points) }

func (h *funcHandler) Handle(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error) {
	return h.fn(ctx, in)
}

// HandlerDesc is the registry description of a handler.
func HandlerDesc(name, description string, points []abi.HookPoint) ActionDesc {
	return ActionDesc{
		Key:         Key(ActionTypeHandler, name),
		Type:        ActionTypeHandler,
		Name:        name,
		Description: description,
		Metadata:    map[string]any{"points": points},
	}
}

// RunHandlers runs, in order, the handlers that listen at in.Point, and returns the
// first directive that is not continue (the remaining handlers do not run), or a
// continue directive. A handler's error, panic or invalid directive is returned as an
// *ActionError naming it.
// DefineAgent calls it at each point; a SessionFlow written by hand may call it too.
func RunHandlers(ctx context.Context, handlers []Handler, in *abi.HandlerInput) (*abi.Directive, error) {
	for _, h := range handlers {
		if !slices.Contains(h.Points(), in.Point) {
			continue
		}
		d, err := handle(ctx, h, in)
		if err != nil {
			return nil, &ActionError{Type: ActionTypeHandler, Name: h.Name(), Err: fmt.Errorf("agent: handler %q at %s: %w", h.Name(), in.Point, err)}
		}
		if d == nil {
			continue
		}
		if d.Action != abi.DirectiveContinue {
			return d, nil
		}
	}
	return &abi.Directive{Action: abi.DirectiveContinue}, nil
}

// handle runs one handler, its panic recovered, and checks its directive.
func handle(ctx context.Context, h Handler, in *abi.HandlerInput) (d *abi.Directive, err error) {
	defer func() {
		if v := recover(); v != nil {
			d, err = nil, Recovered(ctx, v, "handler", h.Name())
		}
	}()
	hin := *in
	hin.Handler = h.Name()
	if d, err = h.Handle(ctx, &hin); err != nil || d == nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}
