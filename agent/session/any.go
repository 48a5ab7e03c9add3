package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"

	"github.com/terrarium-ai/terrarium/agent"
)

// AnyFlow is a session flow seen without its Stream and State types: its status
// reports and custom state travel as JSON. It is what a server or a tool serving many
// flows of different types holds; *SessionFlow implements it.
type AnyFlow interface {
	agent.Action
	// ConnectAny opens a connection from the JSON of a SessionFlowInit (empty: a new
	// session). Init that does not decode into the flow's types is an error wrapping
	// agent.ErrInvalidInput; the rest is Connect's.
	ConnectAny(ctx context.Context, init json.RawMessage) (AnyConnection, error)
}

// AnyChunk is a stream chunk of any session flow, its status as JSON.
type AnyChunk = SessionFlowStreamChunk[json.RawMessage]

// AnyOutput is the output of any session flow, its custom state as JSON.
type AnyOutput = SessionFlowOutput[json.RawMessage]

// AnyConnection is an open connection to a session flow seen without its types. Its
// methods behave as SessionFlowConnection's.
type AnyConnection interface {
	// SessionID is the ID of the connection's session, known from the start.
	SessionID() string
	Send(input *SessionFlowInput) error
	Receive() iter.Seq2[*AnyChunk, error]
	Close() error
	Output() (*AnyOutput, error)
	Done() <-chan struct{}
}

var (
	_ AnyFlow        = (*SessionFlow[struct{}, struct{}])(nil)
	_ agent.Runnable = (*SessionFlow[struct{}, struct{}])(nil)
)

// ConnectAny implements AnyFlow.
func (f *SessionFlow[Stream, State]) ConnectAny(ctx context.Context, init json.RawMessage) (AnyConnection, error) {
	in, err := decodeStrict[SessionFlowInit[State]](init)
	if err != nil {
		return nil, fmt.Errorf("session: flow %q: %w: init: %v", f.desc.Name, agent.ErrInvalidInput, err)
	}
	c, err := f.Connect(ctx, in)
	if err != nil {
		return nil, err
	}
	return &anyConnection[Stream, State]{c}, nil
}

// SessionID returns the ID of the connection's session.
func (c *SessionFlowConnection[Stream, State]) SessionID() string { return c.sess.ID() }

type anyConnection[Stream, State any] struct {
	c *SessionFlowConnection[Stream, State]
}

func (a *anyConnection[Stream, State]) SessionID() string               { return a.c.SessionID() }
func (a *anyConnection[Stream, State]) Send(in *SessionFlowInput) error { return a.c.Send(in) }
func (a *anyConnection[Stream, State]) Close() error                    { return a.c.Close() }
func (a *anyConnection[Stream, State]) Done() <-chan struct{}           { return a.c.Done() }

func (a *anyConnection[Stream, State]) Receive() iter.Seq2[*AnyChunk, error] {
	return func(yield func(*AnyChunk, error) bool) {
		for c, err := range a.c.Receive() {
			if c == nil {
				yield(nil, err)
				return
			}
			ac, cerr := anyChunk(c)
			if cerr != nil {
				yield(nil, cerr)
				return
			}
			if !yield(ac, err) {
				return
			}
		}
	}
}

func (a *anyConnection[Stream, State]) Output() (*AnyOutput, error) {
	out, err := a.c.Output()
	if err != nil || out == nil {
		return nil, err
	}
	res := &AnyOutput{SessionID: out.SessionID, SnapshotID: out.SnapshotID, SnapshotIDs: out.SnapshotIDs, Message: out.Message,
		Artifacts: out.Artifacts, FinishReason: out.FinishReason, Error: out.Error}
	if out.State != nil {
		if res.State, err = anyState(out.State); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// anyChunk converts a chunk, encoding its status.
func anyChunk[Stream any](c *SessionFlowStreamChunk[Stream]) (*AnyChunk, error) {
	out := &AnyChunk{Chunk: c.Chunk, Artifact: c.Artifact, CustomPatch: c.CustomPatch, SnapshotCreated: c.SnapshotCreated,
		Error: c.Error, EndTurn: c.EndTurn, FinishReason: c.FinishReason, Usage: c.Usage}
	if raw, ok := any(c.Status).(json.RawMessage); ok {
		out.Status = raw
		return out, nil
	}
	if reflect.ValueOf(&c.Status).Elem().IsZero() {
		return out, nil
	}
	raw, err := json.Marshal(c.Status)
	if err != nil {
		return nil, fmt.Errorf("session: encoding a status: %w", err)
	}
	out.Status = raw
	return out, nil
}

// anyState converts a state, encoding its custom state.
func anyState[State any](st *SessionState[State]) (*SessionState[json.RawMessage], error) {
	out := &SessionState[json.RawMessage]{SessionID: st.SessionID, Messages: st.Messages, Artifacts: st.Artifacts, PromptInput: st.PromptInput}
	if reflect.ValueOf(&st.Custom).Elem().IsZero() {
		return out, nil
	}
	raw, err := json.Marshal(st.Custom)
	if err != nil {
		return nil, fmt.Errorf("session: encoding the custom state: %w", err)
	}
	out.Custom = raw
	return out, nil
}

// decodeStrict decodes one JSON value into a T, refusing unknown fields; empty input
// or null is T's zero value.
func decodeStrict[T any](data json.RawMessage) (*T, error) {
	var v T
	if len(bytes.TrimSpace(data)) == 0 || string(bytes.TrimSpace(data)) == "null" {
		return &v, nil
	}
	if err := strictInto(data, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// strictInto decodes one JSON value into v, refusing unknown fields. The client's
// types decode with it in their UnmarshalJSON too, since a decoder's
// DisallowUnknownFields does not reach a type decoding itself.
func strictInto(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// RunJSON implements agent.Runnable: one turn in a new session, as Genkit's reflection
// API runs an agent without init. See RunInitJSON.
func (f *SessionFlow[Stream, State]) RunJSON(ctx context.Context, input json.RawMessage, cb agent.ChunkCallback) (json.RawMessage, error) {
	return f.RunInitJSON(ctx, nil, input, cb)
}

// RunInitJSON runs one connection from JSON: it opens it with init (a SessionFlowInit),
// sends input (a SessionFlowInput; empty or null sends nothing), streams every chunk to
// cb, closes the connection and returns its SessionFlowOutput. A refused input is
// returned as the error, after its turn's chunks; a failed turn is an outcome, as
// Genkit's agents resolve one: the output's finish reason is "failed" and its error
// says why. With a cb, the turn's stream is Genkit's, custom-state patches included
// (SessionFlowInput.CustomPatches); without one, nobody reads them and none are
// computed.
func (f *SessionFlow[Stream, State]) RunInitJSON(ctx context.Context, init, input json.RawMessage, cb agent.ChunkCallback) (json.RawMessage, error) {
	in, err := decodeStrict[SessionFlowInput](input)
	if err != nil {
		return nil, fmt.Errorf("session: flow %q: %w: input: %v", f.desc.Name, agent.ErrInvalidInput, err)
	}
	in.CustomPatches = in.CustomPatches || cb != nil
	conn, err := f.ConnectAny(ctx, init)
	if err != nil {
		return nil, err
	}
	forward := func() error {
		for c, err := range conn.Receive() {
			if c != nil && cb != nil {
				raw, merr := json.Marshal(c)
				if merr != nil {
					return fmt.Errorf("session: flow %q: encoding a chunk: %w", f.desc.Name, merr)
				}
				if err := cb(ctx, raw); err != nil {
					return err
				}
			}
			if err != nil && (c == nil || !c.EndTurn || c.FinishReason != FinishFailed) {
				return err
			}
		}
		return nil
	}
	fail := func(err error) (json.RawMessage, error) {
		conn.Close()
		conn.Output()
		return nil, err
	}
	if len(in.Messages) > 0 || in.Resume != nil || in.Detach {
		if err := conn.Send(in); err != nil {
			return fail(err)
		}
		if err := forward(); err != nil {
			return fail(err)
		}
	}
	conn.Close()
	if err := forward(); err != nil {
		return fail(err)
	}
	out, err := conn.Output()
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}
