// Package testmodel provides a programmable model for tests and examples: each call
// plays the next scripted turn (stream chunks, then a response or an error), and every
// request the model receives is recorded for inspection.
//
// It is deterministic and offline; it is not a language model.
package testmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// Turn is what the model does on one call: stream Chunks, then return Response, or Err.
type Turn struct {
	Chunks   []*abi.GenerateResponseChunk
	Response *abi.GenerateResponse
	Err      error
}

// Handler computes a turn from the request, for calls past the scripted ones.
type Handler func(req *abi.GenerateRequest) Turn

// Model is a programmable model. It implements agent.Model and is safe for concurrent
// use.
type Model struct {
	name    string
	info    *abi.ModelInfo
	mu      sync.Mutex
	script  []Turn
	handler Handler
	reqs    []*abi.GenerateRequest
}

// Option configures a Model.
type Option interface {
	apply(*Model)
}

type optionFunc func(*Model)

func (f optionFunc) apply(m *Model) { f(m) }

// WithInfo sets the model's info (what it claims to support).
func WithInfo(info *abi.ModelInfo) Option { return optionFunc(func(m *Model) { m.info = info }) }

// WithHandler sets the function that answers calls once the script is used up.
func WithHandler(h Handler) Option { return optionFunc(func(m *Model) { m.handler = h }) }

// New returns a programmable model named name ("provider/model", or any registry name)
// without registering it. By default it supports multi-turn conversations, tools, system
// messages and media, and answers unscripted calls with an error.
func New(name string, opts ...Option) *Model {
	m := &Model{name: name, info: &abi.ModelInfo{
		Label:    "Programmable test model",
		Supports: &abi.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, Media: true},
	}}
	for _, o := range opts {
		o.apply(m)
	}
	return m
}

// Define returns a programmable model registered in r.
func Define(r *agent.Registry, name string, opts ...Option) *Model {
	m := New(name, opts...)
	if err := r.Register(m); err != nil {
		panic(err)
	}
	return m
}

// Push appends turns to the script; each call plays the next one.
func (m *Model) Push(turns ...Turn) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script = append(m.script, turns...)
	return m
}

// Reply appends a turn answering with a model message of the given parts.
func (m *Model) Reply(parts ...*abi.Part) *Model {
	return m.Push(Turn{Response: &abi.GenerateResponse{Message: abi.NewModelMessage(parts...), FinishReason: abi.FinishStop}})
}

// ReplyText appends a turn answering with text.
func (m *Model) ReplyText(text string) *Model { return m.Reply(abi.NewTextPart(text)) }

// Requests returns every request received so far, in order.
func (m *Model) Requests() []*abi.GenerateRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*abi.GenerateRequest(nil), m.reqs...)
}

// LastRequest returns the most recent request, or nil.
func (m *Model) LastRequest() *abi.GenerateRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reqs) == 0 {
		return nil
	}
	return m.reqs[len(m.reqs)-1]
}

// Pending returns how many scripted turns are left.
func (m *Model) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.script)
}

// Name implements agent.Model.
func (m *Model) Name() string { return m.name }

// Info implements agent.Model.
func (m *Model) Info() *abi.ModelInfo { return m.info }

// Desc implements agent.Action.
func (m *Model) Desc() agent.ActionDesc { return agent.ModelDesc(m.name, m.info) }

// Generate implements agent.Model: it records the request and plays the next turn.
func (m *Model) Generate(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, snapshot(req))
	var t Turn
	switch {
	case len(m.script) > 0:
		t = m.script[0]
		m.script = m.script[1:]
	case m.handler != nil:
		h := m.handler
		m.mu.Unlock()
		t = h(req)
		m.mu.Lock()
	default:
		m.mu.Unlock()
		return nil, fmt.Errorf("testmodel %s: no scripted turn left for call %d", m.name, len(m.Requests()))
	}
	m.mu.Unlock()
	if cb != nil {
		for _, c := range t.Chunks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := cb(ctx, c); err != nil {
				return nil, err
			}
		}
	}
	if t.Err != nil {
		return nil, t.Err
	}
	if t.Response == nil {
		return nil, fmt.Errorf("testmodel %s: scripted turn has neither a response nor an error", m.name)
	}
	return snapshotResponse(t.Response), nil
}

// snapshot deep-copies a request through JSON so later changes by the caller do not
// alter what was recorded.
func snapshot(req *abi.GenerateRequest) *abi.GenerateRequest {
	b, err := json.Marshal(req)
	if err != nil {
		return req
	}
	var c abi.GenerateRequest
	if err := json.Unmarshal(b, &c); err != nil {
		return req
	}
	return &c
}

// snapshotResponse copies a scripted response so a script can be replayed and callers
// may change what they get.
func snapshotResponse(r *abi.GenerateResponse) *abi.GenerateResponse {
	c := *r
	c.Message = r.Message.Clone()
	return &c
}

// Transcript shows a conversation one line per message, "role: part | part", with tool
// requests as call(name) and tool responses as result(name): what tests compare.
func Transcript(msgs []*abi.Message) []string {
	var out []string
	for _, m := range msgs {
		var parts []string
		for _, p := range m.Content {
			switch p.Kind {
			case abi.PartText:
				parts = append(parts, p.Text)
			case abi.PartToolRequest:
				parts = append(parts, "call("+p.ToolRequest.Name+")")
			case abi.PartToolResponse:
				parts = append(parts, "result("+p.ToolResponse.Name+")")
			}
		}
		out = append(out, string(m.Role)+": "+strings.Join(parts, " | "))
	}
	return out
}
