package routes

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// RespondInput is a turn's input (seed 002's RespondInput). Cancellation is the
// context's, as Go does it, instead of an AbortSignal.
type RespondInput struct {
	// History is the conversation so far, the user's new message last.
	History []*abi.Message
	// Session is where the conversation stands; nil starts a new one. It is never
	// changed: the turn returns the next state in Response.Session.
	Session *State
	// SessionID resumes a session the agent keeps (WithPersistence) instead: its
	// State, and its messages, which come before History's in the conversation. With
	// persistence, History holds this turn's new messages (the whole conversation of a
	// new session); they are saved with the answer.
	SessionID string
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
	// Warnings are the faults the turn absorbed rather than failing (a field of the
	// wrong type dropped, prose taken for the message, a template variable missing).
	Warnings []Warning
}

// Respond answers one turn: route, step, data, message. What the model gets wrong in
// its answers is absorbed, each fault a Warning of the Response; invalid definitions,
// model and tool failures, strict composition refusals (ErrNotCanned) and, for a
// strict agent (WithStrict), invalid data (ErrInvalidData: nothing is merged) are
// errors. The input state is never changed.
func (a *Agent) Respond(ctx context.Context, in RespondInput) (*Response, error) {
	return a.run(ctx, in, nil)
}

// run is a turn of Respond or RespondStream: respond, with its session loaded from
// and saved to the agent's Manager when it keeps one.
func (a *Agent) run(ctx context.Context, in RespondInput, emit func(string) error) (*Response, error) {
	m := a.persist
	if m == nil {
		if in.SessionID != "" {
			return nil, fmt.Errorf("routes: %w: a SessionID (%q) for an agent that keeps no sessions (WithPersistence)", agent.ErrInvalidInput, in.SessionID)
		}
		return a.respond(ctx, in, emit)
	}
	added := in.History
	var loaded *SessionData
	if in.SessionID != "" {
		if in.Session != nil {
			return nil, fmt.Errorf("routes: %w: a turn resumes a Session or a SessionID, not both", agent.ErrInvalidInput)
		}
		var err error
		if loaded, err = m.Session(ctx, in.SessionID); err != nil {
			return nil, err
		}
		prior, err := m.History(ctx, in.SessionID, 0)
		if err != nil {
			return nil, err
		}
		in.History = append(prior, added...)
		in.Session = loaded.State
	}
	st := in.Session.clone()
	switch {
	case loaded != nil:
		st.ID = loaded.ID
	case st.ID == "":
		st.ID = uuid.NewString()
	}
	in.Session = st
	res, err := a.respond(ctx, in, emit)
	if err != nil || !a.autoSave {
		return res, err
	}
	if err := m.saveTurn(ctx, loaded, a.name, res, added); err != nil {
		return nil, fmt.Errorf("routes: saving the turn of session %s: %w", st.ID, err)
	}
	return res, nil
}

// StreamChunk is one value of RespondStream (seed 002's StreamChunk): the answer's text
// as it arrives, then a final chunk with Done set, the state and the tool calls.
type StreamChunk struct {
	// Delta is the text new in this chunk; Accumulated, all of it so far.
	Delta       string
	Accumulated string
	Done        bool
	// On the final chunk only: the state after the turn, the tools run, whether the
	// route completed, and the turn's warnings.
	Session       *State
	ToolCalls     []ToolCall
	RouteComplete bool
	Warnings      []Warning
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
		resp, err := a.run(ctx, in, emit)
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if err != nil {
			yield(nil, err)
			return
		}
		yield(&StreamChunk{Accumulated: acc.String(), Done: true, Session: resp.Session, ToolCalls: resp.ToolCalls, RouteComplete: resp.RouteComplete, Warnings: resp.Warnings}, nil)
	}
}

// errStopped is what emit returns once the consumer stopped listening.
var errStopped = errors.New("routes: stream consumer stopped")
