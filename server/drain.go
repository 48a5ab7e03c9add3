package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
)

// A host leaving a fleet (a rolling restart, a scale-down) drains: it stops taking new
// work, lets the turns in flight finish, detaches those that do not finish in time so
// that they settle in the store where any host can read them, and tells its WebSocket
// clients to reconnect, which the load balancer sends elsewhere. docs/serving.md,
// "Draining a host", is the contract clients follow.

// StatusReconnect is the close code of a WebSocket the server closes because it is
// draining: 1012, Service Restart (RFC 6455's registry). The session is intact; the
// client reconnects to the same address (a load balancer sends it to a host that is
// ready) with ?sessionId= and goes on.
const StatusReconnect = websocket.StatusServiceRestart

// RetryAfterDraining is the Retry-After, in seconds, of a request refused with 503
// shutting_down: by then the load balancer has seen /readyz fail and sends the retry
// to another host.
const RetryAfterDraining = 1

// abortTimeout bounds the commit of the abort that settles a detached turn still
// running when Shutdown's deadline has passed.
const abortTimeout = 2 * time.Second

// Drain stops the server taking new work and lets the work in flight end, as a host
// does before it leaves a fleet; Shutdown follows. From now on /readyz answers 503,
// new sessions and turns (HTTP, WebSocket, OpenAI-compatible) are refused with 503
// shutting_down and Retry-After, and every WebSocket is closed with StatusReconnect
// as soon as no turn runs on it. Reading sessions and snapshots, cancelling a turn and
// aborting a detached one still work. Drain returns once the running turns have ended
// or, when ctx ends first, once it has asked those still running to detach: their
// clients get the turn's pending snapshot and finish reason "detached", and the turns
// run on in the background until they settle in the store, which Shutdown waits for.
// A turn of an agent whose clients keep the state cannot detach: it runs on until
// Shutdown's deadline cancels it.
func (s *Server) Drain(ctx context.Context) error {
	s.startDrain()
	s.log.InfoContext(ctx, "draining: new sessions and turns are refused, running turns may finish", "running", s.sessions.running())
	if s.sessions.awaitTurns(ctx) {
		s.log.InfoContext(ctx, "drained: no turn is running")
		return nil
	}
	n := s.sessions.detachRunning()
	s.log.InfoContext(ctx, "drain deadline: running turns detached, to settle in the store before the shutdown deadline", "detached", n, "running", s.sessions.running())
	return nil
}

// startDrain turns the server away from new work, once: Drain and Shutdown both begin
// with it.
func (s *Server) startDrain() {
	s.draining.Store(true)
	s.sessions.mu.Lock()
	s.sessions.draining = true
	s.sessions.mu.Unlock()
	s.drained()
	// MCP sessions hold event streams, which would hold the HTTP server's shutdown.
	s.mcp.close()
}

// running returns the number of turns running.
func (s *sessions) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.open {
		l.mu.Lock()
		if l.running {
			n++
		}
		l.mu.Unlock()
	}
	return n
}

// awaitTurns waits until no turn runs, or ctx ends (false).
func (s *sessions) awaitTurns(ctx context.Context) bool { return waitFor(ctx, &s.turns) }

// detachRunning asks the flow of every running turn whose stream is still being read,
// of an agent that keeps its sessions, to detach it (session.SessionFlowInput.Detach
// sent while the turn runs), and returns how many it asked. The turn's reader
// (runTurn) hands its client the pending snapshot and learns the outcome in
// awaitDetach.
func (s *sessions) detachRunning() int {
	s.mu.Lock()
	var running []*live
	for _, l := range s.open {
		l.mu.Lock()
		if l.streaming && l.detach == nil && l.agent.ServerManaged() {
			l.detach = make(chan error, 1)
			running = append(running, l)
		}
		l.mu.Unlock()
	}
	s.mu.Unlock()
	for _, l := range running {
		// Send waits until the flow takes the input: while its body starts the turn,
		// or until the connection ends.
		go func() { l.detach <- l.conn.Send(&session.SessionFlowInput{Detach: true}) }()
	}
	return len(running)
}

// awaitDetach ends the reading of a turn's stream (the turn has sent its last chunk,
// which ended), after which no drain asks it to detach. If a drain did ask, the flow
// may have taken the request only once the turn had ended: it then detaches the idle
// session, whose output (the pending snapshot) is read here. detached says whether the
// turn itself ended detached.
func (s *sessions) awaitDetach(l *live, detached bool) {
	l.mu.Lock()
	l.streaming = false
	req := l.detach
	l.mu.Unlock()
	if req == nil || detached {
		return
	}
	if err := <-req; err != nil {
		return // the connection ended first: nothing was detached
	}
	if out, err := l.conn.Output(); err == nil && out.FinishReason == session.FinishDetached {
		s.trackDetached(l.agent, out.SnapshotID)
	}
}

// trackDetached remembers a detached turn running in this process, by its pending
// snapshot, so that Shutdown waits for it to settle. Turns that settled are forgotten
// when the list grows past detachedPrune (each costs a read of its snapshot then).
func (s *sessions) trackDetached(a *deploy.Agent, pending string) {
	s.detachedMu.Lock()
	defer s.detachedMu.Unlock()
	if s.detached == nil {
		s.detached = map[string]*deploy.Agent{}
	}
	s.detached[pending] = a
	if len(s.detached) < max(detachedPrune, s.detachedLimit) || s.pruning {
		return
	}
	s.pruning = true
	all := maps.Clone(s.detached)
	go func() {
		settled := s.settledOf(all)
		s.detachedMu.Lock()
		defer s.detachedMu.Unlock()
		for id := range settled {
			delete(s.detached, id)
		}
		// A list of turns still running grows before it is read again.
		s.detachedLimit, s.pruning = 2*len(s.detached), false
	}()
}

// detachedPrune is the length of the list of detached turns at which the settled
// ones are first forgotten.
const detachedPrune = 1024

// settledOf returns those of the detached turns that have settled.
func (s *sessions) settledOf(turns map[string]*deploy.Agent) map[string]bool {
	ctx, cancel := context.WithTimeout(s.base, time.Minute)
	defer cancel()
	out := map[string]bool{}
	for id, a := range turns {
		if snap, err := a.Snapshot(ctx, id); err == nil && snap.Status != session.StatusPending {
			out[id] = true
		}
	}
	return out
}

// settleDetached waits until every detached turn running in this process has settled
// in the store, or ctx ends: then it aborts those still pending (each abort a commit
// of at most abortTimeout), so that none is left pending by a host that is gone.
func (s *sessions) settleDetached(ctx context.Context) error {
	s.detachedMu.Lock()
	turns := maps.Clone(s.detached)
	s.detachedMu.Unlock()
	if len(turns) == 0 {
		return nil
	}
	s.log.InfoContext(ctx, "waiting for detached turns to settle", "detached", len(turns))
	var mu sync.Mutex
	var errs []error
	aborted := 0
	var wg sync.WaitGroup
	for id, a := range turns {
		wg.Go(func() {
			if awaitSettled(ctx, a, id) {
				return
			}
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
			defer cancel()
			prev, _, err := a.Abort(actx, id)
			if err == nil && prev != session.StatusPending {
				return // it settled meanwhile
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("server: aborting the detached turn of snapshot %s: %w", id, err))
				return
			}
			aborted++
		})
	}
	wg.Wait()
	if aborted > 0 {
		errs = append(errs, fmt.Errorf("server: %d detached turns did not settle in time and were aborted: %w", aborted, context.Cause(ctx)))
	}
	return errors.Join(errs...)
}

// awaitSettled polls the pending snapshot, ever less often, until its turn has settled
// (true) or ctx ends (false).
func awaitSettled(ctx context.Context, a *deploy.Agent, id string) bool {
	delay := 10 * time.Millisecond
	for {
		if snap, err := a.Snapshot(ctx, id); err == nil && snap.Status != session.StatusPending {
			return true
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
			delay = min(2*delay, 500*time.Millisecond)
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}
