package agent

import (
	"context"

	"github.com/terrarium-ai/terrarium/abi"
)

// AnySession is the session a tool, a handler or a plugin works on, seen without its
// State type: the custom state is exchanged as JSON. Sessions of package agent/session
// implement it; tools reach the one they run in with AnySessionFromContext.
type AnySession interface {
	ID() string
	// CustomJSON returns the custom state as JSON.
	CustomJSON() ([]byte, error)
	// SetCustomJSON replaces the custom state with JSON that must decode into the
	// session's State type without unknown fields; otherwise the state is unchanged.
	SetCustomJSON(data []byte) error
	Messages() []*abi.Message
	AddMessages(msgs ...*abi.Message)
	SetMessages(msgs []*abi.Message)
	AddArtifact(a *abi.Artifact)
	TurnIndex() int
	// LockUpdates serializes read-modify-write sequences made of several calls: the
	// holder is the only one in its sequence until it calls unlock. The plugin host
	// holds it for the whole call of a plugin that may write the state.
	LockUpdates() (unlock func())
}

type sessionKey struct{}

// NewSessionContext returns a context carrying the session, for the tools and handlers
// that run in it.
func NewSessionContext(ctx context.Context, s AnySession) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// AnySessionFromContext returns the session in ctx, or nil.
func AnySessionFromContext(ctx context.Context) AnySession {
	s, _ := ctx.Value(sessionKey{}).(AnySession)
	return s
}
