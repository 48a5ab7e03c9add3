package agent

import (
	"context"
	"encoding/json"
	"fmt"
)

// StatusFunc receives status reports from tools and handlers running inside a session
// flow, as JSON. Session flows install one that decodes the report into the flow's
// Stream type and streams it (Responder.SendStatus).
type StatusFunc func(ctx context.Context, status json.RawMessage) error

type statusKey struct{}

// WithStatusFunc returns a context whose status reports go to fn.
func WithStatusFunc(ctx context.Context, fn StatusFunc) context.Context {
	return context.WithValue(ctx, statusKey{}, fn)
}

// ReportStatus streams a status report from a tool or handler to the client of the
// session flow it runs in. Outside a session flow the report goes nowhere and nil is
// returned: status is informative, never required.
func ReportStatus(ctx context.Context, status any) error {
	fn, _ := ctx.Value(statusKey{}).(StatusFunc)
	if fn == nil {
		return nil
	}
	raw, ok := status.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(status); err != nil {
			return fmt.Errorf("agent: encoding a status report: %w", err)
		}
	}
	return fn(ctx, raw)
}
