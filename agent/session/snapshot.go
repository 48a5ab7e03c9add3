package session

import (
	"context"
	"errors"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/store"
)

// SnapshotContext is what a snapshot callback decides on.
type SnapshotContext[State any] struct {
	// Event is the moment the snapshot is considered.
	Event SnapshotEvent
	// State is the state that will be stored if the callback says yes. Its slices are
	// the session's, clipped: appending to them copies them; writing into them is not
	// allowed.
	State *SessionState[State]
	// PrevState is the state at the last snapshot (taken or resumed from), or nil.
	PrevState *SessionState[State]
	// TurnIndex is the number of the turn that just ended (or is running, at the end of
	// an invocation), counted from 0 over the whole session.
	TurnIndex int
}

// SnapshotCallback decides whether to take a snapshot.
type SnapshotCallback[State any] func(ctx context.Context, sc *SnapshotContext[State]) bool

// SnapshotAlways takes a snapshot at every event.
func SnapshotAlways[State any]() SnapshotCallback[State] {
	return func(context.Context, *SnapshotContext[State]) bool { return true }
}

// SnapshotNever takes no snapshots.
func SnapshotNever[State any]() SnapshotCallback[State] {
	return func(context.Context, *SnapshotContext[State]) bool { return false }
}

// SnapshotOn takes a snapshot at the given events only.
func SnapshotOn[State any](events ...SnapshotEvent) SnapshotCallback[State] {
	set := map[SnapshotEvent]bool{}
	for _, e := range events {
		set[e] = true
	}
	return func(_ context.Context, sc *SnapshotContext[State]) bool { return set[sc.Event] }
}

// SnapshotStore persists snapshots. (Seed 003's interface, plus LatestSnapshot for
// resuming a session by its ID.)
type SnapshotStore[State any] interface {
	// SaveSnapshot stores a snapshot and sets its SnapshotID, the content address of
	// its record. The state's slices may be the session's own (SnapshotContext.State):
	// a store reads them and keeps copies of what it keeps, never writing into them.
	SaveSnapshot(ctx context.Context, snap *SessionSnapshot[State]) error
	// GetSnapshot loads a snapshot; an unknown ID is an error wrapping
	// ErrSnapshotNotFound.
	GetSnapshot(ctx context.Context, snapshotID string) (*SessionSnapshot[State], error)
	// ListSnapshots returns a session's snapshots in turn order; snapshots of equal
	// turn (branches) in the order they were saved.
	ListSnapshots(ctx context.Context, sessionID string) ([]*SessionSnapshot[State], error)
	// LatestSnapshot returns the session's most recently saved snapshot, or an error
	// wrapping ErrSnapshotNotFound: the session's head, which a connection resuming the
	// session by its ID continues (after a branch, the branch's last snapshot).
	LatestSnapshot(ctx context.Context, sessionID string) (*SessionSnapshot[State], error)
	// SettleSnapshot settles the pending snapshot snap.SnapshotID under its own ID:
	// from then on it reads with snap's Status (completed, failed or aborted),
	// FinishReason, Error, State and UpdatedAt (now, when zero); its other fields are
	// the pending snapshot's. A snapshot settles once: a second settle is an error
	// wrapping ErrConflict; an unknown one, ErrSnapshotNotFound.
	SettleSnapshot(ctx context.Context, snap *SessionSnapshot[State]) error
}

// The errors of sessions and snapshots, for errors.Is. A server maps them to stable
// codes: not found (404), failed precondition (409 or 400), conflict (409).
var (
	// ErrSnapshotNotFound: no snapshot with that ID (or none for that session). It
	// wraps agent.ErrNotFound.
	ErrSnapshotNotFound = &notFoundError{"snapshot not found"}
	// ErrSnapshotCorrupt: a stored snapshot failed verification (a hash mismatch, a
	// missing or undecodable piece), or the store found it damaged (store.ErrCorrupt,
	// also wrapped). Its state is never returned.
	ErrSnapshotCorrupt = errors.New("snapshot corrupt")
	// ErrNoSnapshotStore: the flow has no snapshot store (its sessions are
	// client-managed), but the call needs one: a resume by snapshot or session ID, a
	// detach, an abort.
	ErrNoSnapshotStore = errors.New("the flow has no snapshot store")
	// ErrServerManaged: a client sent its own state to a flow whose sessions the server
	// keeps; it must resume by snapshot or session ID instead.
	ErrServerManaged = errors.New("cannot send state to a server-managed session")
	// ErrInvalidInit: a connection's init is contradictory (state with an ID, a
	// snapshot of another session than the one named).
	ErrInvalidInit = errors.New("invalid session init")
	// ErrNotResumable: the snapshot cannot be resumed: its detached turn is still
	// running (pending).
	ErrNotResumable = errors.New("snapshot not resumable")
	// ErrConflict: another connection extended the same snapshot first (two hosts
	// running a turn of one session). Reload the session and retry. It is the store's
	// error, store.ErrConflict.
	ErrConflict = store.ErrConflict
)

type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == agent.ErrNotFound }
