package abi

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrorCode classifies an Error, so that either side can branch on it.
type ErrorCode string

// The error codes.
const (
	// CodeInvalidInput: the input is malformed or does not match a schema.
	CodeInvalidInput ErrorCode = "invalid_input"
	// CodeNotFound: no model, tool or handler of that name, or no such HTTP handle.
	CodeNotFound ErrorCode = "not_found"
	// CodePermissionDenied: the plugin's manifest does not grant what the call needs.
	CodePermissionDenied ErrorCode = "permission_denied"
	// CodeNoSession: the call is not bound to a session (e.g. a tool run by Generate
	// outside any session flow).
	CodeNoSession ErrorCode = "no_session"
	// CodeLimitExceeded: a size, count or time limit was hit.
	CodeLimitExceeded ErrorCode = "limit_exceeded"
	// CodeUnavailable: a remote service failed or could not be reached.
	CodeUnavailable ErrorCode = "unavailable"
	// CodeInternal: anything else.
	CodeInternal ErrorCode = "internal"
)

// Error is the error envelope every side uses: plugins and the host in both directions,
// models and tools towards the generate loop, the server towards its clients.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	// Status is the HTTP status behind an error from a remote API, when there is one.
	Status int `json:"status,omitempty"`
	// RetryAfter is the delay in seconds a remote API asked for (429, 503).
	RetryAfter float64 `json:"retryAfter,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError converts any error into the protocol's envelope, keeping an *Error as is.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// HookPoint is a moment in a turn where handlers run.
type HookPoint string

// The lifecycle points of a turn.
const (
	// HookTurnStart: the turn's input was added to the session, nothing generated yet.
	HookTurnStart HookPoint = "turnStart"
	// HookBeforeGenerate: the request is about to go to the model.
	HookBeforeGenerate HookPoint = "beforeGenerate"
	// HookAfterGenerate: the model answered (tools included); the answer is in the session.
	HookAfterGenerate HookPoint = "afterGenerate"
	// HookTurnEnd: the turn is about to end (and be snapshotted).
	HookTurnEnd HookPoint = "turnEnd"
)

// Valid reports whether p is one of the four points.
func (p HookPoint) Valid() bool {
	switch p {
	case HookTurnStart, HookBeforeGenerate, HookAfterGenerate, HookTurnEnd:
		return true
	}
	return false
}

// HandlerInput is what a handler is called with at a point of a turn (the input of
// a plugin's terrarium_handle).
type HandlerInput struct {
	Handler string    `json:"handler"`
	Point   HookPoint `json:"point"`
	// Turn is the turn's index in the session.
	Turn int `json:"turn"`
	// Input is the turn's input messages (all points).
	Input []*Message `json:"input,omitempty"`
	// Response is the model's answer (afterGenerate and turnEnd, when there is one).
	Response *GenerateResponse `json:"response,omitempty"`
}

// UnmarshalJSON decodes a handler's input, refusing a null message.
func (in *HandlerInput) UnmarshalJSON(b []byte) error {
	type plain HandlerInput
	if err := json.Unmarshal(b, (*plain)(in)); err != nil {
		return err
	}
	return NoNulls("input", in.Input)
}

// DirectiveAction is what a handler tells the turn to do next.
type DirectiveAction string

// The directive actions.
const (
	// DirectiveContinue: go on with the turn.
	DirectiveContinue DirectiveAction = "continue"
	// DirectiveReply: answer with Text as the model's message and end the turn.
	DirectiveReply DirectiveAction = "reply"
	// DirectiveHalt: end the turn and the session; Reason says why.
	DirectiveHalt DirectiveAction = "halt"
)

// Directive is a handler's answer (the output of a plugin's terrarium_handle).
type Directive struct {
	Action DirectiveAction `json:"action"`
	Text   string          `json:"text,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// Validate reports whether d is a directive the host can follow.
func (d *Directive) Validate() error {
	switch d.Action {
	case DirectiveContinue, DirectiveHalt:
		return nil
	case DirectiveReply:
		if d.Text == "" {
			return fmt.Errorf("abi: a reply directive needs a text")
		}
		return nil
	}
	return fmt.Errorf("abi: unknown directive action %q (want continue, reply or halt)", d.Action)
}
