package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/terrarium-ai/terrarium/abi"
)

// ActionError is the failure of one action a generate call or a turn ran: a model, a
// tool or a handler, by the name the registry and the model know it by (a plugin's
// are "<plugin>/<name>"). Generate and RunHandlers wrap their actions' failures in one,
// so that a caller can say which action failed (errors.As finds the outermost: the
// action the call itself ran); its text is the wrapped error's.
type ActionError struct {
	Type ActionType
	Name string
	Err  error
}

// Error implements error.
func (e *ActionError) Error() string { return e.Err.Error() }

// Unwrap returns the action's error.
func (e *ActionError) Unwrap() error { return e.Err }

// PanicError is a panic recovered where an action or a session flow ran, turned into
// the failure of that call or turn so that it ends that, not the process.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Recovered makes the value a deferred recover returned into a *PanicError, logging
// it once, with its stack, at error level with the attributes given (what panicked).
// Its callers report the error, without the stack, as the failure of what panicked:
//
//	defer func() {
//		if v := recover(); v != nil {
//			err = agent.Recovered(ctx, v, "tool", name)
//		}
//	}()
func Recovered(ctx context.Context, v any, attrs ...any) *PanicError {
	e := &PanicError{Value: v, Stack: debug.Stack()}
	slog.ErrorContext(ctx, "agent: recovered a panic", append(attrs, "panic", fmt.Sprint(v), "stack", string(e.Stack))...)
	return e
}

// AsError puts err in the error envelope with the code its cause deserves: the code an
// action reported itself (a plugin's *abi.Error, a provider's HTTP error, with its
// message, status and Retry-After) wherever it is in the chain; invalid_input for an
// input that broke a schema (a tool's input from the model); not_found for an unknown
// tool or action; limit_exceeded for a deadline or the turn limit; internal for a
// panic and anything else. Turn failures, MCP's tool errors and the tool errors handed
// to a model are classified by it.
func AsError(err error) *abi.Error {
	var pe *PanicError
	var e *abi.Error
	code := abi.CodeInternal
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &e):
		c := *e
		return &c
	case errors.Is(err, ErrInvalidToolInput), errors.Is(err, ErrInvalidInput):
		code = abi.CodeInvalidInput
	case errors.Is(err, ErrUnknownTool), errors.Is(err, ErrNotFound):
		code = abi.CodeNotFound
	case errors.Is(err, ErrMaxTurns), errors.Is(err, context.DeadlineExceeded):
		code = abi.CodeLimitExceeded
	}
	return &abi.Error{Code: code, Message: err.Error()}
}
