package host

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeInstance is an instance that counts its resets, and can or cannot reset.
type fakeInstance struct {
	canReset bool
	resets   atomic.Int32
	closed   atomic.Bool
}

func (f *fakeInstance) Call(context.Context, string, []byte) ([]byte, error) { return nil, nil }
func (f *fakeInstance) Close(context.Context) error {
	f.closed.Store(true)
	return nil
}
func (f *fakeInstance) Reset(context.Context) error {
	if !f.canReset {
		return errors.ErrUnsupported
	}
	f.resets.Add(1)
	return nil
}

// Under session isolation a full pool evicts another session's idle instance: it
// resets it where the engine can, and makes a new one in its place where it cannot.
func TestPoolEvictsOtherSessionsInstances(t *testing.T) {
	for _, canReset := range []bool{true, false} {
		var made atomic.Int32
		p := newPool(1, time.Minute, func(context.Context) (instance, error) {
			made.Add(1)
			return &fakeInstance{canReset: canReset}, nil
		})
		ctx := context.Background()
		s1, s2 := claim{isolated: true, session: "s1"}, claim{isolated: true, session: "s2"}
		e, err := p.get(ctx, s1)
		if err != nil {
			t.Fatal(err)
		}
		first := e.inst.(*fakeInstance)
		p.put(e, s1, false)
		if e, _ = p.get(ctx, s1); e.inst != first {
			t.Fatal("s1 did not get its own instance back")
		}
		p.put(e, s1, false)
		e, err = p.get(ctx, s2)
		if err != nil {
			t.Fatal(err)
		}
		if e.used || e.owner != nil {
			t.Errorf("s2 got a used instance (owner %v)", e.owner)
		}
		switch {
		case canReset && (e.inst != first || first.resets.Load() != 1 || made.Load() != 1):
			t.Errorf("resettable: s2 got a new instance, not s1's reset (%d made, %d resets)", made.Load(), first.resets.Load())
		case !canReset && (e.inst == first || !first.closed.Load() || made.Load() != 2):
			t.Errorf("not resettable: s1's instance was not replaced (%d made)", made.Load())
		}
		p.put(e, s2, false)
		if live, idle := p.size(); live != 1 || idle != 1 {
			t.Errorf("live %d, idle %d; want 1, 1", live, idle)
		}
		p.close(ctx)
	}
}

// A pooled call takes a used instance over a fresh one, which it leaves to the
// isolated calls that need one.
func TestPoolKeepsFreshInstancesForIsolatedCalls(t *testing.T) {
	p := newPool(2, time.Minute, func(context.Context) (instance, error) { return &fakeInstance{}, nil })
	ctx := context.Background()
	used, _ := p.get(ctx, claim{})
	p.put(used, claim{}, false)
	fresh := &fakeInstance{}
	p.warm(fresh)
	pooled, _ := p.get(ctx, claim{})
	if pooled != used {
		t.Error("a pooled call took the fresh instance")
	}
	isolated, _ := p.get(ctx, claim{isolated: true, session: "s"})
	if isolated.inst != fresh {
		t.Error("an isolated call did not get the fresh instance")
	}
	p.put(isolated, claim{isolated: true, session: "s"}, false)
	p.put(pooled, claim{}, false)
	p.close(ctx)
}

// Taking an idle instance and giving it back makes no garbage: no timer for the queue
// wait (nobody waits), no new channel to wake nobody.
func TestPoolCheckoutAllocatesNothing(t *testing.T) {
	p := newPool(1, time.Minute, func(context.Context) (instance, error) { return &fakeInstance{}, nil })
	ctx := context.Background()
	e, err := p.get(ctx, claim{})
	if err != nil {
		t.Fatal(err)
	}
	p.put(e, claim{}, false)
	allocs := testing.AllocsPerRun(100, func() {
		e, err := p.get(ctx, claim{})
		if err != nil {
			t.Fatal(err)
		}
		p.put(e, claim{}, false)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per checkout, want 0", allocs)
	}
	p.close(ctx)
}
