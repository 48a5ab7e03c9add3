package host

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGuestContextEnds: the guest's context ends at its deadline, seen by Err
// (what the native engine's yield asks) and by Done (what a sleep waits on), with
// errTimedOut as the cause; a call ending before it ends it without the cause; an
// unload ending the pool's calls ends it with errCallEnded, seen by Err and by Done.
func TestGuestContextEnds(t *testing.T) {
	calls, endCalls := context.WithCancelCause(context.Background())
	start := func(deadline time.Time) *guestContext {
		b := &binding{caller: context.Background(), deadline: deadline}
		b.guest.begin(b, calls)
		t.Cleanup(b.guest.release)
		return &b.guest
	}
	check := func(what string, g *guestContext, wantErr, wantCause error) {
		t.Helper()
		if err, cause := g.Err(), g.cause(); err != wantErr || cause != wantCause {
			t.Errorf("%s: Err %v, cause %v; want %v, %v", what, err, cause, wantErr, wantCause)
		}
	}

	g := start(time.Now().Add(time.Hour))
	check("before the deadline", g, nil, nil)
	if bindingOf(g) != g.b {
		t.Error("the guest's context does not hold its binding")
	}

	g = start(time.Now().Add(-time.Millisecond))
	check("after the deadline, by Err", g, context.DeadlineExceeded, errTimedOut)
	<-g.Done()

	g = start(time.Now().Add(10 * time.Millisecond))
	<-g.Done() // the deadline's timer, made by Done
	check("after the deadline, by Done", g, context.DeadlineExceeded, errTimedOut)

	g = start(time.Now().Add(time.Hour))
	done := g.Done()
	g.release()
	<-done
	check("after the call", g, context.Canceled, context.Canceled)
	if errors.Is(g.cause(), errTimedOut) {
		t.Error("a call that ended is taken for timed out")
	}

	unloaded := start(time.Now().Add(time.Hour))
	asleep := start(time.Now().Add(time.Hour))
	done = asleep.Done() // what a sleeping guest waits on
	endCalls(errCallEnded)
	<-done
	check("after an unload, by Done", asleep, context.Canceled, errCallEnded)
	check("after an unload, by Err", unloaded, context.Canceled, errCallEnded)
}
