package routes

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on with errors.Is. Errors of this package wrap them with
// the details: which route, step, field or variable, and what was wrong.
var (
	// ErrInvalidDefinition: a route, step, guideline or agent file is not valid (a
	// collect of a field the route's schema lacks, a transition to an unknown step, a
	// cycle with no way out...).
	ErrInvalidDefinition = errors.New("invalid definition")
	// ErrInvalidData: data extracted by the model or returned by a step's tool does not
	// match the route's schema. Nothing of it is merged.
	ErrInvalidData = errors.New("invalid route data")
	// ErrMissingVariable: a template names a variable the context does not hold.
	ErrMissingVariable = errors.New("missing template variable")
	// ErrNotCanned: in strict composition, the model's answer is not one of the canned
	// responses.
	ErrNotCanned = errors.New("answer is not a canned response")
	// ErrSessionNotFound: the persistence manager holds no session with the ID.
	ErrSessionNotFound = errors.New("session not found")
)

// DefinitionError is an invalid definition, with the path of the field at fault in a
// declarative Definition ("routes[1].steps[0].collect"), so that a loader can point at
// the line of its file that holds it. Path is empty for definitions made in code.
type DefinitionError struct {
	Path string
	Err  error
}

// Error implements error.
func (e *DefinitionError) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying error, which wraps ErrInvalidDefinition.
func (e *DefinitionError) Unwrap() error { return e.Err }

// invalid returns an error wrapping ErrInvalidDefinition.
func invalid(format string, args ...any) error {
	return fmt.Errorf("routes: %w: %s", ErrInvalidDefinition, fmt.Sprintf(format, args...))
}
