package session

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/tracing"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// BidiFunc is the body of a bidirectional streaming action: it reads inputs from inCh
// until the client closes it, streams results on outCh and returns the final output.
// Both channels are unbuffered, so each send waits for the other side (backpressure).
// The function should return when ctx is done.
type BidiFunc[Init, In, Out, Stream any] func(ctx context.Context, init Init, inCh <-chan In, outCh chan<- Stream) (Out, error)

// ErrConnectionClosed is returned by Send after Close, and by Send once the action has
// finished.
var ErrConnectionClosed = errors.New("session: connection closed")

// BidiAction is a bidirectional streaming action: a long-lived connection over which a
// client sends inputs and receives a stream of results, then a final output.
type BidiAction[Init, In, Out, Stream any] struct {
	desc agent.ActionDesc
	fn   bidiBody[Init, In, Out, Stream]
	// traced opens a span for the connection's whole life (BidiFlow).
	traced bool
}

// bidiBody is the internal form of a body: it streams through an outbox that can also
// signal the end of a turn, which SessionFlow's Responder uses.
type bidiBody[Init, In, Out, Stream any] func(ctx context.Context, init Init, inCh <-chan In, out *outbox[Stream]) (Out, error)

// NewBidiAction returns a bidirectional action without registering it. The init,
// input, output and stream schemas of its descriptor are inferred from the type
// parameters.
func NewBidiAction[Init, In, Out, Stream any](name string, fn BidiFunc[Init, In, Out, Stream]) *BidiAction[Init, In, Out, Stream] {
	return &BidiAction[Init, In, Out, Stream]{
		desc: bidiDesc[Init, In, Out, Stream](agent.ActionTypeBidiFlow, name),
		fn: func(ctx context.Context, init Init, inCh <-chan In, out *outbox[Stream]) (Out, error) {
			return fn(ctx, init, inCh, out.ch)
		},
	}
}

// DefineBidiAction creates a bidirectional action and registers it. It panics if the
// name is taken.
func DefineBidiAction[Init, In, Out, Stream any](r *agent.Registry, name string, fn BidiFunc[Init, In, Out, Stream]) *BidiAction[Init, In, Out, Stream] {
	a := NewBidiAction(name, fn)
	r.MustRegister(a)
	return a
}

// bidiDesc describes a bidirectional action, with schemas inferred from its types.
func bidiDesc[Init, In, Out, Stream any](t agent.ActionType, name string) agent.ActionDesc {
	return agent.ActionDesc{
		Key:          agent.Key(t, name),
		Type:         t,
		Name:         name,
		InitSchema:   schema.For[Init](),
		InputSchema:  schema.For[In](),
		OutputSchema: schema.For[Out](),
		StreamSchema: schema.For[Stream](),
	}
}

// Desc implements Action.
func (a *BidiAction[Init, In, Out, Stream]) Desc() agent.ActionDesc { return a.desc }

// Name returns the action's name.
func (a *BidiAction[Init, In, Out, Stream]) Name() string { return a.desc.Name }

// BidiFlow is a BidiAction with observability: a trace span stays open for each
// connection's whole life, so sub-operations (model and tool calls) nest under it.
type BidiFlow[Init, In, Out, Stream any] struct {
	*BidiAction[Init, In, Out, Stream]
}

// DefineBidiFlow creates a traced bidirectional action and registers it. It panics if
// the name is taken.
func DefineBidiFlow[Init, In, Out, Stream any](r *agent.Registry, name string, fn BidiFunc[Init, In, Out, Stream]) *BidiFlow[Init, In, Out, Stream] {
	a := NewBidiAction(name, fn)
	a.traced = true
	r.MustRegister(a)
	return &BidiFlow[Init, In, Out, Stream]{a}
}

// BidiOption configures a connection.
type BidiOption[Init any] interface {
	applyBidi(*bidiOptions[Init]) error
}

type bidiOptions[Init any] struct {
	init Init
	set  bool
}

type bidiFunc[Init any] func(*bidiOptions[Init]) error

func (f bidiFunc[Init]) applyBidi(o *bidiOptions[Init]) error { return f(o) }

// WithInit provides the connection's initialization data.
func WithInit[Init any](init Init) BidiOption[Init] {
	return bidiFunc[Init](func(o *bidiOptions[Init]) error {
		if o.set {
			return fmt.Errorf("session: %w: WithInit given twice", agent.ErrInvalidOption)
		}
		o.init, o.set = init, true
		return nil
	})
}

// StreamBidi opens a connection: the action starts running at once and waits for
// inputs. The connection ends when the action returns, or when ctx is cancelled.
func (a *BidiAction[Init, In, Out, Stream]) StreamBidi(ctx context.Context, opts ...BidiOption[Init]) (*BidiConnection[In, Out, Stream], error) {
	var o bidiOptions[Init]
	for _, opt := range opts {
		if err := opt.applyBidi(&o); err != nil {
			return nil, err
		}
	}
	return a.start(ctx, o.init), nil
}

// start runs the body in a goroutine that ends with the connection.
func (a *BidiAction[Init, In, Out, Stream]) start(ctx context.Context, init Init) *BidiConnection[In, Out, Stream] {
	var span tracing.Span
	if a.traced {
		kind := tracing.Flow
		if a.desc.Type == agent.ActionTypeSessionFlow {
			kind = tracing.SessionFlow
		}
		ctx, span = tracing.Start(ctx, a.desc.Name, kind, init)
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &BidiConnection[In, Out, Stream]{
		ctx:     ctx,
		cancel:  cancel,
		inCh:    make(chan In),
		closing: make(chan struct{}),
		out:     &outbox[Stream]{ctx: ctx, ch: make(chan Stream), turn: make(chan struct{}), released: make(chan struct{})},
		done:    make(chan struct{}),
	}
	// Cancellation ends input and unblocks a body stuck sending to a client that is no
	// longer reading, so the body's goroutine cannot outlive the connection.
	stop := context.AfterFunc(ctx, func() {
		c.closeInput()
		c.out.drain(c.done)
	})
	go func() {
		defer cancel()
		defer stop() // before cancel: our own cancel must not start the drain
		out, err := a.fn(ctx, init, c.inCh, c.out)
		if ctx.Err() != nil {
			// The context ended first (the body may have returned anything): the
			// connection reports why it ended.
			err = context.Cause(ctx)
		}
		c.output, c.err = out, err
		span.End(out, err)
		close(c.done)
	}()
	return c
}

// outbox is the stream side of a connection: data goes out on ch, the end of a turn on
// turn. Both are unbuffered, and a body sends from one goroutine at a time, so the
// client sees data and turn ends in the order they were sent.
type outbox[Stream any] struct {
	ctx  context.Context
	ch   chan Stream
	turn chan struct{}

	releaseOnce sync.Once
	released    chan struct{} // closed by release
}

// release cuts the stream off from the client on purpose (a session flow's client
// detached): from then on sends succeed without delivering anything.
func (o *outbox[Stream]) release() {
	o.releaseOnce.Do(func() { close(o.released) })
}

// isReleased reports whether release was called.
func (o *outbox[Stream]) isReleased() bool {
	select {
	case <-o.released:
		return true
	default:
		return false
	}
}

// gone returns why the client is gone when its connection's context is done, unless
// the stream was released (a detached turn goes on without its client); nil while the
// client is there.
func (o *outbox[Stream]) gone() error {
	if o.ctx.Err() == nil || o.isReleased() {
		return nil
	}
	return context.Cause(o.ctx)
}

// send delivers one value, or fails once the connection's context is done.
func (o *outbox[Stream]) send(v Stream) error {
	return deliver(o.ctx, o.released, o.ch, v)
}

// endTurn tells the client the body finished answering the last input.
func (o *outbox[Stream]) endTurn() error {
	return deliver(o.ctx, o.released, o.turn, struct{}{})
}

// deliver sends v on ch unless the outbox is released or its context ends.
func deliver[T any](ctx context.Context, released <-chan struct{}, ch chan<- T, v T) error {
	select {
	case <-released:
		return nil
	default:
	}
	select {
	case ch <- v:
		return nil
	case <-released:
		return nil
	case <-ctx.Done():
		select {
		case <-released:
			return nil
		default:
			return context.Cause(ctx)
		}
	}
}

// drain discards whatever the body still sends until it returns.
func (o *outbox[Stream]) drain(done <-chan struct{}) {
	for {
		select {
		case <-o.ch:
		case <-o.turn:
		case <-done:
			return
		}
	}
}

// BidiConnection is an open bidirectional connection. Send is safe from many
// goroutines; Responses is meant for one consumer at a time.
type BidiConnection[In, Out, Stream any] struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by Close: aborts Sends in flight
	sending sync.WaitGroup
	inCh    chan In

	out *outbox[Stream]

	done   chan struct{}
	output Out
	err    error
}

// Send delivers an input to the action. It waits until the action takes it
// (backpressure) and fails after Close, once the action has finished, or when the
// connection's context is done.
func (c *BidiConnection[In, Out, Stream]) Send(in In) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: send after close", ErrConnectionClosed)
	}
	c.sending.Add(1)
	c.mu.Unlock()
	defer c.sending.Done()
	select {
	case c.inCh <- in:
		return nil
	case <-c.closing:
		return fmt.Errorf("%w: closed while sending", ErrConnectionClosed)
	case <-c.done:
		return fmt.Errorf("%w: the action has finished", ErrConnectionClosed)
	case <-c.ctx.Done():
		return context.Cause(c.ctx)
	}
}

// Close tells the action no more inputs will come: its input channel closes once
// Sends in flight have returned. Closing twice is harmless.
func (c *BidiConnection[In, Out, Stream]) Close() error {
	c.closeInput()
	return nil
}

func (c *BidiConnection[In, Out, Stream]) closeInput() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.closing)
	c.mu.Unlock()
	// No Send can start now, and those in flight return promptly because closing is
	// closed, so closing inCh cannot race a send.
	c.sending.Wait()
	close(c.inCh)
}

// Responses iterates over the streamed results of the current turn. It ends when the
// action ends its turn (call Responses again after the next Send), when the action
// finishes (yielding its error, if any, last) or when the context is done (yielding the
// context's error).
func (c *BidiConnection[In, Out, Stream]) Responses() iter.Seq2[Stream, error] {
	return func(yield func(Stream, error) bool) {
		var zero Stream
		for {
			select {
			case v := <-c.out.ch:
				if !yield(v, nil) {
					return
				}
			case <-c.out.turn:
				return
			case <-c.done:
				if c.err != nil {
					yield(zero, c.err)
				}
				return
			case <-c.ctx.Done():
				select {
				case <-c.done: // finished normally; its own cancel fired
					if c.err != nil {
						yield(zero, c.err)
					}
				default:
					yield(zero, context.Cause(c.ctx))
				}
				return
			}
		}
	}
}

// Output waits for the action to finish and returns its output, or returns the
// context's error if the connection's context ends first.
func (c *BidiConnection[In, Out, Stream]) Output() (Out, error) {
	return c.wait(false)
}

// wait waits for the action to finish, discarding what it streams meanwhile when drain
// is set.
func (c *BidiConnection[In, Out, Stream]) wait(drain bool) (Out, error) {
	var ch <-chan Stream
	var turn <-chan struct{}
	if drain {
		ch, turn = c.out.ch, c.out.turn
	}
	for {
		select {
		case <-ch:
		case <-turn:
		case <-c.done:
			return c.output, c.err
		case <-c.ctx.Done():
			select {
			case <-c.done:
				return c.output, c.err
			default:
				var zero Out
				return zero, context.Cause(c.ctx)
			}
		}
	}
}

// awaitTurn consumes the turn signal that follows a turn's last item.
func (c *BidiConnection[In, Out, Stream]) awaitTurn() {
	select {
	case <-c.out.turn:
	case <-c.done:
	case <-c.ctx.Done():
	}
}

// Done is closed when the action has finished.
func (c *BidiConnection[In, Out, Stream]) Done() <-chan struct{} { return c.done }
