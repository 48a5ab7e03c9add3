package host

import (
	"context"
	"sync"
	"time"
)

// cancelGrace is how long a guest whose caller gave up may take to return.
const cancelGrace = time.Second

// guestContext is the context a guest runs under, for a call bound to b. It ends at
// the call's deadline, b.deadline, or when an unload ends the calls in flight
// (pool.calls), but not when the caller gives up: that reaches the
// guest through its host functions, which run under b.context() and so fail, and the
// guest is ended only if it has not returned cancelGrace later. A guest that returns
// keeps its instance: a caller giving up (a retry's attempt timeout, a client gone)
// does not cost a new one. Of values it holds b only: the engine looks values up on
// every kernel call, so a short chain keeps calls fast.
//
// It is a context of its own, part of b, rather than one of package context's, whose
// deadline costs a timer and four allocations a call. The native engine asks Err at
// each of the guest's yields, which compares the clock with the deadline; a channel
// and a timer are made only for what waits on Done (a sleeping guest, the Extism
// engine). Watching the caller costs garbage, made only for a caller that can give up.
type guestContext struct {
	b *binding

	calls context.Context // the pool's calls, which an unload may end

	mu       sync.Mutex
	err      error // why it ended: nil while the call runs
	why      error // errTimedOut at the deadline, errCallEnded at an unload, else nil
	done     chan struct{}
	timer    *time.Timer // ends it at the deadline, once Done was asked for
	unwatch  func() bool // stops watching the caller
	unloaded func() bool // stops watching the pool's calls, once Done was asked for
}

// begin starts the context of b's call, whose caller is b.caller, among the calls of
// its plugin's pool.
func (g *guestContext) begin(b *binding, calls context.Context) {
	g.b, g.calls = b, calls
	if b.caller.Done() == nil {
		return
	}
	g.unwatch = context.AfterFunc(b.caller, func() {
		t := time.NewTimer(cancelGrace)
		defer t.Stop()
		select {
		case <-t.C:
			g.end(nil)
		case <-g.Done():
		}
	})
}

// release ends the context: the call is over.
func (g *guestContext) release() {
	if g.unwatch != nil {
		g.unwatch()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		g.timer.Stop()
	}
	if g.unloaded != nil {
		g.unloaded()
	}
	g.endLocked(nil)
}

// Deadline returns the call's deadline.
func (g *guestContext) Deadline() (time.Time, bool) { return g.b.deadline, true }

// Done returns a channel closed when the context ends.
func (g *guestContext) Done() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = make(chan struct{})
		if g.err != nil {
			close(g.done)
		} else {
			g.timer = time.AfterFunc(time.Until(g.b.deadline), func() { g.end(errTimedOut) })
			g.unloaded = context.AfterFunc(g.calls, func() { g.end(errCallEnded) })
		}
	}
	return g.done
}

// Err returns why the context ended: context.DeadlineExceeded at the deadline,
// context.Canceled when the call ended, an unload ended it, or its caller gave up (and
// the grace passed); nil while it runs.
func (g *guestContext) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pollLocked()
	return g.err
}

// Value returns b for bindingKey, and nothing else.
func (g *guestContext) Value(key any) any {
	if key == (bindingKey{}) {
		return g.b
	}
	return nil
}

// cause is what context.Cause returns for one of package context's: errTimedOut at
// the deadline, errCallEnded when an unload ended it, Err otherwise.
func (g *guestContext) cause() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pollLocked()
	if g.why != nil {
		return g.why
	}
	return g.err
}

// pollLocked ends the context if its deadline passed or an unload ended its pool's
// calls.
func (g *guestContext) pollLocked() {
	switch {
	case g.err != nil:
	case !time.Now().Before(g.b.deadline):
		g.endLocked(errTimedOut)
	case g.calls.Err() != nil:
		g.endLocked(errCallEnded)
	}
}

// end ends the context for cause: errTimedOut, errCallEnded, or nil for a call that
// ended or a caller that gave up.
func (g *guestContext) end(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.endLocked(cause)
}

func (g *guestContext) endLocked(cause error) {
	if g.err != nil {
		return
	}
	g.err, g.why = context.Canceled, cause
	if cause == errTimedOut {
		g.err = context.DeadlineExceeded
	}
	if g.done != nil {
		close(g.done)
	}
}
