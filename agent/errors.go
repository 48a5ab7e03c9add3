package agent

import "errors"

// Sentinel errors callers branch on with errors.Is. Errors returned by this package wrap
// them with the details: which model, which tool, what was wrong.
var (
	// ErrNotFound: no action is registered under the name.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyRegistered: an action with the same key exists.
	ErrAlreadyRegistered = errors.New("already registered")
	// ErrNoModel: a generate call named no model.
	ErrNoModel = errors.New("no model given")
	// ErrUnknownTool: the model asked for a tool the call does not offer.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrInvalidToolInput: the model's input for a tool does not match the tool's schema.
	ErrInvalidToolInput = errors.New("invalid tool input")
	// ErrToolFailed: a tool returned an error.
	ErrToolFailed = errors.New("tool failed")
	// ErrMaxTurns: the model kept asking for tools past the call's turn limit.
	ErrMaxTurns = errors.New("exceeded maximum turns")
	// ErrInvalidOutput: the model's output is not valid JSON of the requested schema.
	ErrInvalidOutput = errors.New("output does not match the requested schema")
	// ErrInvalidResume: a resume names a tool request that is not pending, or restarts
	// one with other inputs than the pending request's.
	ErrInvalidResume = errors.New("invalid resume")
	// ErrInvalidInput: an action's input does not match its schema, or a turn's input
	// is not one a client may send.
	ErrInvalidInput = errors.New("invalid input")
	// ErrInvalidOption: an option has an invalid value, or a single setting is given
	// twice.
	ErrInvalidOption = errors.New("invalid option")
	// ErrInvalidConfig: the model config does not match the model's config schema.
	ErrInvalidConfig = errors.New("invalid model config")
	// ErrUnsupported: the request needs what the model says it does not support (media,
	// tools, several messages, a tool choice).
	ErrUnsupported = errors.New("unsupported by the model")
	// ErrInvalidResponse: the model's response is malformed (no message, or a message
	// or chunk with a role other than model).
	ErrInvalidResponse = errors.New("invalid model response")
)
