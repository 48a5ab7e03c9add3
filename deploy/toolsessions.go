package deploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/store"
)

// Tools returns the tools the agents offer their models (each once, sorted by name),
// as a caller outside their turns may run them: an MCP client of terrarium serve's
// /mcp. Terrarium's own tools (Builtins) are left out: they wait for the user of a
// turn, which such a caller has not.
func (d *Deployment) Tools(agents ...*Agent) []agent.Tool {
	byName := map[string]agent.Tool{}
	for _, a := range agents {
		for _, name := range a.Tools {
			if _, isBuiltin := builtins[name]; isBuiltin {
				continue
			}
			if t, err := d.reg.LookupTool(name); err == nil {
				byName[name] = t
			}
		}
	}
	tools := make([]agent.Tool, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		tools = append(tools, byName[name])
	}
	return tools
}

// toolNamespace is where the sessions of tools run outside the agents' turns are
// kept, after the tenant's ID and a '/': no agent has its name, which cannot start
// with '_'.
const toolNamespace = "_tools"

// ToolSessions keeps the sessions of tools run outside the agents' turns (one per MCP
// session of terrarium serve's /mcp), as an agent's sessions are kept: each holds the
// state its tools keep (the scratchpad's notes), snapshotted after each call that
// changed it in the deployment's default store (PostgreSQL with WithPostgres, Badger
// with a data directory, else memory), under the namespace "_tools" (after the
// tenant's ID and a '/'). It is safe for concurrent use.
type ToolSessions struct {
	snapshots session.SnapshotStore[promptState]
	st        store.Store
	namespace string
}

// ToolSessions returns the deployment's tool sessions.
func (d *Deployment) ToolSessions() *ToolSessions { return d.toolSessions }

// newToolSessions keeps tool sessions in the deployment's default store, once its
// stores are open.
func (d *Deployment) newToolSessions() *ToolSessions {
	st := store.Store(d.memory)
	switch {
	case d.shared != nil:
		st = d.shared
	case d.disk != nil:
		st = d.disk
	}
	ns := toolNamespace
	if d.tenant != "" {
		ns = d.tenant + "/" + ns
	}
	return &ToolSessions{snapshots: session.NewSnapshotStore[promptState](st, session.WithNamespace(ns)), st: st, namespace: ns}
}

// ToolSession is one session of tools: the agent.AnySession its tools run in, and
// where its state was last saved.
type ToolSession struct {
	*session.Session[promptState]
	mu     sync.Mutex
	parent string // the snapshot the state continues, "" for none
	turn   int    // the index of the next snapshot
	saved  []byte // the custom state as last saved
}

// Open returns the session id (a *ToolSession), resumed from its latest snapshot when
// it has one.
func (ts *ToolSessions) Open(ctx context.Context, id string) (agent.AnySession, error) {
	snap, err := ts.snapshots.LatestSnapshot(ctx, id)
	var s *ToolSession
	switch {
	case errors.Is(err, session.ErrSnapshotNotFound):
		s = &ToolSession{Session: session.New[promptState](id, nil)}
	case err != nil:
		return nil, fmt.Errorf("deploy: tool session %s: %w", id, err)
	default:
		s = &ToolSession{Session: session.New(id, &snap.State), parent: snap.SnapshotID, turn: snap.TurnIndex + 1}
	}
	// A call that changes nothing stores nothing.
	s.saved, _ = s.CustomJSON()
	return s, nil
}

// Save snapshots a session Open returned if its custom state changed since it was
// last saved.
func (ts *ToolSessions) Save(ctx context.Context, as agent.AnySession) error {
	s, ok := as.(*ToolSession)
	if !ok {
		return fmt.Errorf("deploy: %T is not a tool session", as)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	custom, err := s.CustomJSON()
	if err != nil {
		return err
	}
	if string(custom) == string(s.saved) {
		return nil
	}
	snap := &session.SessionSnapshot[promptState]{SessionID: s.ID(), ParentID: s.parent, CreatedAt: time.Now(), TurnIndex: s.turn,
		Event: session.SnapshotEventTurnEnd, Status: session.StatusCompleted, State: *s.State()}
	if err := ts.snapshots.SaveSnapshot(ctx, snap); err != nil {
		return fmt.Errorf("deploy: tool session %s: %w", s.ID(), err)
	}
	s.parent, s.saved = snap.SnapshotID, custom
	s.turn++
	return nil
}

// Snapshots returns a tool session's snapshots in order.
func (ts *ToolSessions) Snapshots(ctx context.Context, id string) ([]*Snapshot, error) {
	return eraseAll(ts.snapshots.ListSnapshots(ctx, id))
}
