package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// pool keeps warm instances of one plugin and bounds how many exist at once. An
// instance is used by one call at a time; one that failed is closed, and its place
// goes to a fresh one.
//
// New instances are made in the background, not within a caller's context: a caller
// that gives up waiting (its deadline, a retry's attempt timeout) leaves the instance
// to the next caller instead of wasting it. start bounds each by the manifest's
// timeout.
type pool struct {
	start func(ctx context.Context) (instance, error)
	slots chan struct{} // one per live instance (idle, busy or being made)
	idle  chan instance

	ctx    context.Context // ends when the pool is closed, and with it instances being made
	cancel context.CancelFunc
	busy   sync.WaitGroup // callers and instances out of idle: what close waits for

	mu     sync.Mutex
	closed bool
}

var errPoolClosed = errors.New("plugin unloaded")

func newPool(size int, start func(ctx context.Context) (instance, error)) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{
		start:  start,
		slots:  make(chan struct{}, size),
		idle:   make(chan instance, size),
		ctx:    ctx,
		cancel: cancel,
	}
}

// get returns an idle instance, or waits for one: one returned by another call, or a
// new one if the pool has room. Waiting ends with ctx. Every instance get returns must
// be given back with put.
func (p *pool) get(ctx context.Context) (instance, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	p.busy.Add(1)
	p.mu.Unlock()
	inst, err := p.wait(ctx)
	if err != nil {
		p.busy.Done()
	}
	return inst, err
}

func (p *pool) wait(ctx context.Context) (instance, error) {
	select {
	case inst := <-p.idle:
		return inst, nil
	default:
	}
	slots := p.slots
	var failed <-chan error
	for {
		select {
		case inst := <-p.idle:
			return inst, nil
		case slots <- struct{}{}:
			slots = nil // one new instance per caller is enough
			failed = p.grow()
		case err := <-failed:
			return nil, err
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-p.ctx.Done():
			return nil, errPoolClosed
		}
	}
}

// grow makes an instance in the slot the caller took, and adds it to the idle ones,
// where the caller (or whoever comes first) takes it. If it cannot be made, the slot
// is freed and the error sent on the channel returned.
func (p *pool) grow() <-chan error {
	failed := make(chan error, 1)
	p.busy.Add(1)
	go func() {
		defer p.busy.Done()
		inst, err := p.start(p.ctx)
		if err != nil {
			<-p.slots
			failed <- err
			return
		}
		p.add(inst)
	}()
	return failed
}

// put gives back an instance get returned; a broken one is closed and its slot freed.
func (p *pool) put(inst instance, broken bool) {
	defer p.busy.Done()
	if broken {
		p.discard(inst)
		return
	}
	p.add(inst)
}

// add makes an instance idle, or closes it if the pool is closed.
func (p *pool) add(inst instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.discard(inst)
		return
	}
	p.idle <- inst // never blocks: there are at most cap(idle) instances
}

func (p *pool) discard(inst instance) {
	inst.close(context.Background())
	<-p.slots
}

// warm adds an instance the caller already made (the one that answered describe).
func (p *pool) warm(inst instance) {
	select {
	case p.slots <- struct{}{}:
		p.add(inst)
	default:
		inst.close(context.Background())
	}
}

// close refuses new calls, stops making instances, and waits until the calls in
// flight have given theirs back, or ctx ends. Every instance is closed when it comes
// back; what is still busy when close returns is the caller's to end (by closing the
// module under it).
func (p *pool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	for drained := false; !drained; {
		select {
		case inst := <-p.idle:
			p.discard(inst)
		default:
			drained = true
		}
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
		return fmt.Errorf("calls still in flight: %w", context.Cause(ctx))
	}
}

// size reports the live instances (idle, busy or being made) and the idle ones.
func (p *pool) size() (live, idle int) { return len(p.slots), len(p.idle) }
