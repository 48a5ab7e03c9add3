package routes

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"

	"github.com/terrarium-ai/terrarium/abi"
)

// RespondInput is a turn's input (seed 002's RespondInput). Cancellation is the
// context's, as Go does it, instead of an AbortSignal.
type RespondInput struct {
	// History is the conversation so far, the user's new message last.
	History []*abi.Message
	// Session is where the conversation stands; nil starts a new one. It is never
	// changed: the turn returns the next state in Response.Session.
	Session *State
	// Context overrides the agent's context for this turn, key by key.
	Context map[string]any
}

// Response is a turn's result (seed 002's RespondOutput).
type Response struct {
	// Message is the answer; empty when the turn completed the route.
	Message string
	// Session is the state after the turn: route, step, data, history.
	Session *State
	// ToolCalls are the tools the turn ran, steps' and model's.
	ToolCalls []ToolCall
	// RouteComplete says the route reached EndRoute: its data is all collected, and
	// the application takes over (save it, confirm, start something else).
	RouteComplete bool
}

// Respond answers one turn: route, step, data, message. Invalid definitions, invalid
// data (ErrInvalidData: nothing is merged), strict composition refusals (ErrNotCanned)
// and model failures are errors; the input state is unchanged either way.
func (a *Agent) Respond(ctx context.Context, in RespondInput) (*Response, error) {
	return a.respond(ctx, in, nil)
}

// StreamChunk is one value of RespondStream (seed 002's StreamChunk): the answer's text
// as it arrives, then a final chunk with Done set, the state and the tool calls.
type StreamChunk struct {
	// Delta is the text new in this chunk; Accumulated, all of it so far.
	Delta       string
	Accumulated string
	Done        bool
	// On the final chunk only: the state after the turn, the tools run, and whether the
	// route completed.
	Session       *State
	ToolCalls     []ToolCall
	RouteComplete bool
}

// RespondStream is Respond streaming the answer's text as the model writes it. Its
// final chunk carries exactly what Respond returns. An error ends the stream; so does
// cancelling ctx, or breaking out of the loop.
func (a *Agent) RespondStream(ctx context.Context, in RespondInput) iter.Seq2[*StreamChunk, error] {
	return func(yield func(*StreamChunk, error) bool) {
		var (
			mu      sync.Mutex // a model may stream from a goroutine of its own
			acc     strings.Builder
			stopped bool
		)
		emit := func(delta string) error {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return errStopped
			}
			acc.WriteString(delta)
			if !yield(&StreamChunk{Delta: delta, Accumulated: acc.String()}, nil) {
				stopped = true
				return errStopped
			}
			return nil
		}
		resp, err := a.respond(ctx, in, emit)
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if err != nil {
			yield(nil, err)
			return
		}
		yield(&StreamChunk{Accumulated: acc.String(), Done: true, Session: resp.Session, ToolCalls: resp.ToolCalls, RouteComplete: resp.RouteComplete}, nil)
	}
}

// errStopped is what emit returns once the consumer stopped listening.
var errStopped = errors.New("routes: stream consumer stopped")
