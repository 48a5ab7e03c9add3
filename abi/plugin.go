package abi

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The plugin protocol, version 1. ABI.md in this directory is its full description;
// these are its names and JSON envelopes, shared by the host and the Go SDK.

// Version is the plugin ABI version this package describes.
const Version = 1

// HostModule is the import module of Terrarium's host functions.
const HostModule = "terrarium:host/v1"

// The exports a plugin provides. Each takes its input and gives its output through the
// Extism kernel (input_load_*, output_set) and returns 0 on success; on failure it sets
// an error (error_set) holding an Error in JSON and returns 1.
const (
	ExportDescribe = "terrarium_describe"
	ExportGenerate = "terrarium_generate"
	ExportCallTool = "terrarium_call_tool"
	ExportHandle   = "terrarium_handle"
)

// The host functions a plugin may import from HostModule. Every one returns the offset
// of a result block (see ResultOK); their parameters are described in ABI.md.
const (
	FnSessionID      = "session_id"
	FnStateGet       = "state_get"
	FnStateSet       = "state_set"
	FnMessagesGet    = "messages_get"
	FnMessagesAppend = "messages_append"
	FnMessagesSet    = "messages_set"
	FnArtifactAdd    = "artifact_add"
	FnStream         = "stream"
	FnConfigGet      = "config_get"
	FnSecretGet      = "secret_get"
	FnHTTPRequest    = "http_request"
	FnHTTPRead       = "http_read"
	FnHTTPClose      = "http_close"
	FnLog            = "log"
)

// The first byte of a result block: the rest is the payload (ResultOK) or an Error in
// JSON (ResultError).
const (
	ResultOK    byte = 0
	ResultError byte = 1
)

// ErrorCode classifies an Error, so that either side can branch on it.
type ErrorCode string

// The error codes of the protocol.
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

// Error is the error envelope of the protocol, in both directions.
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

// DecodeError reads an error a plugin set. Text that is not an Error in JSON becomes
// an internal error carrying the text, so nothing a plugin says is lost.
func DecodeError(text string) *Error {
	var e Error
	if err := json.Unmarshal([]byte(text), &e); err == nil && e.Code != "" {
		return &e
	}
	return &Error{Code: CodeInternal, Message: text}
}

// AsError converts any error into the protocol's envelope, keeping an *Error as is.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// Descriptor is what terrarium_describe returns: who the plugin is, what it provides
// and what it asks for.
type Descriptor struct {
	// ABI is the protocol version the plugin speaks (Version).
	ABI         int    `json:"abi"`
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Models are registered as /model/<plugin>/<name>.
	Models []ModelDescriptor `json:"models,omitempty"`
	// Tools are registered as /tool/<plugin>/<name>.
	Tools []*ToolDefinition `json:"tools,omitempty"`
	// Handlers are registered as /handler/<plugin>/<name>.
	Handlers []HandlerDescriptor `json:"handlers,omitempty"`
	// Capabilities lists what the plugin needs; the operator's manifest grants it (or
	// not).
	Capabilities Capabilities `json:"capabilities,omitzero"`
}

// ModelDescriptor describes one model a plugin serves.
type ModelDescriptor struct {
	Name string     `json:"name"`
	Info *ModelInfo `json:"info,omitempty"`
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

// HandlerDescriptor describes one handler a plugin provides.
type HandlerDescriptor struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Points      []HookPoint `json:"points"`
}

// StateAccess is how much of the session state a plugin may touch.
type StateAccess string

// The levels of state access.
const (
	StateNone  StateAccess = "none"
	StateRead  StateAccess = "read"
	StateWrite StateAccess = "write"
)

// Allows reports whether access a covers what need requires.
func (a StateAccess) Allows(need StateAccess) bool {
	rank := map[StateAccess]int{"": 0, StateNone: 0, StateRead: 1, StateWrite: 2}
	return rank[a] >= rank[need]
}

// Capabilities are what a plugin asks for in its descriptor, and what a manifest grants.
type Capabilities struct {
	// State is the access to the session (custom state, messages, artifacts).
	State StateAccess `json:"state,omitempty"`
	// HTTP lists the hosts the plugin calls ("api.openai.com", "*.example.com").
	HTTP []string `json:"http,omitempty"`
	// Config lists the config keys the plugin reads.
	Config []string `json:"config,omitempty"`
	// Secrets lists the secrets the plugin needs injected into its HTTP headers.
	Secrets []string `json:"secrets,omitempty"`
	// StateSchema is the JSON Schema the session's custom state must satisfy for the
	// plugin: the parts it reads and writes (other parts are the app's and should be
	// allowed). The conformance suite checks the state against it after each call.
	StateSchema map[string]any `json:"stateSchema,omitempty"`
}

// GenerateInput is the input of terrarium_generate.
type GenerateInput struct {
	Model   string           `json:"model"`
	Request *GenerateRequest `json:"request"`
	// Stream says the caller listens for chunks: the model should stream them with the
	// stream host function as they arrive. Without it, chunks go nowhere.
	Stream bool `json:"stream,omitempty"`
}

// ToolInput is the input of terrarium_call_tool.
type ToolInput struct {
	Tool  string `json:"tool"`
	Input any    `json:"input"`
	// Resumed is set when a client restarted this tool after it interrupted: the
	// restart's metadata (e.g. {"approved": true}).
	Resumed map[string]any `json:"resumed,omitzero"`
}

// ToolOutput is the output of terrarium_call_tool: the tool's output, or an interrupt
// asking for outside input first.
type ToolOutput struct {
	Output    any            `json:"output,omitempty"`
	Interrupt map[string]any `json:"interrupt,omitzero"`
}

// HandlerInput is the input of terrarium_handle.
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

// Directive is the output of terrarium_handle.
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

// HTTPRequest is the first argument of http_request; the body is the second.
type HTTPRequest struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	// Headers may hold secret placeholders, {{secret:NAME}}, which the host replaces
	// with the granted secret's value; the plugin never sees the value.
	Headers map[string]string `json:"headers,omitempty"`
}

// HTTPResponse is the payload of http_request: the status and headers; the body is read
// with http_read(handle) until it returns no bytes, then closed with http_close.
type HTTPResponse struct {
	Handle  int64             `json:"handle"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
}

// LogLevel is the level of a log host function call.
type LogLevel int64

// The log levels, as log/slog numbers them.
const (
	LogDebug LogLevel = -4
	LogInfo  LogLevel = 0
	LogWarn  LogLevel = 4
	LogError LogLevel = 8
)
