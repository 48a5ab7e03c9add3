package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/terrarium-ai/terrarium/abi"
)

// SessionFlowFunc is the body of a session flow: it reads each turn's input from inCh
// until the client closes the connection, answers through resp, ends each turn with
// resp.EndTurn, and works on params.Session.
type SessionFlowFunc[Stream, State any] func(ctx context.Context, inCh <-chan *SessionFlowInput, resp *Responder[Stream], params *SessionFlowParams[Stream, State]) error

// SessionFlowParams is what a session flow body is given besides its channels.
type SessionFlowParams[Stream, State any] struct {
	// Session is the working state, also reachable from ctx (SessionFromContext).
	Session *Session[State]
	// Init is how the connection was started.
	Init *SessionFlowInit[State]
}

// SessionFlow is a stateful multi-turn agent: a bidirectional streaming action with a
// session, turn semantics and snapshots. (Seed 003 calls it Agent.)
type SessionFlow[Stream, State any] struct {
	desc     ActionDesc
	fn       SessionFlowFunc[Stream, State]
	store    SnapshotStore[State]
	callback SnapshotCallback[State]
}

// SessionFlowOption configures DefineSessionFlow.
type SessionFlowOption[State any] interface {
	applySessionFlow(*sessionFlowConfig[State])
}

type sessionFlowConfig[State any] struct {
	store    SnapshotStore[State]
	callback SnapshotCallback[State]
}

// SnapshotOption configures snapshots of a DefineSessionFlow or DefineAgent.
type SnapshotOption[State any] struct {
	store    SnapshotStore[State]
	callback SnapshotCallback[State]
}

func (o *SnapshotOption[State]) applySessionFlow(c *sessionFlowConfig[State]) {
	if o.store != nil {
		c.store = o.store
	}
	if o.callback != nil {
		c.callback = o.callback
	}
}

// WithSnapshotStore sets where snapshots are kept. With a store and no callback, a
// snapshot is taken at every turn end and, if the state changed since, at the end of
// the invocation.
func WithSnapshotStore[State any](s SnapshotStore[State]) *SnapshotOption[State] {
	return &SnapshotOption[State]{store: s}
}

// WithSnapshotCallback decides when snapshots are taken (SnapshotAlways,
// SnapshotNever, SnapshotOn, or your own function). It needs a snapshot store.
func WithSnapshotCallback[State any](cb SnapshotCallback[State]) *SnapshotOption[State] {
	return &SnapshotOption[State]{callback: cb}
}

// DefineSessionFlow creates a session flow and registers it. It panics if the name is
// taken, or if a snapshot callback is given without a store.
func DefineSessionFlow[Stream, State any](r *Registry, name string, fn SessionFlowFunc[Stream, State], opts ...SessionFlowOption[State]) *SessionFlow[Stream, State] {
	var cfg sessionFlowConfig[State]
	for _, o := range opts {
		o.applySessionFlow(&cfg)
	}
	f := newSessionFlow(name, fn, cfg)
	r.mustRegister(f)
	return f
}

func newSessionFlow[Stream, State any](name string, fn SessionFlowFunc[Stream, State], cfg sessionFlowConfig[State]) *SessionFlow[Stream, State] {
	if cfg.callback != nil && cfg.store == nil {
		panic(fmt.Sprintf("agent: session flow %q has a snapshot callback but no snapshot store (use WithSnapshotStore)", name))
	}
	if cfg.store != nil && cfg.callback == nil {
		cfg.callback = SnapshotAlways[State]()
	}
	desc := bidiDesc[*SessionFlowInit[State], *SessionFlowInput, *SessionFlowOutput[State], *SessionFlowStreamChunk[Stream]](ActionTypeSessionFlow, name)
	return &SessionFlow[Stream, State]{desc: desc, fn: fn, store: cfg.store, callback: cfg.callback}
}

// Desc implements Action.
func (f *SessionFlow[Stream, State]) Desc() ActionDesc { return f.desc }

// Name returns the flow's name.
func (f *SessionFlow[Stream, State]) Name() string { return f.desc.Name }

// SnapshotStore returns the flow's snapshot store, or nil.
func (f *SessionFlow[Stream, State]) SnapshotStore() SnapshotStore[State] { return f.store }

// StreamBidiOption configures how a session flow connection starts.
type StreamBidiOption[State any] func(*SessionFlowInit[State])

// WithState starts from state the client kept (client-managed state).
func WithState[State any](state *SessionState[State]) StreamBidiOption[State] {
	return func(i *SessionFlowInit[State]) { i.State = state }
}

// WithSnapshotID resumes from a stored snapshot (server-managed state). The next
// snapshot's parent is this one; two connections resumed from one snapshot branch.
func WithSnapshotID[State any](id string) StreamBidiOption[State] {
	return func(i *SessionFlowInit[State]) { i.SnapshotID = id }
}

// WithSessionID resumes the session's latest snapshot, or starts a new session with
// this ID if it has none.
func WithSessionID[State any](id string) StreamBidiOption[State] {
	return func(i *SessionFlowInit[State]) { i.SessionID = id }
}

// WithPromptInput sets the input a DefineAgent prompt is rendered with for this
// session, overriding the agent's default.
func WithPromptInput[State any](input any) StreamBidiOption[State] {
	return func(i *SessionFlowInit[State]) { i.PromptInput = input }
}

// ErrNoSnapshotStore is returned when resuming from a snapshot on a flow without a
// snapshot store.
var ErrNoSnapshotStore = errors.New("agent: the flow has no snapshot store")

// StreamBidi opens a connection to the flow. Resuming from a snapshot loads it first,
// so an unknown or corrupt snapshot fails here.
func (f *SessionFlow[Stream, State]) StreamBidi(ctx context.Context, opts ...StreamBidiOption[State]) (*SessionFlowConnection[Stream, State], error) {
	init := &SessionFlowInit[State]{}
	for _, o := range opts {
		o(init)
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
	return &SessionFlowConnection[Stream, State]{conn: b.start(ctx, init)}, nil
}

// newSession builds the session a connection starts with.
func (f *SessionFlow[Stream, State]) newSession(ctx context.Context, init *SessionFlowInit[State]) (*Session[State], error) {
	if init.SnapshotID != "" && init.State != nil {
		return nil, fmt.Errorf("agent: flow %q: give a snapshot ID or a state, not both", f.desc.Name)
	}
	var snap *SessionSnapshot[State]
	switch {
	case init.SnapshotID != "":
		if f.store == nil {
			return nil, fmt.Errorf("%w: flow %q cannot resume snapshot %s", ErrNoSnapshotStore, f.desc.Name, init.SnapshotID)
		}
		var err error
		if snap, err = f.store.GetSnapshot(ctx, init.SnapshotID); err != nil {
			return nil, fmt.Errorf("agent: flow %q: %w", f.desc.Name, err)
		}
		if init.SessionID != "" && init.SessionID != snap.SessionID {
			return nil, fmt.Errorf("agent: flow %q: snapshot %s belongs to session %s, not %s", f.desc.Name, init.SnapshotID, snap.SessionID, init.SessionID)
		}
	case init.SessionID != "" && f.store != nil:
		var err error
		snap, err = f.store.LatestSnapshot(ctx, init.SessionID)
		if err != nil && !errors.Is(err, ErrSnapshotNotFound) {
			return nil, fmt.Errorf("agent: flow %q: %w", f.desc.Name, err)
		}
	}
	var s *Session[State]
	if snap != nil {
		s = newSession(snap.SessionID, snap.State)
		s.parentID = snap.SnapshotID
		prev := snap.State
		s.prevState = &prev
		s.turnIndex = snap.TurnIndex + 1
	} else {
		id := init.SessionID
		if id == "" {
			id = uuid.NewString()
		}
		var st SessionState[State]
		if init.State != nil {
			st = *init.State
		}
		s = newSession(id, st)
		s.changed = true
	}
	if init.PromptInput != nil {
		s.state.PromptInput = init.PromptInput
		s.changed = true
	}
	return s, nil
}

// run wraps the flow body: session in the context, a Responder, the invocation-end
// snapshot and the final output.
func (f *SessionFlow[Stream, State]) run(ctx context.Context, sess *Session[State], init *SessionFlowInit[State], inCh <-chan *SessionFlowInput, out *outbox[*SessionFlowStreamChunk[Stream]]) (*SessionFlowOutput[State], error) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("terrarium.session", sess.ID()))
	ctx = NewSessionContext(ctx, sess)
	resp := &Responder[Stream]{
		out:         out,
		endTurn:     func(ctx context.Context) (string, error) { return f.endTurn(ctx, sess) },
		addArtifact: sess.AddArtifact,
	}
	ctx = WithStatusFunc(ctx, statusSender(resp))
	resp.ctx = ctx
	if err := f.fn(ctx, inCh, resp, &SessionFlowParams[Stream, State]{Session: sess, Init: init}); err != nil {
		return nil, err
	}
	if _, err := f.snapshot(ctx, sess, SnapshotEventInvocationEnd); err != nil {
		return nil, err
	}
	return &SessionFlowOutput[State]{SessionID: sess.ID(), State: sess.State(), SnapshotIDs: sess.NewSnapshotIDs()}, nil
}

// snapshot takes a snapshot if the callback says so, and returns its ID ("" if none
// was taken). A state unchanged since the last snapshot is not stored again.
func (f *SessionFlow[Stream, State]) snapshot(ctx context.Context, sess *Session[State], event SnapshotEvent) (string, error) {
	if f.store == nil {
		return "", nil
	}
	sess.mu.RLock()
	unchanged := !sess.changed && sess.parentID != ""
	sc := &SnapshotContext[State]{Event: event, State: sess.copyState(), PrevState: sess.prevState, TurnIndex: sess.turnIndex}
	parent := sess.parentID
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
	snap := &SessionSnapshot[State]{
		SessionID: sess.ID(),
		ParentID:  parent,
		CreatedAt: time.Now(),
		TurnIndex: sc.TurnIndex,
		Event:     event,
		State:     *sc.State,
	}
	if err := f.store.SaveSnapshot(ctx, snap); err != nil {
		return "", err
	}
	sess.mu.Lock()
	sess.parentID = snap.SnapshotID
	sess.prevState = sc.State
	sess.newSnapshotIDs = append(sess.newSnapshotIDs, snap.SnapshotID)
	// Changes made while the snapshot was being saved are not in it.
	sess.changed = false
	sess.mu.Unlock()
	trace.SpanFromContext(ctx).AddEvent("snapshot", trace.WithAttributes(
		attribute.String("terrarium.snapshot_id", snap.SnapshotID),
		attribute.String("terrarium.flow", f.desc.Name)))
	return snap.SnapshotID, nil
}

// Responder is how a session flow answers: chunks of generation, its own status,
// artifacts, and the end of each turn. Each method waits until the client takes the
// item (backpressure) and fails once the connection's context is done.
type Responder[Stream any] struct {
	out         *outbox[*SessionFlowStreamChunk[Stream]]
	ctx         context.Context
	endTurn     func(context.Context) (string, error)
	addArtifact func(*Artifact)
}

// Send sends a complete stream chunk.
func (r *Responder[Stream]) Send(chunk *SessionFlowStreamChunk[Stream]) error {
	return r.out.send(chunk)
}

// SendChunk sends a chunk of generation output.
func (r *Responder[Stream]) SendChunk(chunk *abi.GenerateResponseChunk) error {
	if chunk == nil {
		return nil
	}
	return r.out.send(&SessionFlowStreamChunk[Stream]{Chunk: chunk})
}

// SendStatus sends a status update of the flow's own type.
func (r *Responder[Stream]) SendStatus(status Stream) error {
	return r.out.send(&SessionFlowStreamChunk[Stream]{Status: status})
}

// SendArtifact records the artifact in the session state (replacing one of the same
// name) and sends it to the client.
func (r *Responder[Stream]) SendArtifact(a *Artifact) error {
	r.addArtifact(a)
	return r.out.send(&SessionFlowStreamChunk[Stream]{Artifact: a})
}

// reject tells the client its input for this turn was refused (a resume naming a tool
// request that is not pending, say): the client's Receive yields err.
func (r *Responder[Stream]) reject(err error) error {
	return r.out.send(&SessionFlowStreamChunk[Stream]{Error: &TurnError{Message: err.Error(), err: err}})
}

// EndTurn ends the answer to the current input: it takes a snapshot if the callback
// says so (streamed as SnapshotCreated), then streams EndTurn, and the client's
// Receive loop ends.
func (r *Responder[Stream]) EndTurn() error { return r.endTurnWith("") }

// endTurnWith ends the turn, reporting why on the EndTurn chunk.
func (r *Responder[Stream]) endTurnWith(reason abi.FinishReason) error {
	id, err := r.endTurn(r.ctx)
	if err != nil {
		return err
	}
	if id != "" {
		if err := r.out.send(&SessionFlowStreamChunk[Stream]{SnapshotCreated: id}); err != nil {
			return err
		}
	}
	if err := r.out.send(&SessionFlowStreamChunk[Stream]{EndTurn: true, FinishReason: reason}); err != nil {
		return err
	}
	return r.out.endTurn()
}

// endTurn takes the turn-end snapshot and moves the session to the next turn.
func (f *SessionFlow[Stream, State]) endTurn(ctx context.Context, sess *Session[State]) (string, error) {
	id, err := f.snapshot(ctx, sess, SnapshotEventTurnEnd)
	if err != nil {
		return "", err
	}
	sess.mu.Lock()
	sess.turnIndex++
	sess.mu.Unlock()
	return id, nil
}

// SessionFlowConnection is an open connection to a session flow.
type SessionFlowConnection[Stream, State any] struct {
	conn *BidiConnection[*SessionFlowInput, *SessionFlowOutput[State], *SessionFlowStreamChunk[Stream]]
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

// Close says no more input will come; the flow finishes its work and returns.
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
				if err == nil && v.EndTurn {
					// The turn signal follows the EndTurn chunk; take it now so the
					// next Receive starts with the next turn.
					c.conn.awaitTurn()
				}
				return
			}
		}
	}
}

// Output waits for the flow to finish and returns its final output.
func (c *SessionFlowConnection[Stream, State]) Output() (*SessionFlowOutput[State], error) {
	return c.conn.Output()
}

// Done is closed when the flow has finished.
func (c *SessionFlowConnection[Stream, State]) Done() <-chan struct{} { return c.conn.Done() }
