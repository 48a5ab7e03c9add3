package host

import (
	"context"
	"errors"
	"sync"
)

// pool keeps warm instances of one plugin and bounds how many exist at once. An
// instance is used by one call at a time; one that failed is closed, and its place
// goes to a fresh one.
type pool struct {
	newInstance func(ctx context.Context) (instance, error)
	slots       chan struct{} // one per live instance, idle or busy
	idle        chan instance

	mu     sync.Mutex
	closed bool
}

var errPoolClosed = errors.New("plugin unloaded")

func newPool(size int, newInstance func(ctx context.Context) (instance, error)) *pool {
	return &pool{
		newInstance: newInstance,
		slots:       make(chan struct{}, size),
		idle:        make(chan instance, size),
	}
}

// get returns an idle instance, a new one if the pool has room, or waits for one to be
// returned; waiting ends with ctx.
func (p *pool) get(ctx context.Context) (instance, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	select {
	case inst := <-p.idle:
		return inst, nil
	default:
	}
	select {
	case inst := <-p.idle:
		return inst, nil
	case p.slots <- struct{}{}:
		inst, err := p.newInstance(ctx)
		if err != nil {
			<-p.slots
			return nil, err
		}
		return inst, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// put returns an instance after a call; a broken one is closed and its slot freed.
func (p *pool) put(inst instance, broken bool) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if broken || closed {
		inst.close(context.Background())
		<-p.slots
		return
	}
	p.idle <- inst // never blocks: there are at most cap(idle) instances
}

// warm adds an instance the caller already made (the one that answered describe).
func (p *pool) warm(inst instance) {
	select {
	case p.slots <- struct{}{}:
		p.idle <- inst
	default:
		inst.close(context.Background())
	}
}

func (p *pool) check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errPoolClosed
	}
	return nil
}

// close closes the idle instances; busy ones are closed when they come back.
func (p *pool) close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	for {
		select {
		case inst := <-p.idle:
			inst.close(ctx)
			<-p.slots
		default:
			return
		}
	}
}

// size reports the live instances (idle or busy) and the idle ones.
func (p *pool) size() (live, idle int) { return len(p.slots), len(p.idle) }
