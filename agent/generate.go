package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/tracing"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// StreamValue is one value of GenerateStream: a chunk as it arrives, then, last, the
// whole response with Done set.
type StreamValue struct {
	Done     bool
	Chunk    *abi.GenerateResponseChunk
	Response *abi.GenerateResponse
}

// Generate runs a model with the given options, runs the tools it asks for until it
// answers without asking for any, and returns its final response.
//
// When the output is requested as JSON with a schema and the model's text does not
// hold a valid value, Generate returns the response together with an error wrapping
// ErrInvalidOutput, so that the text can still be inspected.
func Generate(ctx context.Context, r *Registry, opts ...GenerateOption) (*abi.GenerateResponse, error) {
	return generate(ctx, r, opts, nil)
}

// GenerateText is Generate returning only the response's text.
func GenerateText(ctx context.Context, r *Registry, opts ...GenerateOption) (string, error) {
	resp, err := Generate(ctx, r, opts...)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

// GenerateData is Generate asking for output of type Out and returning it decoded.
func GenerateData[Out any](ctx context.Context, r *Registry, opts ...GenerateOption) (*Out, *abi.GenerateResponse, error) {
	var out Out
	opts = append(opts, WithOutputType(out))
	resp, err := Generate(ctx, r, opts...)
	if err != nil {
		return nil, resp, err
	}
	if err := resp.Output(&out); err != nil {
		return nil, resp, fmt.Errorf("agent: %w: %v", ErrInvalidOutput, err)
	}
	return &out, resp, nil
}

// GenerateStream is Generate yielding the chunks as they arrive and then the final
// response. Breaking out of the loop cancels the generation.
func GenerateStream(ctx context.Context, r *Registry, opts ...GenerateOption) iter.Seq2[*StreamValue, error] {
	return func(yield func(*StreamValue, error) bool) {
		var mu sync.Mutex // a model may call back from a goroutine of its own
		stopped := false
		cb := func(_ context.Context, c *abi.GenerateResponseChunk) error {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return errStopped
			}
			if !yield(&StreamValue{Chunk: c}, nil) {
				stopped = true
				return errStopped
			}
			return nil
		}
		resp, err := generate(ctx, r, opts, cb)
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		// A chunk taken after this (the plugin host hands on one the caller took too
		// late) would be yielded into a loop that has ended.
		stopped = true
		if err != nil {
			yield(&StreamValue{Response: resp}, err)
			return
		}
		yield(&StreamValue{Done: true, Response: resp}, nil)
	}
}

// errStopped is what a stream callback returns once the consumer stopped listening.
var errStopped = errors.New("agent: stream consumer stopped")

// call is one resolved generate call.
type call struct {
	reg              *Registry
	model            Model
	tools            map[string]Tool
	middleware       []Middleware
	returnToolErrors bool
	cb               ModelStreamCallback
}

func generate(ctx context.Context, r *Registry, opts []GenerateOption, cb ModelStreamCallback) (*abi.GenerateResponse, error) {
	cfg, err := newGenerateConfig(opts)
	if err != nil {
		return nil, err
	}
	c := &call{reg: r, model: cfg.Model, tools: map[string]Tool{}, middleware: cfg.Middleware,
		returnToolErrors: cfg.ToolErrors == ToolErrorsToModel, cb: cb}
	if c.model == nil && cfg.ModelName != "" {
		if c.model, err = r.LookupModel(cfg.ModelName); err != nil {
			return nil, err
		}
	}
	tools := make([]Tool, 0, len(cfg.Tools)+len(cfg.ToolNames))
	for _, t := range cfg.Tools {
		if _, dup := c.tools[t.Name()]; !dup {
			tools = append(tools, t)
		}
		c.tools[t.Name()] = t
	}
	for _, name := range cfg.ToolNames {
		if _, ok := c.tools[name]; ok {
			continue
		}
		t, err := r.LookupTool(name)
		if err != nil {
			return nil, err
		}
		c.tools[name] = t
		tools = append(tools, t)
	}
	return traceGenerate(wrapGenerate(c.middleware, c.run))(ctx, cfg.actionOptions(c.model, tools))
}

// traceGenerate records the whole call, middleware included, as Genkit's generate span.
func traceGenerate(next GenerateFunc) GenerateFunc {
	return func(ctx context.Context, a *abi.GenerateActionOptions) (*abi.GenerateResponse, error) {
		ctx, span := tracing.Start(ctx, "generate", tracing.Util, a)
		resp, err := next(ctx, a)
		span.End(resp, err)
		return resp, err
	}
}

// resolve finds the model and tools the (possibly middleware-changed) options name.
func (c *call) resolve(a *abi.GenerateActionOptions) (Model, []Tool, error) {
	m := c.model
	if a.Model == "" && m == nil {
		return nil, nil, fmt.Errorf("agent: %w: use WithModel or WithModelName", ErrNoModel)
	}
	if m == nil || m.Name() != a.Model {
		var err error
		if m, err = c.reg.LookupModel(a.Model); err != nil {
			return nil, nil, err
		}
	}
	tools := make([]Tool, 0, len(a.Tools))
	for _, name := range a.Tools {
		t, ok := c.tools[name]
		if !ok {
			var err error
			if t, err = c.reg.LookupTool(name); err != nil {
				return nil, nil, err
			}
			c.tools[name] = t
		}
		tools = append(tools, t)
	}
	return m, tools, nil
}

// run is the generate loop: call the model, run the tools it asks for, repeat.
func (c *call) run(ctx context.Context, a *abi.GenerateActionOptions) (*abi.GenerateResponse, error) {
	model, tools, err := c.resolve(a)
	if err != nil {
		return nil, err
	}
	if err := checkConfig(model, a.Config); err != nil {
		return nil, err
	}
	// Clipped, not copied: the loop's appends then copy a.Messages when, and only
	// when, there is a tool round, so a plain call does not copy the history.
	msgs := slices.Clip(a.Messages)
	index := 0 // index of the next message this call produces, for chunks
	if a.Resume != nil {
		done, err := c.resume(ctx, model, a.Resume, &msgs)
		if err != nil {
			return nil, err
		}
		if done != nil { // a restarted tool interrupted again
			return done, nil
		}
		if err := c.emit(ctx, index, msgs[len(msgs)-1]); err != nil {
			return nil, err
		}
		index++
	}
	maxTurns := a.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	for turn := 0; ; turn++ {
		req := buildRequest(model, tools, a, msgs)
		resp, err := c.callModel(ctx, model, req, index)
		if err != nil {
			return nil, err
		}
		reqs := resp.Message.ToolRequests()
		if len(reqs) == 0 || a.ReturnToolRequests {
			return finish(resp, a.Output)
		}
		if turn >= maxTurns {
			return nil, fmt.Errorf("agent: %w: model %s still asked for tools after %d rounds of tool calls (raise WithMaxTurns)", ErrMaxTurns, model.Name(), maxTurns)
		}
		results, err := c.runTools(ctx, model, toolCalls(resp.Message))
		if err != nil {
			return nil, err
		}
		if interrupted(results) {
			resp.Message = markInterrupted(resp.Message, results)
			resp.FinishReason = abi.FinishInterrupted
			resp.FinishMessage = interruptedMessage
			return resp, nil
		}
		toolMsg := toolMessage(resp.Message, results)
		msgs = append(msgs, resp.Message, toolMsg)
		if err := c.emit(ctx, index+1, toolMsg); err != nil {
			return nil, err
		}
		index += 2
	}
}

// emit streams a whole message the call produced itself (tool responses) as one chunk.
func (c *call) emit(ctx context.Context, index int, m *abi.Message) error {
	if c.cb == nil {
		return nil
	}
	return c.cb(ctx, &abi.GenerateResponseChunk{Role: m.Role, Index: index, Content: m.Content})
}

// callModel calls the model once. Its failures, a panic of the model's included, name
// the model (ActionError).
func (c *call) callModel(ctx context.Context, m Model, req *abi.GenerateRequest, index int) (resp *abi.GenerateResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("agent: model %s: %w", m.Name(), Recovered(ctx, v, "model", m.Name()))
		}
		if err != nil {
			resp, err = nil, &ActionError{Type: ActionTypeModel, Name: m.Name(), Err: err}
		}
	}()
	var acc abi.Accumulator
	var cb ModelStreamCallback
	streamed := false
	if c.cb != nil {
		cb = func(ctx context.Context, chunk *abi.GenerateResponseChunk) error {
			out := *chunk
			out.Index = index
			switch out.Role {
			case "":
				out.Role = abi.RoleModel
			case abi.RoleModel:
			default:
				return fmt.Errorf("agent: %w: model %s streamed a chunk with role %s", ErrInvalidResponse, m.Name(), out.Role)
			}
			acc.Add(&out)
			streamed = true
			return c.cb(ctx, &out)
		}
	}
	if len(c.middleware) == 0 {
		resp, err = generateModel(ctx, m, req, cb) // no closure to build
	} else {
		resp, err = wrapModel(c.middleware, m, generateWith(m))(ctx, req, cb)
	}
	if err != nil {
		return nil, err
	}
	if resp.Message == nil {
		if !streamed {
			return nil, fmt.Errorf("agent: %w: model %s returned a response without a message", ErrInvalidResponse, m.Name())
		}
		resp.Message = acc.Message(abi.RoleModel)
	}
	switch resp.Message.Role {
	case abi.RoleModel:
	case "":
		c := *resp.Message
		c.Role = abi.RoleModel
		resp.Message = &c
	default:
		// A message of another role would be stored as a user's or a tool's: a model
		// could forge the other side of the conversation.
		return nil, fmt.Errorf("agent: %w: model %s answered with a %s message; a model's message has role model", ErrInvalidResponse, m.Name(), resp.Message.Role)
	}
	resp.Message = completePartials(resp.Message)
	resp.Request = req
	reportUsage(ctx, resp.Usage)
	if c.cb != nil && !streamed {
		// A model that does not stream still reaches a streaming caller: its whole
		// message, as one chunk.
		if err := c.emit(ctx, index, resp.Message); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// generateWith returns generateModel for m, as the innermost function of model
// middleware.
func generateWith(m Model) ModelFunc {
	return func(ctx context.Context, req *abi.GenerateRequest, cb ModelStreamCallback) (*abi.GenerateResponse, error) {
		return generateModel(ctx, m, req, cb)
	}
}

// generateModel calls m: the request adapted to what m supports (refused, or simulated
// as Genkit does), within a model span.
func generateModel(ctx context.Context, m Model, req *abi.GenerateRequest, cb ModelStreamCallback) (*abi.GenerateResponse, error) {
	ctx, span := tracing.Start(ctx, m.Name(), tracing.Model, req)
	adapted, err := adaptRequest(m, req)
	if err != nil {
		span.End(nil, err)
		return nil, err
	}
	resp, err := m.Generate(ctx, adapted, cb)
	span.End(resp, err)
	return resp, err
}

// completePartials merges partial tool requests left in a final message into whole ones.
func completePartials(m *abi.Message) *abi.Message {
	partial := false
	for _, p := range m.Content {
		if p.IsToolRequest() && p.ToolRequest.Partial {
			partial = true
			break
		}
	}
	if !partial {
		return m
	}
	var acc abi.Accumulator
	acc.Add(&abi.GenerateResponseChunk{Content: m.Content})
	c := acc.Message(m.Role)
	c.Metadata = m.Metadata
	return c
}

// finish completes a final response: Genkit's empty usage and custom fields, and the
// check that structured output is what was asked for.
func finish(resp *abi.GenerateResponse, out *abi.GenerateActionOutputConfig) (*abi.GenerateResponse, error) {
	if resp.Usage == nil {
		resp.Usage = &abi.GenerationUsage{}
	}
	if resp.Custom == nil {
		resp.Custom = map[string]any{}
	}
	if out == nil || out.Format != "json" || len(resp.ToolRequests()) > 0 {
		return resp, nil
	}
	raw, err := abi.ExtractJSON(resp.Text())
	if err != nil {
		return resp, fmt.Errorf("agent: %w: the response holds no JSON value", ErrInvalidOutput)
	}
	if out.JSONSchema != nil {
		v, err := schema.Compile(out.JSONSchema)
		if err != nil {
			return resp, fmt.Errorf("agent: output schema: %w", err)
		}
		if err := v.ValidateJSON(raw); err != nil {
			return resp, fmt.Errorf("agent: %w: %v", ErrInvalidOutput, err)
		}
	}
	return resp, nil
}
