package agent

import (
	"context"

	"github.com/terrarium-ai/terrarium/abi"
)

// UsageFunc receives what one model call used, as its model reported it.
type UsageFunc func(ctx context.Context, usage *abi.GenerationUsage)

type usageKey struct{}

// WithUsageFunc returns a context whose generate calls hand fn the usage of each of
// their model calls that reports one, the calls a tool makes in turn included. Session
// flows install one that sums a turn's usage onto its EndTurn chunk.
func WithUsageFunc(ctx context.Context, fn UsageFunc) context.Context {
	return context.WithValue(ctx, usageKey{}, fn)
}

// reportUsage hands a model call's usage to the context's UsageFunc, if any.
func reportUsage(ctx context.Context, u *abi.GenerationUsage) {
	if fn, _ := ctx.Value(usageKey{}).(UsageFunc); fn != nil && u != nil {
		fn(ctx, u)
	}
}
