package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/store"
)

// Snapshot is a snapshot of a session of any agent of a deployment, its custom state
// as JSON: what a prompt agent's plugins keep, a routed agent's routes.State.
type Snapshot = session.SessionSnapshot[json.RawMessage]

// Agent is one agent of a deployment, prompt or routed: both are session flows, seen
// here without their Stream and State types, so that a server treats them alike.
type Agent struct {
	// Name is the agent's name, and its session flow's.
	Name        string
	Description string
	// File is the agent file that defines it.
	File string
	// Model is the model its turns use ("" when the prompt names it).
	Model string
	// Tools are the tools offered to its model: a routed agent's are those of its
	// domains, capabilities, guidelines and steps.
	Tools []string
	// Routes are the IDs of a routed agent's routes; a prompt agent has none.
	Routes []string
	// ClientTools says whether it offers its model the tools a client brings to a
	// turn (session.SessionFlowInput.Tools): a prompt agent does unless its file says
	// clientTools: false; a routed agent never does.
	ClientTools bool
	// Plugins are the names of the plugins its file loads.
	Plugins []string
	// SnapshotStore is where its sessions are kept: badger, postgres, memory or none.
	SnapshotStore string

	flow      session.AnyFlow
	snapshots snapshots // nil without a snapshot store
	store     store.Store
	namespace string // of its sessions in store: its name, after its tenant's ID and a '/'
}

// isolatedFlow is a flow whose connections make their plugin calls under session
// isolation (host.IsolateSessions): an agent file's isolation: session.
type isolatedFlow struct{ session.AnyFlow }

// ConnectAny implements session.AnyFlow.
func (f isolatedFlow) ConnectAny(ctx context.Context, init json.RawMessage) (session.AnyConnection, error) {
	return f.AnyFlow.ConnectAny(host.IsolateSessions(ctx), init)
}

// snapshots reads and aborts the snapshots of a flow, whatever its State type.
type snapshots interface {
	get(ctx context.Context, snapshotID string) (*Snapshot, error)
	list(ctx context.Context, sessionID string) ([]*Snapshot, error)
	latest(ctx context.Context, sessionID string) (*Snapshot, error)
	abort(ctx context.Context, snapshotID string) (session.SnapshotStatus, bool, error)
	wait(ctx context.Context, snapshotID string) (*Snapshot, error)
	resolve(ctx context.Context, sessionID, id string) (string, error)
}

// bind makes flow the agent's and records the registry keys it took, which Close
// removes.
func bind[Stream, State any](d *Deployment, a *Agent, flow *session.SessionFlow[Stream, State]) {
	d.defined = append(d.defined, flow.Desc().Key)
	for _, sa := range flow.SnapshotActions() {
		d.defined = append(d.defined, sa.Desc().Key)
	}
	a.flow = flow
	if flow.SnapshotStore() != nil {
		a.snapshots = flowSnapshots[Stream, State]{flow}
	}
}

// flowSnapshots are the snapshots of a flow with a snapshot store.
type flowSnapshots[Stream, State any] struct {
	flow *session.SessionFlow[Stream, State]
}

func (s flowSnapshots[Stream, State]) get(ctx context.Context, id string) (*Snapshot, error) {
	return erase(s.flow.SnapshotStore().GetSnapshot(ctx, id))
}

func (s flowSnapshots[Stream, State]) latest(ctx context.Context, sessionID string) (*Snapshot, error) {
	return erase(s.flow.SnapshotStore().LatestSnapshot(ctx, sessionID))
}

func (s flowSnapshots[Stream, State]) abort(ctx context.Context, id string) (session.SnapshotStatus, bool, error) {
	return s.flow.Abort(ctx, id)
}

func (s flowSnapshots[Stream, State]) wait(ctx context.Context, id string) (*Snapshot, error) {
	return erase(s.flow.Wait(ctx, id))
}

func (s flowSnapshots[Stream, State]) list(ctx context.Context, sessionID string) ([]*Snapshot, error) {
	return eraseAll(s.flow.SnapshotStore().ListSnapshots(ctx, sessionID))
}

// eraseAll returns snapshots with their custom state as JSON, or err.
func eraseAll[State any](all []*session.SessionSnapshot[State], err error) ([]*Snapshot, error) {
	if err != nil {
		return nil, err
	}
	out := make([]*Snapshot, len(all))
	for i, snap := range all {
		if out[i], err = erase(snap, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// resolve finds a snapshot by a prefix of its ID where the flow's store can; elsewhere
// a snapshot is named by its whole ID.
func (s flowSnapshots[Stream, State]) resolve(ctx context.Context, sessionID, id string) (string, error) {
	if r, ok := s.flow.SnapshotStore().(session.SnapshotResolver); ok {
		return r.ResolveSnapshotID(ctx, sessionID, id)
	}
	return id, nil
}

// erase returns a snapshot with its custom state as JSON, or err.
func erase[State any](snap *session.SessionSnapshot[State], err error) (*Snapshot, error) {
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("deploy: encoding snapshot %s: %w", snap.SnapshotID, err)
	}
	var out Snapshot
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("deploy: decoding snapshot %s: %w", snap.SnapshotID, err)
	}
	return &out, nil
}

// Flow returns the agent's session flow: ConnectAny opens a connection from the JSON
// of a session.SessionFlowInit, whose chunks carry the status as JSON.
func (a *Agent) Flow() session.AnyFlow { return a.flow }

// ServerManaged reports whether the agent keeps its sessions (a snapshot store), so
// that clients resume them by ID, rather than keeping their state themselves.
func (a *Agent) ServerManaged() bool { return a.snapshots != nil }

// kept returns the agent's snapshots, or an error wrapping session.ErrNoSnapshotStore.
func (a *Agent) kept() (snapshots, error) {
	if a.snapshots == nil {
		return nil, fmt.Errorf("deploy: agent %s: %w: its clients keep their sessions", a.Name, session.ErrNoSnapshotStore)
	}
	return a.snapshots, nil
}

// Snapshot returns a snapshot of one of the agent's sessions: an unknown ID is an
// error wrapping session.ErrSnapshotNotFound, an agent without snapshots
// session.ErrNoSnapshotStore.
func (a *Agent) Snapshot(ctx context.Context, snapshotID string) (*Snapshot, error) {
	s, err := a.kept()
	if err != nil {
		return nil, err
	}
	return s.get(ctx, snapshotID)
}

// Snapshots returns a session's snapshots in turn order (none for an unknown session).
func (a *Agent) Snapshots(ctx context.Context, sessionID string) ([]*Snapshot, error) {
	s, err := a.kept()
	if err != nil {
		return nil, err
	}
	return s.list(ctx, sessionID)
}

// LatestSnapshot returns a session's most recent snapshot, or an error wrapping
// session.ErrSnapshotNotFound.
func (a *Agent) LatestSnapshot(ctx context.Context, sessionID string) (*Snapshot, error) {
	s, err := a.kept()
	if err != nil {
		return nil, err
	}
	return s.latest(ctx, sessionID)
}

// ResolveSnapshotID returns the whole ID of the snapshot a person named by its ID or
// by a unique prefix of it (see session.SnapshotResolver), among the session's
// snapshots when sessionID is not "", else among all the agent's: an unknown one is an
// error wrapping session.ErrSnapshotNotFound, an ambiguous prefix
// session.ErrSnapshotAmbiguous.
func (a *Agent) ResolveSnapshotID(ctx context.Context, sessionID, id string) (string, error) {
	s, err := a.kept()
	if err != nil {
		return "", err
	}
	return s.resolve(ctx, sessionID, id)
}

// Abort stops the detached turn of a pending snapshot, and returns the status the
// snapshot had (pending when it stopped a turn), or ok false for an unknown snapshot
// (see session.SessionFlow.Abort).
func (a *Agent) Abort(ctx context.Context, snapshotID string) (prev session.SnapshotStatus, ok bool, err error) {
	s, err := a.kept()
	if err != nil {
		return "", false, err
	}
	return s.abort(ctx, snapshotID)
}

// Wait waits until the detached turn of a pending snapshot ends and returns the
// snapshot, settled under its own ID (see session.SessionFlow.Wait).
func (a *Agent) Wait(ctx context.Context, snapshotID string) (*Snapshot, error) {
	s, err := a.kept()
	if err != nil {
		return nil, err
	}
	return s.wait(ctx, snapshotID)
}

// Sessions lists the IDs of the sessions the agent keeps.
func (a *Agent) Sessions(ctx context.Context) ([]string, error) {
	if a.store == nil {
		return nil, fmt.Errorf("deploy: agent %q: %w", a.Name, session.ErrNoSnapshotStore)
	}
	l, ok := a.store.(store.SessionLister)
	if !ok {
		return nil, fmt.Errorf("deploy: agent %q: its store (%T) cannot list sessions", a.Name, a.store)
	}
	return l.Sessions(ctx, a.namespace)
}

// HasSession reports whether the agent keeps a session with this ID.
func (a *Agent) HasSession(ctx context.Context, id string) (bool, error) {
	head, err := a.Head(ctx, id)
	return head != "", err
}

// Head returns the ID of the session's latest snapshot, or "" when the agent keeps no
// such session. Hosts sharing a store compare it with the snapshot a session open on
// them continues, to learn whether another host ran a turn since.
func (a *Agent) Head(ctx context.Context, id string) (string, error) {
	if a.store == nil {
		return "", nil
	}
	if err := store.CheckNames(id); err != nil {
		return "", nil
	}
	rec, err := a.store.Head(ctx, a.namespace, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("deploy: agent %s: session %s: %w", a.Name, id, err)
	}
	return rec.ID, nil
}
