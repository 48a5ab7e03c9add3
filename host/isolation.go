package host

import "context"

// Isolation says which calls one instance of a plugin may serve. A plugin's own memory
// (its global variables) lives as long as its instance: under pooled isolation what one
// call leaves there can be read by the next call of the same host or tenant, whatever
// its session; under session isolation only by the next call of the same session.
type Isolation string

// The isolation modes.
const (
	// IsolationPooled: the instances of a plugin serve every call of the host (or the
	// tenant view) that loaded it, one call at a time. The default, and the cheapest.
	IsolationPooled Isolation = "pooled"
	// IsolationSession: an instance serves one session only, starting fresh (as it
	// was right after it started), and a call bound to no session gets a fresh
	// instance of its own. A session's first call pays for resetting another
	// session's idle instance to its snapshot, or for a new one where none is idle
	// (see BENCHMARKS.md).
	IsolationSession Isolation = "session"
)

type isolateKey struct{}

// IsolateSessions returns a context under which plugin calls get session isolation,
// whatever their plugins' manifests say: what an agent whose sessions must not share
// plugin memory runs its model, tool and handler calls under.
func IsolateSessions(ctx context.Context) context.Context {
	return context.WithValue(ctx, isolateKey{}, true)
}

// claim returns what a call of the plugin under ctx, bound to b, needs of an instance.
func (p *Plugin) claim(ctx context.Context, b *binding) claim {
	isolated, _ := ctx.Value(isolateKey{}).(bool)
	c := claim{isolated: isolated || p.manifest.Isolation == IsolationSession}
	if c.isolated && b.session != nil {
		// The session object, not its ID: two agents of one tenant may each have a
		// session of the same ID, and a session reopened after a restart starts
		// fresh. The pool holds it while an idle instance is tagged with it.
		c.session = b.session
	}
	return c
}
