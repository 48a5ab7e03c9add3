package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/tracing"
)

// SessionFlowFunc is the body of a session flow: it reads each turn's input from inCh
// until the client closes the connection, answers through resp, ends each turn with
// resp.EndTurn, and works on params.Session.
type SessionFlowFunc[Stream, State any] func(ctx context.Context, inCh <-chan *SessionFlowInput, resp *Responder[Stream], params *SessionFlowParams[Stream, State]) error

// SessionFlowParams is what a session flow body is given besides its channels.
type SessionFlowParams[Stream, State any] struct {
	// Session is the working state, also reachable from ctx (FromContext).
	Session *Session[State]
	// Init is how the connection was started.
	Init *SessionFlowInit[State]
	// Handlers are the flow's handlers (WithHandlers), for the body to run at the
	// points of its turns with agent.RunHandlers.
	Handlers []agent.Handler
}

// SessionFlow is a stateful multi-turn agent: a bidirectional streaming action with a
// session, turn semantics and snapshots. (Seed 003 calls it Agent.)
type SessionFlow[Stream, State any] struct {
	desc     agent.ActionDesc
	fn       SessionFlowFunc[Stream, State]
	store    SnapshotStore[State]
	callback SnapshotCallback[State]
	handlers []agent.Handler

	// setup prepares a connection's session before its first input (DefineAgent's
	// initial context and prompt input), so that it is part of the state a failed
	// first turn goes back to.
	setup func(*Session[State], *SessionFlowInit[State])

	// detached holds the turns running in the background in this process, by pending
	// snapshot ID, so Abort can stop them and Wait can wait for them.
	detached sync.Map // string -> *detachedRun
}

type detachedRun struct {
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once the pending snapshot is settled
}

// flowConfig is what the options of DefineSessionFlow and DefineAgent share.
type flowConfig[State any] struct {
	store    SnapshotStore[State]
	callback SnapshotCallback[State]
	handlers []agent.Handler
}

// SessionFlowOption configures DefineSessionFlow.
type SessionFlowOption[State any] interface {
	applySessionFlow(*flowConfig[State]) error
}

// FlowOption configures both DefineSessionFlow and DefineAgent: snapshots and handlers.
type FlowOption[State any] interface {
	SessionFlowOption[State]
	AgentOption[State]
}

type flowFunc[State any] func(*flowConfig[State]) error

func (f flowFunc[State]) applySessionFlow(c *flowConfig[State]) error { return f(c) }
func (f flowFunc[State]) applyAgent(c *agentConfig[State]) error      { return f(&c.flow) }

// WithSnapshotStore sets where snapshots are kept, which makes the flow's sessions
// server-managed: a client resumes them by snapshot or session ID and cannot send
// state. With a store and no callback, a snapshot is taken at every turn end and, if
// the state changed since, at the end of the invocation.
func WithSnapshotStore[State any](s SnapshotStore[State]) FlowOption[State] {
	return flowFunc[State](func(c *flowConfig[State]) error {
		if s == nil {
			return fmt.Errorf("session: %w: WithSnapshotStore(nil)", agent.ErrInvalidOption)
		}
		if c.store != nil {
			return fmt.Errorf("session: %w: WithSnapshotStore given twice", agent.ErrInvalidOption)
		}
		c.store = s
		return nil
	})
}

// WithSnapshotCallback decides when snapshots are taken (SnapshotAlways,
// SnapshotNever, SnapshotOn, or your own function). It needs a snapshot store.
func WithSnapshotCallback[State any](cb SnapshotCallback[State]) FlowOption[State] {
	return flowFunc[State](func(c *flowConfig[State]) error {
		if c.callback != nil {
			return fmt.Errorf("session: %w: WithSnapshotCallback given twice", agent.ErrInvalidOption)
		}
		c.callback = cb
		return nil
	})
}

// WithHandlers gives the flow handlers, run at the points of every turn in the order
// given: DefineAgent runs them itself, a hand-written body finds them in
// SessionFlowParams.Handlers.
func WithHandlers[State any](handlers ...agent.Handler) FlowOption[State] {
	return flowFunc[State](func(c *flowConfig[State]) error {
		c.handlers = append(c.handlers, handlers...)
		return nil
	})
}

// DefineSessionFlow creates a session flow and registers it, with its snapshot actions
// when it has a snapshot store (see SnapshotActions). It panics if the name is taken,
// an option is invalid, or a snapshot callback is given without a store.
func DefineSessionFlow[Stream, State any](r *agent.Registry, name string, fn SessionFlowFunc[Stream, State], opts ...SessionFlowOption[State]) *SessionFlow[Stream, State] {
	var cfg flowConfig[State]
	for _, o := range opts {
		if err := o.applySessionFlow(&cfg); err != nil {
			panic(fmt.Sprintf("session: flow %q: %v", name, err))
		}
	}
	f := newSessionFlow(name, fn, cfg)
	f.register(r)
	return f
}

func newSessionFlow[Stream, State any](name string, fn SessionFlowFunc[Stream, State], cfg flowConfig[State]) *SessionFlow[Stream, State] {
	if cfg.callback != nil && cfg.store == nil {
		panic(fmt.Sprintf("session: flow %q has a snapshot callback but no snapshot store (use WithSnapshotStore)", name))
	}
	if cfg.store != nil && cfg.callback == nil {
		cfg.callback = SnapshotAlways[State]()
	}
	desc := bidiDesc[*SessionFlowInit[State], *SessionFlowInput, *SessionFlowOutput[State], *SessionFlowStreamChunk[Stream]](agent.ActionTypeSessionFlow, name)
	management := "client"
	if cfg.store != nil {
		management = "server"
	}
	desc.Metadata = map[string]any{"sessionFlow": map[string]any{"stateManagement": management, "abortable": cfg.store != nil}}
	return &SessionFlow[Stream, State]{desc: desc, fn: fn, store: cfg.store, callback: cfg.callback, handlers: cfg.handlers}
}

// register puts the flow and its snapshot actions in r.
func (f *SessionFlow[Stream, State]) register(r *agent.Registry) {
	r.MustRegister(f)
	for _, a := range f.SnapshotActions() {
		r.MustRegister(a)
	}
}

// Desc implements agent.Action.
func (f *SessionFlow[Stream, State]) Desc() agent.ActionDesc { return f.desc }

// Name returns the flow's name.
func (f *SessionFlow[Stream, State]) Name() string { return f.desc.Name }

// SnapshotStore returns the flow's snapshot store, or nil.
func (f *SessionFlow[Stream, State]) SnapshotStore() SnapshotStore[State] { return f.store }

// StreamBidiOption configures how a session flow connection starts.
type StreamBidiOption[State any] interface {
	applyStreamBidi(*SessionFlowInit[State]) error
}

type initFunc[State any] func(*SessionFlowInit[State]) error

func (f initFunc[State]) applyStreamBidi(i *SessionFlowInit[State]) error { return f(i) }

// WithState starts from state the client kept (client-managed state). Its SessionID,
// if set, is the session's; a new session gets one.
func WithState[State any](state *SessionState[State]) StreamBidiOption[State] {
	return initFunc[State](func(i *SessionFlowInit[State]) error {
		if i.State != nil {
			return fmt.Errorf("session: %w: WithState given twice", agent.ErrInvalidOption)
		}
		i.State = state
		return nil
	})
}

// WithSnapshotID resumes from a stored snapshot (server-managed state). Resuming the
// session's latest snapshot continues its line; resuming an older one branches.
func WithSnapshotID[State any](id string) StreamBidiOption[State] {
	return initFunc[State](func(i *SessionFlowInit[State]) error {
		if i.SnapshotID != "" {
			return fmt.Errorf("session: %w: WithSnapshotID given twice", agent.ErrInvalidOption)
		}
		i.SnapshotID = id
		return nil
	})
}

// WithSessionID resumes the session's latest snapshot, or starts a new session with
// this ID if it has none (server-managed state).
func WithSessionID[State any](id string) StreamBidiOption[State] {
	return initFunc[State](func(i *SessionFlowInit[State]) error {
		if i.SessionID != "" {
			return fmt.Errorf("session: %w: WithSessionID given twice", agent.ErrInvalidOption)
		}
		i.SessionID = id
		return nil
	})
}

// WithPromptInput sets the input a DefineAgent prompt is rendered with for a new
// session, overriding the agent's default.
func WithPromptInput[State any](input any) StreamBidiOption[State] {
	return initFunc[State](func(i *SessionFlowInit[State]) error {
		if i.PromptInput != nil {
			return fmt.Errorf("session: %w: WithPromptInput given twice", agent.ErrInvalidOption)
		}
		i.PromptInput = input
		return nil
	})
}

// StreamBidi opens a connection to the flow. Resuming from a snapshot loads it first,
// so an unknown, corrupt or pending snapshot fails here.
func (f *SessionFlow[Stream, State]) StreamBidi(ctx context.Context, opts ...StreamBidiOption[State]) (*SessionFlowConnection[Stream, State], error) {
	init := &SessionFlowInit[State]{}
	for _, o := range opts {
		if err := o.applyStreamBidi(init); err != nil {
			return nil, err
		}
	}
	return f.Connect(ctx, init)
}

// Connect is StreamBidi with the init data given as a value, as a server decoding a
// client's request has it.
func (f *SessionFlow[Stream, State]) Connect(ctx context.Context, init *SessionFlowInit[State]) (*SessionFlowConnection[Stream, State], error) {
	sess, err := f.newSession(ctx, init)
	if err != nil {
		return nil, err
	}
	body := func(ctx context.Context, init *SessionFlowInit[State], inCh <-chan *SessionFlowInput, out *outbox[*SessionFlowStreamChunk[Stream]]) (*SessionFlowOutput[State], error) {
		return f.run(ctx, sess, init, inCh, out)
	}
	b := &BidiAction[*SessionFlowInit[State], *SessionFlowInput, *SessionFlowOutput[State], *SessionFlowStreamChunk[Stream]]{desc: f.desc, fn: body, traced: true}
	return &SessionFlowConnection[Stream, State]{conn: b.start(ctx, init), sess: sess}, nil
}

// newSession builds the session a connection starts with, enforcing who owns the state:
// a flow with a snapshot store keeps its sessions (server-managed) and accepts no state
// from a client, whose messages could otherwise claim tool requests the model never
// made; a flow without one has nothing to resume by ID (client-managed).
func (f *SessionFlow[Stream, State]) newSession(ctx context.Context, init *SessionFlowInit[State]) (*Session[State], error) {
	name := f.desc.Name
	switch {
	case init.State != nil && (init.SnapshotID != "" || init.SessionID != ""):
		return nil, fmt.Errorf("session: flow %q: %w: a client-kept state carries its own session ID; give it without a snapshot or session ID", name, ErrInvalidInit)
	case init.State != nil && f.store != nil:
		return nil, fmt.Errorf("session: flow %q: %w: its sessions are kept by the server; resume by snapshot or session ID", name, ErrServerManaged)
	case (init.SnapshotID != "" || init.SessionID != "") && f.store == nil:
		return nil, fmt.Errorf("session: flow %q: %w: its sessions are client-managed; send the session's state instead of a snapshot or session ID", name, ErrNoSnapshotStore)
	}
	var snap *SessionSnapshot[State]
	branch := false
	switch {
	case init.SnapshotID != "":
		var err error
		if snap, err = f.store.GetSnapshot(ctx, init.SnapshotID); err != nil {
			return nil, fmt.Errorf("session: flow %q: %w", name, err)
		}
		if init.SessionID != "" && init.SessionID != snap.SessionID {
			return nil, fmt.Errorf("session: flow %q: %w: snapshot %s belongs to session %s, not %s", name, ErrInvalidInit, init.SnapshotID, snap.SessionID, init.SessionID)
		}
		// Resuming the head continues the session's line, so two connections doing
		// it race and one loses; resuming an older snapshot branches.
		head, err := f.store.LatestSnapshot(ctx, snap.SessionID)
		if err != nil {
			return nil, fmt.Errorf("session: flow %q: %w", name, err)
		}
		branch = head.SnapshotID != snap.SnapshotID
	case init.SessionID != "":
		var err error
		snap, err = f.store.LatestSnapshot(ctx, init.SessionID)
		if err != nil && !errors.Is(err, ErrSnapshotNotFound) {
			return nil, fmt.Errorf("session: flow %q: %w", name, err)
		}
	}
	if snap != nil {
		if err := resumable(snap); err != nil {
			return nil, fmt.Errorf("session: flow %q: %w", name, err)
		}
		s := newSession(snap.SessionID, snap.State)
		s.parentID, s.branch = snap.SnapshotID, branch
		prev := snap.State
		s.prevState = &prev
		s.turnIndex = snap.TurnIndex + 1
		return s, nil
	}
	id := init.SessionID
	var st SessionState[State]
	if init.State != nil {
		st = *init.State
		id = st.SessionID
	}
	if id == "" {
		id = uuid.NewString()
	}
	s := newSession(id, st)
	s.changed = true
	if init.PromptInput != nil {
		s.state.PromptInput = init.PromptInput
	}
	return s, nil
}

// resumable refuses a snapshot a session cannot continue from: a pending one, whose
// turn has not ended. A failed or aborted snapshot holds the state from before its
// turn, so a session continues from it as from that state.
func resumable[State any](snap *SessionSnapshot[State]) error {
	if snap.Status == StatusPending {
		return fmt.Errorf("%w: snapshot %s is pending: its detached turn is still running; wait for it or abort it", ErrNotResumable, snap.SnapshotID)
	}
	return nil
}

// run is a connection's body: it hands the client's inputs to the flow function, which
// runs in a context of its own (following the connection's until the client detaches,
// outliving it after), and takes the invocation-end snapshot. A flow function that
// fails or panics during a turn fails that turn (Responder.FailTurn) and is called
// again for the next input, so that the connection and the session go on.
func (f *SessionFlow[Stream, State]) run(ctx context.Context, sess *Session[State], init *SessionFlowInit[State], inCh <-chan *SessionFlowInput, out *outbox[*SessionFlowStreamChunk[Stream]]) (*SessionFlowOutput[State], error) {
	span := tracing.FromContext(ctx)
	span.SetMetadata("agent", f.desc.Name)
	span.SetMetadata("sessionId", sess.ID())

	work, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	follow := context.AfterFunc(ctx, func() { cancelWork(context.Cause(ctx)) })
	detached := false
	defer func() {
		if !detached {
			cancelWork(nil)
		}
	}()
	work = agent.NewSessionContext(work, sess)
	resp := &Responder[Stream]{out: out, sess: sess, patches: &customPatcher{}, endTurn: func(ctx context.Context, reason abi.FinishReason, failure *TurnError) (string, error) {
		return f.endTurn(ctx, sess, reason, failure)
	}}
	work = agent.WithStatusFunc(work, statusSender(resp))
	work = agent.WithUsageFunc(work, resp.addUsage)
	resp.ctx = work
	sess.mu.Lock()
	sess.onCustom = resp.patches.change // streamed at the next chunk, if the turn asked
	sess.mu.Unlock()

	if f.setup != nil {
		f.setup(sess, init)
	}
	bodyIn := make(chan *SessionFlowInput)
	done := make(chan error, 1)
	params := &SessionFlowParams[Stream, State]{Session: sess, Init: init, Handlers: f.handlers}
	start := func() {
		go func() { done <- f.call(work, bodyIn, resp, params) }()
	}
	start()
	inputs := inCh
	for {
		select {
		case in, ok := <-inputs:
			if !ok {
				// The client sends no more: the body finishes its work and returns.
				close(bodyIn)
				inputs = nil
				continue
			}
			if in.Detach {
				output, err := f.detach(work, sess, resp, in, bodyIn, done, cancelWork, follow)
				if output == nil && err == nil {
					continue // refused: the connection goes on
				}
				detached = output != nil
				return output, err
			}
			resp.patches.startTurn(in.CustomPatches)
			for delivered := false; !delivered; {
				opened := sess.beginTurn()
				select {
				case bodyIn <- in:
					delivered = true
				case err := <-done:
					if opened {
						sess.endTurn() // the input never reached the body
					}
					if out, end, err := f.exited(ctx, sess, resp, err, false); end {
						return out, err
					}
					start()
				}
			}
		case err := <-done:
			if out, end, err := f.exited(ctx, sess, resp, err, inputs == nil); end {
				return out, err
			}
			start()
		}
	}
}

// call runs the flow function, a panic of it recovered into its error.
func (f *SessionFlow[Stream, State]) call(ctx context.Context, inCh <-chan *SessionFlowInput, resp *Responder[Stream], p *SessionFlowParams[Stream, State]) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("session: flow %q: %w", f.desc.Name, agent.Recovered(ctx, v, "flow", f.desc.Name, "session", p.Session.ID()))
		}
	}()
	return f.fn(ctx, inCh, resp, p)
}

// exited decides what the flow function's return means, and reports whether the
// connection ends (with its output and error). An error during a turn fails the turn
// and the connection goes on, with the function called again unless the client has
// closed the connection (closed), when it finishes; a return outside a turn, or once
// the client is gone, ends the connection.
func (f *SessionFlow[Stream, State]) exited(ctx context.Context, sess *Session[State], resp *Responder[Stream], err error, closed bool) (*SessionFlowOutput[State], bool, error) {
	if err == nil || ctx.Err() != nil || !sess.inTurn() {
		out, err := f.finish(ctx, sess, resp, err)
		return out, true, err
	}
	if ferr := resp.FailTurn(err); ferr != nil {
		return nil, true, fmt.Errorf("session: flow %q: %w (failing the turn after: %w)", f.desc.Name, ferr, err)
	}
	if closed {
		out, err := f.finish(ctx, sess, resp, nil)
		return out, true, err
	}
	return nil, false, nil
}

// finish ends an attached connection once the flow function returned: the
// invocation-end snapshot (streamed to a client still reading), then the output.
func (f *SessionFlow[Stream, State]) finish(ctx context.Context, sess *Session[State], resp *Responder[Stream], err error) (*SessionFlowOutput[State], error) {
	if err != nil {
		return nil, err
	}
	id, err := f.snapshot(ctx, sess, SnapshotEventInvocationEnd, "", nil)
	if err != nil {
		return nil, err
	}
	if id != "" {
		if err := resp.Send(&SessionFlowStreamChunk[Stream]{SnapshotCreated: id}); err != nil {
			return nil, err
		}
	}
	return f.output(sess, resp), nil
}

// output is a connection's output: a server-managed session's carries its snapshot and
// no state, a client-managed one's its state. resp gives the last turn's finish reason
// and error, when there is one.
func (f *SessionFlow[Stream, State]) output(sess *Session[State], resp *Responder[Stream]) *SessionFlowOutput[State] {
	st := sess.State()
	out := &SessionFlowOutput[State]{SessionID: sess.ID(), SnapshotIDs: sess.NewSnapshotIDs(), Artifacts: st.Artifacts}
	for _, m := range slices.Backward(st.Messages) {
		if m.Role == abi.RoleModel {
			out.Message = m
			break
		}
	}
	if resp != nil {
		out.FinishReason, out.Error = resp.last()
	}
	if f.store != nil {
		out.SnapshotID = sess.SnapshotID()
	} else {
		out.State = st
	}
	return out
}

// snapshot takes a snapshot if the callback says so, and returns its ID ("" if none
// was taken). A state unchanged since the last snapshot is not stored again, unless the
// snapshot records a failed turn (failure), and a detached session takes none until
// its turn settles.
func (f *SessionFlow[Stream, State]) snapshot(ctx context.Context, sess *Session[State], event SnapshotEvent, reason abi.FinishReason, failure *TurnError) (string, error) {
	if f.store == nil {
		return "", nil
	}
	sess.snapMu.Lock()
	defer sess.snapMu.Unlock()
	if sess.detached {
		return "", nil
	}
	sess.mu.RLock()
	unchanged := failure == nil && !sess.changed && sess.parentID != ""
	sc := &SnapshotContext[State]{Event: event, State: sess.viewState(), PrevState: sess.prevState, TurnIndex: sess.turnIndex}
	sess.mu.RUnlock()
	if unchanged {
		return "", nil
	}
	if event == SnapshotEventInvocationEnd && sc.TurnIndex > 0 {
		sc.TurnIndex-- // no turn is running: the state belongs to the last one
	}
	if !f.callback(ctx, sc) {
		return "", nil
	}
	snap := &SessionSnapshot[State]{TurnIndex: sc.TurnIndex, Event: event, Status: StatusCompleted, FinishReason: reason, State: *sc.State}
	if failure != nil {
		snap.Status, snap.Error = StatusFailed, failure
	}
	if err := f.save(ctx, sess, snap); err != nil {
		return "", err
	}
	return snap.SnapshotID, nil
}

// save stores a snapshot continuing the session's last one and makes it the session's
// parent. The caller holds sess.snapMu.
func (f *SessionFlow[Stream, State]) save(ctx context.Context, sess *Session[State], snap *SessionSnapshot[State]) error {
	sess.mu.RLock()
	snap.SessionID, snap.ParentID, snap.Branch = sess.id, sess.parentID, sess.branch
	sess.mu.RUnlock()
	snap.CreatedAt = time.Now()
	if err := f.store.SaveSnapshot(ctx, snap); err != nil {
		return err
	}
	sess.mu.Lock()
	sess.parentID, sess.branch = snap.SnapshotID, false
	prev := snap.State
	sess.prevState = &prev
	sess.newSnapshotIDs = append(sess.newSnapshotIDs, snap.SnapshotID)
	// Changes made while the snapshot was being saved are not in it.
	sess.changed = false
	sess.mu.Unlock()
	span := tracing.FromContext(ctx)
	span.SetMetadata("snapshotId", snap.SnapshotID)
	return nil
}

// endTurn takes the turn-end snapshot and moves the session to the next turn. A
// failed turn (failure) first puts the session back as the turn found it, and its
// snapshot, of status failed, records the failure with that state.
func (f *SessionFlow[Stream, State]) endTurn(ctx context.Context, sess *Session[State], reason abi.FinishReason, failure *TurnError) (string, error) {
	if failure != nil {
		sess.rollback()
	}
	id, err := f.snapshot(ctx, sess, SnapshotEventTurnEnd, reason, failure)
	if err != nil {
		return "", err
	}
	sess.mu.Lock()
	sess.turnIndex++
	sess.mu.Unlock()
	sess.endTurn()
	return id, nil
}

// Responder is how a session flow answers: chunks of generation, its own status,
// artifacts, and the end of each turn. Each method waits until the client takes the
// item (backpressure) and fails once the connection's context is done. After the
// client detached, items go nowhere and the methods return nil.
type Responder[Stream any] struct {
	out     *outbox[*SessionFlowStreamChunk[Stream]]
	ctx     context.Context
	sess    agent.AnySession
	endTurn func(context.Context, abi.FinishReason, *TurnError) (string, error)

	// patches streams the custom state's changes before each chunk, for a turn that
	// asked (SessionFlowInput.CustomPatches).
	patches *customPatcher

	mu      sync.Mutex
	reason  abi.FinishReason     // of the last turn ended
	failure *TurnError           // why the last turn failed, if it did
	usage   *abi.GenerationUsage // of the running turn's model calls so far
}

// addUsage adds a model call's usage to the running turn's.
func (r *Responder[Stream]) addUsage(_ context.Context, u *abi.GenerationUsage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.usage == nil {
		r.usage = &abi.GenerationUsage{}
	}
	r.usage.Add(u)
}

// Send sends a complete stream chunk.
func (r *Responder[Stream]) Send(chunk *SessionFlowStreamChunk[Stream]) error {
	return r.send(chunk)
}

// send streams a chunk after the custom state's change since the last one, if any and
// the turn asked for it: a client applying the patches holds, at each chunk, the state
// the turn had when the chunk was sent.
func (r *Responder[Stream]) send(chunk *SessionFlowStreamChunk[Stream]) error {
	r.flushCustom()
	return r.out.send(chunk)
}

// flushCustom streams the custom state's change since the last patch (customPatcher).
// A change that cannot be streamed is logged: it reaches the client with the next
// turn's first patch, which carries the whole state.
func (r *Responder[Stream]) flushCustom() {
	err := r.patches.flush(r.sess.CustomJSON, func(p json.RawMessage) error {
		return r.out.send(&SessionFlowStreamChunk[Stream]{CustomPatch: p})
	})
	if err != nil && r.ctx.Err() == nil {
		slog.WarnContext(r.ctx, "session: a custom state change could not be streamed", "session", r.sess.ID(), "error", err)
	}
}

// SendChunk sends a chunk of generation output.
func (r *Responder[Stream]) SendChunk(chunk *abi.GenerateResponseChunk) error {
	if chunk == nil {
		return nil
	}
	return r.send(&SessionFlowStreamChunk[Stream]{Chunk: chunk})
}

// SendStatus sends a status update of the flow's own type.
func (r *Responder[Stream]) SendStatus(status Stream) error {
	return r.send(&SessionFlowStreamChunk[Stream]{Status: status})
}

// SendArtifact records the artifact in the session state (replacing one of the same
// name) and sends it to the client.
func (r *Responder[Stream]) SendArtifact(a *abi.Artifact) error {
	r.sess.AddArtifact(a)
	return r.send(&SessionFlowStreamChunk[Stream]{Artifact: a})
}

// Refuse tells the client its input for this turn was refused (a resume naming a tool
// request that is not pending, say): the client's Receive yields err. The session
// should be left unchanged; the flow then ends the turn and goes on.
func (r *Responder[Stream]) Refuse(err error) error {
	code := abi.CodeInvalidInput
	var e *abi.Error
	if errors.As(err, &e) {
		code = e.Code
	}
	return r.send(&SessionFlowStreamChunk[Stream]{Error: &TurnError{Message: err.Error(), Code: code, Status: genkitStatus(code), err: err}})
}

// FailTurn ends the current turn as failed, for err (a model's, a tool's or a
// handler's error: DefineAgent calls it for every failure of its turns). Nothing the
// turn did is kept: the session goes back to its state when the turn's input reached
// the flow; with a snapshot store a snapshot of status failed records err and that
// state (streamed as SnapshotCreated), and the EndTurn chunk carries finish reason
// "failed" and err, which the client's Receive yields as its error. The flow then goes
// on with the next input, as after EndTurn; a detached turn settles as failed. FailTurn
// returns an error only when the connection cannot go on: the client left, or the
// snapshot could not be saved.
//
// A client that left (cancelled, or closed the connection) is no failure of the turn,
// whatever err says (often the stream's error from the client's going): FailTurn then
// records nothing and returns why the client left.
//
// A flow function that returns an error or panics during a turn has its turn failed
// this way, and is called again for the next input.
func (r *Responder[Stream]) FailTurn(err error) error {
	if cause := r.out.gone(); cause != nil {
		return cause
	}
	return r.finishTurn(FinishFailed, newTurnError(err))
}

// EndTurn ends the answer to the current input: it takes a snapshot if the callback
// says so (streamed as SnapshotCreated), then streams EndTurn, and the client's
// Receive loop ends.
func (r *Responder[Stream]) EndTurn() error { return r.EndTurnWith("") }

// EndTurnWith is EndTurn saying why the turn ended, on the EndTurn chunk and in the
// snapshot ("stop", "interrupted"...).
func (r *Responder[Stream]) EndTurnWith(reason abi.FinishReason) error {
	return r.finishTurn(reason, nil)
}

// finishTurn ends the current turn for reason, as failed with failure when it is not
// nil: it records both for the connection's output, takes the turn's snapshot and
// streams the turn's end with its usage.
func (r *Responder[Stream]) finishTurn(reason abi.FinishReason, failure *TurnError) error {
	r.mu.Lock()
	r.reason, r.failure = reason, failure
	usage := r.usage
	r.usage = nil
	r.mu.Unlock()
	id, err := r.endTurn(r.ctx, reason, failure)
	if err != nil {
		return err
	}
	return r.close(id, &SessionFlowStreamChunk[Stream]{EndTurn: true, FinishReason: reason, Error: failure, Usage: usage})
}

// close streams the end of a turn: its last custom-state patch (before the client,
// told the turn ended, may start the next one, which asks for patches anew), the
// snapshot it took, if any, then its EndTurn chunk, then the turn signal.
func (r *Responder[Stream]) close(snapshot string, end *SessionFlowStreamChunk[Stream]) error {
	r.flushCustom()
	r.patches.endTurn()
	if snapshot != "" {
		if err := r.out.send(&SessionFlowStreamChunk[Stream]{SnapshotCreated: snapshot}); err != nil {
			return err
		}
	}
	if err := r.out.send(end); err != nil {
		return err
	}
	return r.out.endTurn()
}

// last returns the finish reason of the last turn ended, and its error if it failed.
func (r *Responder[Stream]) last() (abi.FinishReason, *TurnError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason, r.failure
}

// SessionFlowConnection is an open connection to a session flow.
type SessionFlowConnection[Stream, State any] struct {
	conn *BidiConnection[*SessionFlowInput, *SessionFlowOutput[State], *SessionFlowStreamChunk[Stream]]
	sess *Session[State]
}

// Send sends one turn's input.
func (c *SessionFlowConnection[Stream, State]) Send(input *SessionFlowInput) error {
	return c.conn.Send(input)
}

// SendMessages sends messages as one turn's input.
func (c *SessionFlowConnection[Stream, State]) SendMessages(msgs ...*abi.Message) error {
	return c.conn.Send(&SessionFlowInput{Messages: msgs})
}

// SendText sends a user text message as one turn's input.
func (c *SessionFlowConnection[Stream, State]) SendText(text string) error {
	return c.SendMessages(abi.NewUserTextMessage(text))
}

// Detach sends a last input whose turn runs in the background (SessionFlowInput.Detach).
// The connection then ends, streaming nothing more: Output names the pending snapshot
// (SnapshotID) with finish reason "detached".
func (c *SessionFlowConnection[Stream, State]) Detach(input *SessionFlowInput) error {
	in := *input
	in.Detach = true
	return c.conn.Send(&in)
}

// Close says no more input will come; the flow finishes its work and returns. What it
// still streams (the invocation-end snapshot) can be read with Receive.
func (c *SessionFlowConnection[Stream, State]) Close() error { return c.conn.Close() }

// Receive iterates over the current turn's stream. It yields the EndTurn chunk last and
// then ends; call it again after the next Send. Breaking out early is fine.
func (c *SessionFlowConnection[Stream, State]) Receive() iter.Seq2[*SessionFlowStreamChunk[Stream], error] {
	return func(yield func(*SessionFlowStreamChunk[Stream], error) bool) {
		for v, err := range c.conn.Responses() {
			if err == nil && v.Error != nil {
				err = v.Error
			}
			if !yield(v, err) {
				if v != nil && v.EndTurn {
					// The turn signal follows the EndTurn chunk; take it now so the
					// next Receive starts with the next turn.
					c.conn.awaitTurn()
				}
				return
			}
		}
	}
}

// Output waits for the flow to finish and returns its final output, discarding what it
// still streams (the invocation-end snapshot: read it with Receive after Close
// instead). Do not call it while another goroutine runs Receive.
func (c *SessionFlowConnection[Stream, State]) Output() (*SessionFlowOutput[State], error) {
	return c.conn.wait(true)
}

// Done is closed when the flow has finished.
func (c *SessionFlowConnection[Stream, State]) Done() <-chan struct{} { return c.conn.Done() }
