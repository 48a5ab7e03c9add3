package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/tenant"
)

// live is a session open on this server: one connection to its agent's flow, which
// every transport's turns on the session go through, one turn at a time.
type live struct {
	agent  *deploy.Agent
	id     string
	conn   session.AnyConnection
	ctx    context.Context // the connection's
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	running  bool
	endTurn  func()    // gives the running turn's place back to its tenant's quota
	leave    func()    // gives the session's place back to its tenant's quota, once
	attached int       // WebSocket connections holding it open
	idle     time.Time // when its last turn ended
	// head is the snapshot the connection's state was last saved to or resumed from,
	// "" until known (a new session, or one resumed from a snapshot before its first
	// turn). Another host sharing the store may have continued the session since.
	head string
	// streaming: the running turn's chunks are being read, so a drain may ask its
	// flow to detach it; detach, once a drain did, is where the request's Send ends
	// (see detachRunning).
	streaming bool
	detach    chan error
}

// sessionKey names an open session. Its agent is the agent itself, not its name:
// tenants' agents of one name are not one agent.
type sessionKey struct {
	agent *deploy.Agent
	id    string
}

// sessions holds the sessions open on this server.
type sessions struct {
	base    context.Context // the server's: connections outlive the requests that open them
	metrics *metrics
	log     *slog.Logger
	// limits are the quotas of the turns of tenants' agents; an agent without one has
	// none.
	limits map[*deploy.Agent]*tenant.Limiter
	// tenants are the tenants of tenants' agents, for the log.
	tenants map[*deploy.Agent]string

	mu       sync.Mutex
	open     map[sessionKey]*live
	draining bool
	turns    sync.WaitGroup // turns running

	// The detached turns running in this process, by pending snapshot (see
	// trackDetached).
	detachedMu    sync.Mutex
	detached      map[string]*deploy.Agent
	detachedLimit int
	pruning       bool
}

func newSessions(base context.Context, m *metrics, log *slog.Logger) *sessions {
	return &sessions{base: base, metrics: m, log: log, open: map[sessionKey]*live{}, limits: map[*deploy.Agent]*tenant.Limiter{},
		tenants: map[*deploy.Agent]string{}}
}

// initIDs are the IDs an init names, read before connecting.
type initIDs struct {
	SessionID  string `json:"sessionId"`
	SnapshotID string `json:"snapshotId"`
}

// start opens a session from a client's init (SessionFlowInit JSON). A session that is
// open already is returned as it is when the init names it by ID; resuming it from a
// snapshot while it is open is ErrSessionOpen.
func (s *sessions) start(a *deploy.Agent, init json.RawMessage) (*live, error) {
	var ids initIDs
	if len(init) > 0 {
		// ConnectAny decodes the init strictly; this only finds the IDs.
		json.Unmarshal(init, &ids)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return nil, ErrShuttingDown
	}
	if ids.SessionID != "" && ids.SnapshotID == "" {
		if l := s.open[sessionKey{a, ids.SessionID}]; l != nil {
			return l, nil
		}
	}
	l, err := s.connect(a, init)
	if err != nil {
		return nil, err
	}
	if s.open[sessionKey{a, l.id}] != nil {
		l.close()
		return nil, fmt.Errorf("%w: session %s: close it first, or resume it by its session ID", ErrSessionOpen, l.id)
	}
	s.add(l)
	return l, nil
}

// get returns the open session, or opens a session the agent keeps: after a restart,
// once it was closed for idleness, or when another host sharing the store ran a turn
// of it since its last turn here (then the open connection is stale: its next commit
// would conflict, so it is closed and the session reopened from the store's head).
// The store is read without holding s.mu, which every request takes.
func (s *sessions) get(ctx context.Context, a *deploy.Agent, id string) (*live, error) {
	key := sessionKey{a, id}
	s.mu.Lock()
	draining, l := s.draining, s.open[key]
	s.mu.Unlock()
	if draining {
		return nil, ErrShuttingDown
	}
	if l != nil && !a.ServerManaged() {
		return l, nil
	}
	head, err := a.Head(ctx, id)
	if err != nil {
		return nil, err
	}
	if l != nil {
		// Checked and removed under s.mu, which claim takes too: a turn claiming the
		// session meanwhile keeps it.
		s.mu.Lock()
		cur := s.open[key]
		evict := cur == l && l.stale(head)
		if evict {
			s.removeLocked(l)
		}
		s.mu.Unlock()
		if !evict && cur != nil {
			return cur, nil
		}
		if evict {
			// Its state is the snapshot it continues, so closing saves nothing.
			l.close()
		}
	}
	if head == "" {
		return nil, fmt.Errorf("%w: agent %s has no session %q", ErrSessionNotFound, a.Name, id)
	}
	init, _ := json.Marshal(initIDs{SessionID: id})
	fresh, err := s.connect(a, init)
	if err != nil {
		return nil, err
	}
	// The connection resumed from head, or from a later snapshot if another host
	// committed meanwhile: then the next turn here reopens it once more.
	fresh.head = head
	s.mu.Lock()
	if s.draining || s.open[key] != nil {
		l, draining := s.open[key], s.draining
		s.mu.Unlock()
		fresh.close()
		if draining {
			return nil, ErrShuttingDown
		}
		return l, nil // another request opened it first
	}
	s.add(fresh)
	s.mu.Unlock()
	return fresh, nil
}

// stale reports whether the session, idle, continues an older snapshot than the
// store's head: another host ran a turn of it since. A WebSocket holding it does not
// keep it: its next turn would conflict, so it follows the session reopened instead.
func (l *live) stale(head string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.running && l.head != "" && l.head != head
}

// follow returns the session a WebSocket holding l runs its next turn on: l, or the
// session get reopened in its place (from the store's head, when another host ran a
// turn of it; or after it was closed). The socket's hold moves with it.
func (s *sessions) follow(ctx context.Context, l *live) (*live, error) {
	cur, err := s.get(ctx, l.agent, l.id)
	if err != nil || cur == l {
		return cur, err
	}
	cur.attach(1)
	l.attach(-1)
	return cur, nil
}

// peek returns the open session, or nil.
func (s *sessions) peek(a *deploy.Agent, id string) *live {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[sessionKey{a, id}]
}

func (s *sessions) connect(a *deploy.Agent, init json.RawMessage) (*live, error) {
	leave := func() {}
	if q := s.limits[a]; q != nil {
		var err error
		if leave, err = q.OpenSession(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancelCause(s.base)
	conn, err := a.Flow().ConnectAny(ctx, init)
	if err != nil {
		cancel(nil)
		leave()
		return nil, err
	}
	return &live{agent: a, id: conn.SessionID(), conn: conn, ctx: ctx, cancel: cancel, idle: time.Now(), leave: leave}, nil
}

// add registers an open session; the caller holds s.mu.
func (s *sessions) add(l *live) {
	s.open[sessionKey{l.agent, l.id}] = l
	s.metrics.liveSessions.Add(s.base, 1)
}

// remove forgets an open session whose connection ended or is being closed.
func (s *sessions) remove(l *live) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(l)
}

// removeLocked is remove for a caller holding s.mu.
func (s *sessions) removeLocked(l *live) {
	k := sessionKey{l.agent, l.id}
	if s.open[k] == l {
		delete(s.open, k)
		s.metrics.liveSessions.Add(s.base, -1)
		l.leave()
	}
}

// admit waits for room for a turn of the agent within its tenant's quotas
// (tenant.Limiter.StartTurn), or fails with its *tenant.QuotaError or ctx's cause. It
// holds no lock while a turn waits in its tenant's line. claim or turn must follow,
// with done.
func (s *sessions) admit(ctx context.Context, a *deploy.Agent) (done func(), err error) {
	q := s.limits[a]
	if q == nil {
		return func() {}, nil
	}
	return q.StartTurn(ctx)
}

// turn runs one turn on an open session, admitted with done: it sends the input and
// hands every chunk of the turn to emit. Once emit fails (the client left), the turn
// still runs to its end, unseen, so that it is snapshotted as usual. A second turn at
// once is ErrSessionBusy. out is the connection's output when the turn ended it
// without an error (a detach).
func (s *sessions) turn(l *live, done func(), in *session.SessionFlowInput, emit func(*session.AnyChunk) error) (out *session.AnyOutput, err error) {
	if err := s.claim(l, done); err != nil {
		return nil, err
	}
	_, out, err = s.run(l, in, emit)
	return out, err
}

// claim marks the session as running a turn admitted with done, or fails with
// ErrSessionBusy or ErrShuttingDown (and calls done). run must follow, which calls
// done as the turn ends.
func (s *sessions) claim(l *live, done func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		done()
		return ErrShuttingDown
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running {
		done()
		return fmt.Errorf("%w: session %s", ErrSessionBusy, l.id)
	}
	l.endTurn = done
	l.running = true
	s.turns.Add(1)
	return nil
}

// run runs the turn claimed on the session, and reports whether the session's
// connection ended with it (detached, halted, cancelled, or failed beyond a turn) and,
// when it ended without an error, its output. The turn's last chunk (EndTurn) is handed
// to emit only once the session is free again, so a client that answers it with the
// next turn at once never finds the session busy. A failed turn is an outcome, not an
// error: it ends with its EndTurn chunk (finish reason failed, and the error), is
// logged and counted by code, and the connection goes on. A turn the client cancelled
// ends with an EndTurn chunk of finish reason aborted.
func (s *sessions) run(l *live, in *session.SessionFlowInput, emit func(*session.AnyChunk) error) (ended bool, out *session.AnyOutput, err error) {
	start := time.Now()
	listening := true
	var last *session.AnyChunk
	snapshot := "" // the last one the turn created
	forward := func(c *session.AnyChunk) {
		if listening && emit(c) != nil {
			listening = false
		}
	}
	finished := false
	defer func() {
		if !finished {
			// A panic (in emit: a client's writer) left the turn midway. Its connection
			// cannot go on, but the session and the turn's place are free again.
			s.remove(l)
			l.cancel(errTurnPanicked)
			s.release(l, "")
		}
	}()
	out, err = s.runTurn(l, in, func(c *session.AnyChunk) error {
		if c.SnapshotCreated != "" {
			snapshot = c.SnapshotCreated
			l.mu.Lock()
			l.head = c.SnapshotCreated
			l.mu.Unlock()
		}
		if c.EndTurn {
			last = c
			return nil
		}
		forward(c)
		return nil
	})
	finished = true
	detached := "" // the pending snapshot of a turn going on in the background
	if out != nil && out.FinishReason == session.FinishDetached {
		// Detached by its client or by a drain: the turn runs on in this process until
		// it settles its pending snapshot.
		detached = out.SnapshotID
		s.trackDetached(l.agent, detached)
		if !in.Detach {
			// A drain detached it: its client, still reading, learns the pending
			// snapshot as the turn's end (a client's own detach is answered with it).
			forward(&session.AnyChunk{SnapshotCreated: detached})
			last = &session.AnyChunk{EndTurn: true, FinishReason: session.FinishDetached}
		}
	}
	if errors.Is(err, ErrCancelled) {
		// The client's doing: the turn is aborted, not failed, and the session resumes
		// from its last snapshot.
		last, err = &session.AnyChunk{EndTurn: true, FinishReason: session.FinishAborted}, nil
	}
	s.account(l, start, last, snapshot, err)
	// Read while the turn holds the session: once it is free, get may close the
	// connection in favour of a newer head, which does not end the session.
	ended = l.ctx.Err() != nil
	s.release(l, detached)
	if last != nil && listening {
		emit(last)
	}
	return ended, out, err
}

// errTurnPanicked is the cause with which a session is closed when serving its turn
// panicked.
var errTurnPanicked = errors.New("serving the turn failed")

// release frees the session a turn ran on, and gives the turn's place back to its
// tenant's quota: at once, or once the turn ends when it goes on in the background,
// detached with the pending snapshot detached.
func (s *sessions) release(l *live, detached string) {
	l.mu.Lock()
	l.running, l.idle = false, time.Now()
	endTurn := l.endTurn
	l.mu.Unlock()
	s.endTurnAfter(l.agent, detached, endTurn)
	if q := s.limits[l.agent]; q != nil {
		// Measured before the client hears the turn ended, so that its next turn is
		// admitted by what this one stored.
		if err := q.MeasureStorage(s.base); err != nil {
			s.log.WarnContext(s.base, "stored bytes not measured: the storedBytes quota goes by the last measure", "error", err)
		}
	}
	s.turns.Done()
}

// endTurnAfter gives a turn of the agent its place back (done) once the turn ends: at
// once, or, when it goes on in the background detached with the pending snapshot
// detached, once that settles (or the server stops).
func (s *sessions) endTurnAfter(a *deploy.Agent, detached string, done func()) {
	if detached == "" {
		done()
		return
	}
	go func() {
		defer done()
		defer s.recoverGoroutine("waiting for a detached turn", "agent", a.Name, "snapshot", detached)
		if _, err := a.Wait(s.base, detached); err != nil && s.base.Err() == nil {
			s.log.WarnContext(s.base, "a detached turn's end was not seen: its place in the tenant's turns is given back now",
				"agent", a.Name, "snapshot", detached, "error", err)
		}
	}()
}

// recoverGoroutine, deferred by a goroutine the server runs for a client, stops a
// panic there from ending the process: it is logged, once, with its stack.
func (s *sessions) recoverGoroutine(what string, args ...any) {
	if v := recover(); v != nil {
		s.log.ErrorContext(s.base, "panic "+what, append(args, "panic", v, "stack", string(debug.Stack()))...)
	}
}

// account records a turn's outcome in the metrics and, for a failed turn, in the log:
// one line naming the tenant, agent, session, the failed turn's snapshot, the error's
// code and the model, tool or handler that raised it, and how long the turn took. The
// error's message is not logged: it may quote the user's input or a tool's output.
func (s *sessions) account(l *live, start time.Time, last *session.AnyChunk, snapshot string, err error) {
	d := time.Since(start)
	var failure *session.TurnError
	if err == nil && last != nil && last.FinishReason == session.FinishFailed {
		failure = last.Error
	}
	aborted := err == nil && last != nil && last.FinishReason == session.FinishAborted
	s.metrics.turn(s.base, l.agent.Name, d, failure, aborted, err)
	if failure == nil {
		return
	}
	attrs := []any{"agent", l.agent.Name, "session", l.id, "snapshot", snapshot, "code", failure.Code, "duration", d}
	if t := s.tenants[l.agent]; t != "" {
		attrs = append(attrs, "tenant", t)
	}
	for _, a := range [][2]string{{"model", failure.Model}, {"tool", failure.Tool}, {"handler", failure.Handler}} {
		if a[1] != "" {
			attrs = append(attrs, a[0], a[1])
		}
	}
	s.log.ErrorContext(s.base, "turn failed", attrs...)
}

// runTurn sends the input and hands the turn's chunks to emit, reading them all
// whatever emit says. It returns the error of a refused turn (its chunk's, before the
// EndTurn chunk) or of the connection; a failed turn's is on its EndTurn chunk. When
// the turn ended the connection without an error (a detach), it returns its output.
func (s *sessions) runTurn(l *live, in *session.SessionFlowInput, emit func(*session.AnyChunk) error) (out *session.AnyOutput, err error) {
	l.mu.Lock()
	l.streaming, l.detach = true, nil
	l.mu.Unlock()
	ended := func() {
		select {
		case <-l.conn.Done():
			// Detached, halted, failed or cancelled: the connection is over.
			if o, err := l.conn.Output(); err == nil {
				out = o
			}
		default:
		}
		s.awaitDetach(l, out != nil && out.FinishReason == session.FinishDetached)
		select {
		case <-l.conn.Done():
		case <-l.ctx.Done():
			// Cancelled or halted: the flow function may still be winding down (its
			// context follows the connection's from a goroutine, and a model may be
			// slow to see it). The session reopens from its last snapshot only once it
			// has, so that two flows of one session never run at once.
			s.awaitEnd(l)
		default:
			return
		}
		s.remove(l)
		l.cancel(nil)
	}
	if err := l.conn.Send(in); err != nil {
		ended()
		if cause := context.Cause(l.ctx); cause != nil {
			err = cause
		}
		return out, err
	}
	var refused error
	for c, err := range l.conn.Receive() {
		if c == nil {
			ended()
			return out, err
		}
		if err != nil && !c.EndTurn && refused == nil {
			refused = err
		}
		emit(c)
	}
	ended()
	return out, refused
}

// flowEndTimeout bounds how long a cancelled turn waits for its flow function to end
// before the session may be reopened: a model that ignores its context cannot hold the
// session (or the cancelled turn's answer) longer.
const flowEndTimeout = 5 * time.Second

// awaitEnd waits, at most flowEndTimeout, for the connection's flow function to end.
func (s *sessions) awaitEnd(l *live) {
	t := time.NewTimer(flowEndTimeout)
	defer t.Stop()
	select {
	case <-l.conn.Done():
	case <-t.C:
		s.log.WarnContext(s.base, "a cancelled turn's flow is still running; the session reopens without it", "session", l.id, "after", flowEndTimeout)
	}
}

// cancelTurn ends the session's running turn, and with it the session's connection:
// what the turn changed since the last snapshot is lost, and the next turn resumes
// from that snapshot.
func (s *sessions) cancelTurn(l *live) error {
	l.mu.Lock()
	running := l.running
	l.mu.Unlock()
	if !running {
		return fmt.Errorf("%w: session %s", ErrNoRunningTurn, l.id)
	}
	l.cancel(ErrCancelled)
	return nil
}

// closeSession closes an open session's connection, which saves a last snapshot if its
// state changed since the last one. A running turn makes it ErrSessionBusy.
func (s *sessions) closeSession(l *live) error {
	l.mu.Lock()
	running := l.running
	l.mu.Unlock()
	if running {
		return fmt.Errorf("%w: session %s", ErrSessionBusy, l.id)
	}
	s.remove(l)
	return l.close()
}

// close closes the connection and waits for the flow to finish.
func (l *live) close() error {
	l.conn.Close()
	_, err := l.conn.Output()
	l.cancel(nil)
	l.leave()
	return err
}

// list returns the open sessions of an agent, with whether a turn runs on each.
func (s *sessions) list(a *deploy.Agent) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for k, l := range s.open {
		if k.agent == a {
			l.mu.Lock()
			out[k.id] = l.running
			l.mu.Unlock()
		}
	}
	return out
}

// attach marks a session as held open by a WebSocket connection, or releases it.
func (l *live) attach(delta int) {
	l.mu.Lock()
	l.attached += delta
	l.mu.Unlock()
}

// tryAttach attaches a WebSocket connection to the session unless max hold it
// already, and reports whether it did.
func (l *live) tryAttach(max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.attached >= max {
		return false
	}
	l.attached++
	return true
}

// closeIdle closes the sessions no turn ran on since before, that no WebSocket holds.
// They stay kept (if their agent keeps sessions) and reopen on their next turn.
func (s *sessions) closeIdle(before time.Time) {
	s.mu.Lock()
	var idle []*live
	for _, l := range s.open {
		l.mu.Lock()
		if !l.running && l.attached == 0 && l.idle.Before(before) {
			idle = append(idle, l)
		}
		l.mu.Unlock()
	}
	s.mu.Unlock()
	for _, l := range idle {
		s.closeSession(l)
	}
}

// shutdown stops new turns, lets running ones finish until ctx ends (then cancels
// them), and closes every open session no turn runs on, so their last snapshots are
// saved. A session whose turn was cancelled has nothing left to save (what the turn
// changed is lost): it ends with its flow, unwaited for.
func (s *sessions) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	var err error
	if !waitFor(ctx, &s.turns) {
		err = fmt.Errorf("server: running turns did not finish in time and were cancelled: %w", context.Cause(ctx))
		s.mu.Lock()
		for _, l := range s.open {
			l.cancel(ErrShuttingDown)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	all := make([]*live, 0, len(s.open))
	for _, l := range s.open {
		all = append(all, l)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range all {
		wg.Go(func() { s.closeSession(l) }) // ErrSessionBusy: a turn runs on it still
	}
	wg.Wait()
	return err
}
