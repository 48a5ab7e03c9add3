package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/terrarium-ai/terrarium/abi"
)

// Session is the working state of one session flow connection: its messages, custom
// state and artifacts. It is safe for concurrent use (tools running in parallel may
// update it) and reachable from the context the flow and its tools receive, through
// SessionFromContext.
//
// Messages are immutable values once added: to change history, build new messages and
// call SetMessages. Snapshots rely on this to store only what changed.
type Session[State any] struct {
	mu    sync.RWMutex
	id    string
	state SessionState[State]
	// updates serializes read-modify-write sequences that span several calls (see
	// LockUpdates); mu protects each single access.
	updates sync.Mutex

	// Snapshot bookkeeping.
	parentID       string               // the last snapshot taken or resumed from
	prevState      *SessionState[State] // the state at parentID, for callbacks
	turnIndex      int                  // the turn now running
	changed        bool                 // state changed since parentID
	newSnapshotIDs []string
}

func newSession[State any](id string, st SessionState[State]) *Session[State] {
	return &Session[State]{id: id, state: st}
}

// NewSession returns a session outside any session flow, holding state (which may be
// nil): for running tools, handlers and plugins against a session in tests and
// tooling. Session flows make their own.
func NewSession[State any](id string, state *SessionState[State]) *Session[State] {
	var st SessionState[State]
	if state != nil {
		st = *state
	}
	return newSession(id, st)
}

// ID returns the session's identifier.
func (s *Session[State]) ID() string { return s.id }

// State returns a copy of the current state. The slices are the copy's own; the
// messages, artifacts and the values inside Custom are shared.
func (s *Session[State]) State() *SessionState[State] {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.copyState()
}

func (s *Session[State]) copyState() *SessionState[State] {
	c := s.state
	c.Messages = slices.Clone(s.state.Messages)
	c.Artifacts = slices.Clone(s.state.Artifacts)
	return &c
}

// Messages returns the conversation so far.
func (s *Session[State]) Messages() []*abi.Message {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.state.Messages)
}

// AddMessages appends messages to the conversation.
func (s *Session[State]) AddMessages(msgs ...*abi.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Messages = append(s.state.Messages, msgs...)
	s.changed = true
}

// SetMessages replaces the conversation.
func (s *Session[State]) SetMessages(msgs []*abi.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Messages = slices.Clone(msgs)
	s.changed = true
}

// Custom returns the application's state.
func (s *Session[State]) Custom() State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state.Custom
}

// SetCustom replaces the application's state.
func (s *Session[State]) SetCustom(custom State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Custom = custom
	s.changed = true
}

// UpdateCustom changes the application's state atomically: fn gets the current value
// and returns the new one, with no other update in between. Tools running concurrently
// use it instead of Custom followed by SetCustom.
func (s *Session[State]) UpdateCustom(fn func(State) State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Custom = fn(s.state.Custom)
	s.changed = true
}

// Artifacts returns the session's artifacts.
func (s *Session[State]) Artifacts() []*Artifact {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.state.Artifacts)
}

// AddArtifact records an artifact. An artifact with the same non-empty name is
// replaced, in place: a name identifies one artifact whose latest version counts.
func (s *Session[State]) AddArtifact(a *Artifact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changed = true
	if a.Name != "" {
		for i, old := range s.state.Artifacts {
			if old.Name == a.Name {
				s.state.Artifacts = slices.Clone(s.state.Artifacts)
				s.state.Artifacts[i] = a
				return
			}
		}
	}
	s.state.Artifacts = append(s.state.Artifacts, a)
}

// SetArtifacts replaces the session's artifacts.
func (s *Session[State]) SetArtifacts(artifacts ...*Artifact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Artifacts = slices.Clone(artifacts)
	s.changed = true
}

// PromptInput returns the input a DefineAgent prompt is rendered with.
func (s *Session[State]) PromptInput() any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state.PromptInput
}

// SetPromptInput replaces the prompt input.
func (s *Session[State]) SetPromptInput(in any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.PromptInput = in
	s.changed = true
}

// NewSnapshotIDs returns the IDs of the snapshots this connection created, in order.
func (s *Session[State]) NewSnapshotIDs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.newSnapshotIDs)
}

// TurnIndex returns the number of the turn now running, counted from 0 over the whole
// session (a resumed session continues its count).
func (s *Session[State]) TurnIndex() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.turnIndex
}

type sessionKey struct{}

// NewSessionContext returns a context carrying the session, for tools and handlers.
func NewSessionContext[State any](ctx context.Context, s *Session[State]) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionFromContext returns the session in ctx, or nil if ctx carries none or one of
// another State type.
func SessionFromContext[State any](ctx context.Context) *Session[State] {
	s, _ := ctx.Value(sessionKey{}).(*Session[State])
	return s
}

// AnySession is the view of a session for code that does not know its State type:
// plugins and handlers, which exchange the custom state as JSON.
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
	AddArtifact(a *Artifact)
	TurnIndex() int
	// LockUpdates serializes read-modify-write sequences made of several calls: the
	// holder is the only one in its sequence until it calls unlock. The plugin host
	// holds it for the whole call of a plugin that may write the state.
	LockUpdates() (unlock func())
}

var _ AnySession = (*Session[struct{}])(nil)

// CustomJSON implements AnySession.
func (s *Session[State]) CustomJSON() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return json.Marshal(s.state.Custom)
}

// SetCustomJSON implements AnySession.
func (s *Session[State]) SetCustomJSON(data []byte) error {
	var v State
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("agent: the state does not decode into %T: %w", v, err)
	}
	if dec.More() {
		return fmt.Errorf("agent: the state holds more than one JSON value")
	}
	s.SetCustom(v)
	return nil
}

// LockUpdates implements AnySession.
func (s *Session[State]) LockUpdates() (unlock func()) {
	s.updates.Lock()
	return s.updates.Unlock
}

// AnySessionFromContext returns the session in ctx whatever its State type, or nil.
func AnySessionFromContext(ctx context.Context) AnySession {
	s, _ := ctx.Value(sessionKey{}).(AnySession)
	return s
}
