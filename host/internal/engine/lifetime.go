package engine

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Lifetime follows one instance: the call it is serving, so that a sleeping guest
// wakes when the call ends (wazero's nanosleep gets no context), and whether its
// module was closed (a trap, an exit, the end of a call's context). Give its
// Nanosleep to wazero.ModuleConfig.WithNanosleep and itself to
// experimental.WithCloseNotifier.
type Lifetime struct {
	mu  sync.Mutex
	ctx context.Context // the current call's, or nil between calls

	exited atomic.Bool
	code   atomic.Uint32
}

// Begin and End bracket a call (or the instantiation) running under ctx.
func (l *Lifetime) Begin(ctx context.Context) {
	l.mu.Lock()
	l.ctx = ctx // not ctx.Done(), which may make a channel: only a sleep needs one
	l.mu.Unlock()
}

// End ends what Begin began.
func (l *Lifetime) End() {
	l.mu.Lock()
	l.ctx = nil
	l.mu.Unlock()
}

// Nanosleep is the guest's WASI sleep: it returns at the end of the time asked for or
// of the current call, whichever comes first. A guest woken early is stopped by its
// engine at its next function call or loop.
func (l *Lifetime) Nanosleep(ns int64) {
	l.mu.Lock()
	var done <-chan struct{}
	if l.ctx != nil {
		done = l.ctx.Done()
	}
	l.mu.Unlock()
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

// CloseNotify implements wazero's experimental.CloseNotifier: it is called when the
// instance's module is closed.
func (l *Lifetime) CloseNotify(_ context.Context, exitCode uint32) {
	l.code.Store(exitCode)
	l.exited.Store(true)
}

// Closed reports whether the module was closed, and its exit code.
func (l *Lifetime) Closed() (bool, uint32) { return l.exited.Load(), l.code.Load() }

// TailBuffer keeps the last Max bytes written to it: the end of a guest's stderr,
// where a Go runtime panic prints its message before the trap.
type TailBuffer struct {
	Max int

	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if extra := t.buf.Len() - t.Max; extra > 0 {
		t.buf.Next(extra)
	}
	return len(p), nil
}

// String returns what the buffer holds.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// Reset empties the buffer.
func (t *TailBuffer) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Reset()
}
