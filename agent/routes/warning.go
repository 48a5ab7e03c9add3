package routes

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Warning is a fault a turn absorbed instead of failing: what a real model got wrong
// (a field of the wrong type, prose instead of JSON) or what the definition left out
// (a template variable the context lacks). The turn goes on without the part at
// fault; its Response lists the warnings, and each is an event ("routes.warning") of
// the turn's trace span. An agent made WithStrict fails such turns instead.
type Warning struct {
	Code WarningCode `json:"code"`
	// Route, Step and Field say where, when it applies.
	Route string `json:"route,omitempty"`
	Step  string `json:"step,omitempty"`
	Field string `json:"field,omitempty"`
	// Message says what was wrong and what the turn did instead.
	Message string `json:"message"`
}

// WarningCode says what kind of fault a Warning is, for callers that branch on it.
type WarningCode string

// The warning codes.
const (
	// WarnInvalidField: a field the model gave fails the route's schema; it was
	// dropped, the other fields of the answer kept.
	WarnInvalidField WarningCode = "invalid_field"
	// WarnNoJSON: a structured answer held no JSON: its text is the message, and
	// nothing was collected from it.
	WarnNoJSON WarningCode = "no_json"
	// WarnNoMessage: a structured answer held no message; a second call wrote one.
	WarnNoMessage WarningCode = "no_message"
	// WarnRouting: the routing or step-choice answer could not be used as a whole (no
	// JSON, a score or step of the wrong type): the conversation kept its route, or
	// took the first step it could.
	WarnRouting WarningCode = "routing"
	// WarnNotCanned: in canned-fluid composition, the answer named a canned response
	// that does not exist; its message was used instead.
	WarnNotCanned WarningCode = "not_canned"
	// WarnMissingVariables: templates named variables the context lacks; they
	// rendered as nothing. One warning a turn names them all.
	WarnMissingVariables WarningCode = "missing_variables"
	// WarnNextRoute: a route's OnCompleteFunc chose a route the agent does not have;
	// the conversation goes on as if it had chosen none.
	WarnNextRoute WarningCode = "next_route"
)

// warn records a warning in the turn's result and as an event of its span.
func (t *turn) warn(w Warning) {
	t.warnings = append(t.warnings, w)
	t.span.AddEvent("routes.warning", trace.WithAttributes(
		attribute.String("code", string(w.Code)),
		attribute.String("route", w.Route),
		attribute.String("step", w.Step),
		attribute.String("field", w.Field),
		attribute.String("message", w.Message),
	))
}
