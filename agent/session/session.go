package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// Session is the working state of one session flow connection: its messages, custom
// state and artifacts. It is safe for concurrent use (tools running in parallel may
// update it) and reachable from the context the flow and its tools receive, through
// FromContext (or agent.AnySessionFromContext, without the State type).
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

	// onCustom is called after each change of the custom state: it marks the state
	// changed, for the customPatch chunk streamed at the next chunk (customPatcher).
	onCustom func()

	// snapMu is held while a snapshot is saved, so that a detach writes its pending
	// snapshot after any save in flight; detached then suspends the saves of turns.
	snapMu   sync.Mutex
	detached bool

	// turn is the state the running turn began in, nil between turns: what a failed
	// turn goes back to.
	turn *turnBase[State]

	// Snapshot bookkeeping.
	parentID       string               // the last snapshot taken or resumed from
	branch         bool                 // the next snapshot starts a new line from parentID
	prevState      *SessionState[State] // the state at parentID, for callbacks
	turnIndex      int                  // the turn now running
	changed        bool                 // state changed since parentID
	newSnapshotIDs []string
}

// turnBase is the state a turn began in.
type turnBase[State any] struct {
	// state shares the session's slices, which are never written in place (appends go
	// past the base's length, replacements copy first), so keeping it costs nothing
	// however long the conversation; Custom is shared until the turn changes it.
	state   SessionState[State]
	changed bool
	// custom is the JSON of the custom state before the turn first changed it (nil
	// while it has not): a change may have been made in place, in maps or slices the
	// base's Custom shares. It is in a scratch buffer, given back when the turn ends.
	custom []byte
	buf    *scratch
}

// release gives the turn's scratch buffer back.
func (t *turnBase[State]) release() {
	if t.buf != nil {
		t.buf.put()
		t.buf, t.custom = nil, nil
	}
}

func newSession[State any](id string, st SessionState[State]) *Session[State] {
	st.SessionID = id
	return &Session[State]{id: id, state: st}
}

// New returns a session outside any session flow, holding state (which may be nil):
// for running tools, handlers and plugins against a session in tests and tooling.
// Session flows make their own.
func New[State any](id string, state *SessionState[State]) *Session[State] {
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

// viewState returns the current state with the session's own slices, clipped, as
// Messages does: a snapshot reads them once per turn, and copying a long history for
// that would make each turn's cost grow with it. The session never writes into its
// slices in place (appends go past a view's length, replacements copy first). The
// caller holds s.mu.
func (s *Session[State]) viewState() *SessionState[State] {
	c := s.state
	c.Messages = slices.Clip(s.state.Messages)
	c.Artifacts = slices.Clip(s.state.Artifacts)
	return &c
}

// Messages returns the conversation so far: the session's own slice, clipped, so that a
// turn does not copy the whole history to read it. Appending to it copies it; writing
// into it is not allowed (SetMessages changes the history). Later additions to the
// session do not show in it.
func (s *Session[State]) Messages() []*abi.Message {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clip(s.state.Messages)
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
	s.keepCustom()
	s.state.Custom = custom
	s.changed = true
	s.mu.Unlock()
	s.customChanged()
}

// UpdateCustom changes the application's state atomically: fn gets the current value
// and returns the new one, with no other update in between. Tools running concurrently
// use it instead of Custom followed by SetCustom.
func (s *Session[State]) UpdateCustom(fn func(State) State) {
	s.mu.Lock()
	s.keepCustom()
	s.state.Custom = fn(s.state.Custom)
	s.changed = true
	s.mu.Unlock()
	s.customChanged()
}

// keepCustom keeps the custom state as the running turn found it, before the turn's
// first change of it. The caller holds s.mu.
func (s *Session[State]) keepCustom() {
	if s.turn == nil || s.turn.custom != nil {
		return
	}
	buf := getScratch()
	if err := buf.encode(s.state.Custom); err != nil {
		buf.put()
		return
	}
	s.turn.buf, s.turn.custom = buf, buf.b
}

// beginTurn records the state a turn begins in, unless a turn is running already (its
// flow function has not ended it), and reports whether it did.
func (s *Session[State]) beginTurn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn != nil {
		return false
	}
	s.turn = &turnBase[State]{state: s.state, changed: s.changed}
	return true
}

// endTurn forgets the running turn's beginning: the turn ended.
func (s *Session[State]) endTurn() {
	s.mu.Lock()
	if s.turn != nil {
		s.turn.release()
		s.turn = nil
	}
	s.mu.Unlock()
}

// inTurn reports whether a turn is running.
func (s *Session[State]) inTurn() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.turn != nil
}

// rollback puts the state back as the running turn found it, and ends the turn.
func (s *Session[State]) rollback() {
	s.mu.Lock()
	t := s.turn
	if t == nil {
		s.mu.Unlock()
		return
	}
	s.turn = nil
	st := t.state
	kept := t.custom != nil
	if kept {
		var c State
		if err := json.Unmarshal(t.custom, &c); err == nil {
			st.Custom = c
		}
		t.release()
	}
	s.state, s.changed = st, t.changed
	s.mu.Unlock()
	if kept {
		s.customChanged()
	}
}

// customChanged tells the connection's watcher, if any, that the custom state changed,
// outside the session's lock: the watcher reads the state and streams the change.
func (s *Session[State]) customChanged() {
	s.mu.RLock()
	watch := s.onCustom
	s.mu.RUnlock()
	if watch != nil {
		watch()
	}
}

// Artifacts returns the session's artifacts.
func (s *Session[State]) Artifacts() []*abi.Artifact {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.state.Artifacts)
}

// AddArtifact records an artifact. An artifact with the same non-empty name is
// replaced, in place: a name identifies one artifact whose latest version counts.
func (s *Session[State]) AddArtifact(a *abi.Artifact) {
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
func (s *Session[State]) SetArtifacts(artifacts ...*abi.Artifact) {
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

// SnapshotID returns the snapshot the session's state was last saved to or resumed
// from, or "" when it has none (a new session, or client-managed state).
func (s *Session[State]) SnapshotID() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.parentID
}

// TurnIndex returns the number of the turn now running, counted from 0 over the whole
// session (a resumed session continues its count).
func (s *Session[State]) TurnIndex() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.turnIndex
}

// FromContext returns the session in ctx, or nil if ctx carries none or one of another
// State type.
func FromContext[State any](ctx context.Context) *Session[State] {
	s, _ := agent.AnySessionFromContext(ctx).(*Session[State])
	return s
}

var _ agent.AnySession = (*Session[struct{}])(nil)

// CustomJSON implements agent.AnySession.
func (s *Session[State]) CustomJSON() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return json.Marshal(s.state.Custom)
}

// SetCustomJSON implements agent.AnySession.
func (s *Session[State]) SetCustomJSON(data []byte) error {
	var v State
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("session: the state does not decode into %T: %w", v, err)
	}
	if dec.More() {
		return fmt.Errorf("session: the state holds more than one JSON value")
	}
	s.SetCustom(v)
	return nil
}

// LockUpdates implements agent.AnySession.
func (s *Session[State]) LockUpdates() (unlock func()) {
	s.updates.Lock()
	return s.updates.Unlock
}
