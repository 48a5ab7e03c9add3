package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// pool keeps the instances of one plugin, as loaded by one host or tenant view, and
// bounds how many exist at once. An instance is used by one call at a time; one that
// failed is closed, and its place goes to a fresh one.
//
// Under session isolation an instance serves one session only: a call takes the
// instance its session used before, or a fresh one (made, or reset, and never called
// since), and gives it back marked as that session's. An idle instance that cannot
// serve a waiting call (another session's, or a used one for a call wanting a fresh
// one) is evicted, least recently used first, when the pool is full.
//
// New instances are made in the background, not within a caller's context: a caller
// that gives up waiting (its deadline, a retry's attempt timeout) leaves the instance
// to the next caller instead of wasting it. start bounds each by the manifest's
// timeout.
type pool struct {
	start func(ctx context.Context) (instance, error)
	max   int
	wait  time.Duration // how long a call may wait for an instance: past it, ErrNoInstance

	ctx    context.Context // ends when the pool is closed, and with it instances being made
	cancel context.CancelFunc
	busy   sync.WaitGroup // callers and instances out of idle: what close waits for
	// calls ends, with errCallEnded, when close gave up waiting for the calls in
	// flight: they end with it, as their deadline would end them.
	calls    context.Context
	endCalls context.CancelCauseFunc

	mu      sync.Mutex
	closed  bool
	live    int           // instances idle, busy or being made
	idle    []*pooled     // least recently used first
	changed chan struct{} // closed, and replaced, whenever idle gains an instance or live shrinks
	watched bool          // a caller waits on changed: only then is it worth replacing
}

// pooled is an instance with what the pool knows of its past.
type pooled struct {
	inst instance
	// owner is the session the instance served under session isolation; nil for an
	// instance that serves any call of the pool's tenant.
	owner any
	// used says the instance ran a call since it was made or reset.
	used bool
}

// claim is what a call needs of an instance. An isolated call needs one that served
// its session only, or a fresh one; a call of no session that wants isolation gets a
// fresh instance, closed after the call.
type claim struct {
	isolated bool
	session  any // the session's identity, nil for none
}

// serves reports whether e may serve the claim.
func (c claim) serves(e *pooled) bool {
	if !c.isolated {
		return e.owner == nil
	}
	if c.session != nil && e.owner == c.session {
		return true
	}
	return e.owner == nil && !e.used
}

var errPoolClosed = errors.New("plugin unloaded")

// errCallEnded ends a call that was in flight when an unload gave up waiting for it.
// It is not errPoolClosed: that call ran, and must not be made again (Reload's slots
// retry a call that never got an instance).
var errCallEnded = errors.New("the plugin was unloaded during the call")

func newPool(size int, wait time.Duration, start func(ctx context.Context) (instance, error)) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	calls, endCalls := context.WithCancelCause(context.Background())
	return &pool{start: start, max: size, wait: wait, ctx: ctx, cancel: cancel, calls: calls, endCalls: endCalls, changed: make(chan struct{})}
}

// get returns an idle instance that may serve c, or waits for one: one returned by
// another call, or a new one if the pool has room. Waiting ends with ctx, or after
// p.wait with ErrNoInstance. Every instance get returns must be given back with put.
func (p *pool) get(ctx context.Context, c claim) (*pooled, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	p.busy.Add(1)
	p.mu.Unlock()
	e, err := p.await(ctx, c)
	if err != nil {
		p.busy.Done()
	}
	return e, err
}

func (p *pool) await(ctx context.Context, c claim) (*pooled, error) {
	var made <-chan error // the instance this caller asked for, while it is being made
	waiting := false      // ctx is bounded by p.wait
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errPoolClosed
		}
		if e := p.take(c); e != nil {
			p.mu.Unlock()
			return e, nil
		}
		if made == nil {
			// One instance in the making per caller is enough: it may go to another
			// caller, and this one asks again once it is made.
			if p.live < p.max {
				p.live++
				made = p.grow(nil)
			} else if victim := p.evict(c); victim != nil {
				made = p.grow(victim) // the victim's place goes to the new instance
			}
		}
		changed := p.changed
		p.watched = true
		p.mu.Unlock()
		if !waiting {
			// Bounded only now that the caller must wait: most calls find an idle
			// instance at once, and a timer for each would be garbage.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, p.wait, fmt.Errorf("%w within %v", ErrNoInstance, p.wait))
			defer cancel()
			waiting = true
		}
		select {
		case <-changed:
		case err := <-made:
			if err != nil {
				return nil, err
			}
			made = nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-p.ctx.Done():
			return nil, errPoolClosed
		}
	}
}

// take removes and returns the idle instance that may serve c, the most recently used
// first (its memory is warm), keeping fresh instances for when no used one will do;
// the caller holds p.mu.
func (p *pool) take(c claim) *pooled {
	best := -1
	for i := len(p.idle) - 1; i >= 0; i-- {
		e := p.idle[i]
		if !c.serves(e) {
			continue
		}
		if e.used {
			best = i
			break
		}
		if best < 0 {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	e := p.idle[best]
	p.idle = append(p.idle[:best], p.idle[best+1:]...)
	return e
}

// evict removes and returns the least recently used idle instance that cannot serve
// c, to make room; the caller holds p.mu.
func (p *pool) evict(c claim) *pooled {
	for i, e := range p.idle {
		if !c.serves(e) {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return e
		}
	}
	return nil
}

// grow makes an instance, in a place the caller took, and adds it to the idle ones,
// where the caller (or whoever comes first) takes it. From a victim it resets the
// victim's memory when the engine can, and makes a new one in its place when it
// cannot. The channel returned gets nil once the instance is idle, or the error that
// kept it from being made (its place is then freed).
func (p *pool) grow(victim *pooled) <-chan error {
	made := make(chan error, 1)
	p.busy.Add(1)
	go func() {
		defer p.busy.Done()
		if victim != nil {
			if err := victim.inst.Reset(p.ctx); err == nil {
				p.add(&pooled{inst: victim.inst})
				made <- nil
				return
			}
			victim.inst.Close(context.Background())
		}
		inst, err := p.start(p.ctx)
		if err != nil {
			p.free()
			made <- err
			return
		}
		p.add(&pooled{inst: inst})
		made <- nil
	}()
	return made
}

// put gives back an instance get returned, after a call made under c; a broken one,
// or one that served an isolated call of no session, is closed and its place freed.
func (p *pool) put(e *pooled, c claim, broken bool) {
	defer p.busy.Done()
	if broken || c.isolated && c.session == nil {
		e.inst.Close(context.Background())
		p.free()
		return
	}
	e.used = true
	if c.isolated {
		e.owner = c.session
	}
	p.add(e)
}

// add makes an instance idle, or closes it if the pool is closed.
func (p *pool) add(e *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		e.inst.Close(context.Background())
		p.live--
		return
	}
	p.idle = append(p.idle, e)
	p.notify()
}

// free forgets an instance that was closed (or never made).
func (p *pool) free() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live--
	p.notify()
}

// notify wakes every waiting caller; the caller holds p.mu.
func (p *pool) notify() {
	if !p.watched {
		return // nobody to wake: keep the channel rather than make garbage of it
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.watched = false
}

// warm adds an instance the caller already made (the one that answered describe): a
// fresh one, since describing is how an instance starts.
func (p *pool) warm(inst instance) {
	p.mu.Lock()
	room := !p.closed && p.live < p.max
	if room {
		p.live++
	}
	p.mu.Unlock()
	if !room {
		inst.Close(context.Background())
		return
	}
	p.add(&pooled{inst: inst})
}

// close refuses new calls, stops making instances, and waits until the calls in
// flight have given theirs back, or ctx ends. Every instance is closed when it comes
// back; what is still busy when close returns is the caller's to end (by closing the
// module under it).
func (p *pool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.live -= len(idle)
	p.mu.Unlock()
	p.cancel()
	for _, e := range idle {
		e.inst.Close(context.Background())
	}
	finished := make(chan struct{})
	go func() {
		p.busy.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
	}
	// The calls still in flight are ended, and given a moment to return before their
	// module closes under them: a guest runs on to its next yield, and one woken in a
	// WASI call would find its module's WASI state gone.
	p.endCalls(errCallEnded)
	t := time.NewTimer(cancelGrace)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
	}
	return fmt.Errorf("calls still in flight were ended: %w", context.Cause(ctx))
}

// size reports the live instances (idle, busy or being made) and the idle ones.
func (p *pool) size() (live, idle int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live, len(p.idle)
}
