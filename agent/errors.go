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
	// ErrInvalidResume: a resume names a tool request that is not pending.
	ErrInvalidResume = errors.New("invalid resume")
)
