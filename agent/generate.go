package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/terrarium-ai/terrarium/abi"
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
	reg        *Registry
	model      Model
	tools      map[string]Tool
	middleware []Middleware
	cb         ModelStreamCallback
	onHistory  func([]*abi.Message)
}

func generate(ctx context.Context, r *Registry, opts []GenerateOption, cb ModelStreamCallback) (*abi.GenerateResponse, error) {
	var o generateOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return nil, o.err
	}
	c := &call{reg: r, model: o.model, tools: map[string]Tool{}, middleware: o.middleware, cb: cb, onHistory: o.onHistory}
	if c.model == nil && o.modelName != "" {
		m, err := r.LookupModel(o.modelName)
		if err != nil {
			return nil, err
		}
		c.model = m
	}
	tools := make([]Tool, 0, len(o.tools)+len(o.toolNames))
	for _, t := range o.tools {
		if _, dup := c.tools[t.Name()]; !dup {
			tools = append(tools, t)
		}
		c.tools[t.Name()] = t
	}
	for _, name := range o.toolNames {
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
	return wrapGenerate(c.middleware, c.run)(ctx, o.actionOptions(c.model, tools))
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
	msgs := append([]*abi.Message(nil), a.Messages...)
	index := 0 // index of the next message this call produces, for chunks
	if a.Resume != nil {
		done, err := c.resume(ctx, model, a.Resume, &msgs)
		if err != nil {
			return nil, err
		}
		if done != nil { // a restarted tool interrupted again
			c.history(done.Request.Messages)
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
			c.history(msgs)
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
			c.history(msgs)
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

func (c *call) history(msgs []*abi.Message) {
	if c.onHistory != nil {
		c.onHistory(msgs)
	}
}

// emit streams a whole message the call produced itself (tool responses) as one chunk.
func (c *call) emit(ctx context.Context, index int, m *abi.Message) error {
	if c.cb == nil {
		return nil
	}
	return c.cb(ctx, &abi.GenerateResponseChunk{Role: m.Role, Index: index, Content: m.Content})
}

func (c *call) callModel(ctx context.Context, m Model, req *abi.GenerateRequest, index int) (*abi.GenerateResponse, error) {
	var acc abi.Accumulator
	var cb ModelStreamCallback
	streamed := false
	if c.cb != nil {
		cb = func(ctx context.Context, chunk *abi.GenerateResponseChunk) error {
			out := *chunk
			out.Index = index
			if out.Role == "" {
				out.Role = abi.RoleModel
			}
			acc.Add(&out)
			streamed = true
			return c.cb(ctx, &out)
		}
	}
	resp, err := wrapModel(c.middleware, m, m.Generate)(ctx, req, cb)
	if err != nil {
		return nil, err
	}
	if resp.Message == nil {
		if !streamed {
			return nil, fmt.Errorf("agent: model %s returned a response without a message", m.Name())
		}
		resp.Message = acc.Message(abi.RoleModel)
	}
	resp.Message = completePartials(resp.Message)
	resp.Request = req
	if c.cb != nil && !streamed {
		// A model that does not stream still reaches a streaming caller: its whole
		// message, as one chunk.
		if err := c.emit(ctx, index, resp.Message); err != nil {
			return nil, err
		}
	}
	return resp, nil
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

// buildRequest assembles the model request for one turn, adding format instructions and
// documents where the model needs them in the prompt.
func buildRequest(m Model, tools []Tool, a *abi.GenerateActionOptions, msgs []*abi.Message) *abi.GenerateRequest {
	supports := m.Info().Supports
	if supports == nil {
		supports = &abi.ModelSupports{}
	}
	req := &abi.GenerateRequest{
		Messages:   stripInjected(msgs),
		Config:     a.Config,
		Tools:      make([]*abi.ToolDefinition, len(tools)),
		ToolChoice: a.ToolChoice,
		Output:     &abi.OutputConfig{},
		Docs:       a.Docs,
	}
	for i, t := range tools {
		req.Tools[i] = t.Definition()
	}
	if out := a.Output; out != nil {
		req.Output.Format = out.Format
		req.Output.ContentType = out.ContentType
		req.Output.Schema = out.JSONSchema
		var instructions string
		if out.Format == "json" {
			native := (out.Constrained == nil || *out.Constrained) &&
				(supports.Constrained == abi.ConstrainedAll || (supports.Constrained == abi.ConstrainedNoTools && len(tools) == 0))
			req.Output.Constrained = native
			if !native {
				instructions = formatInstructions(out.JSONSchema)
			}
		}
		switch v := out.Instructions.(type) {
		case string:
			instructions = v
		case bool:
			if !v {
				instructions = ""
			}
		}
		if instructions != "" {
			req.Messages = injectPart(req.Messages, abi.NewTextPart(instructions), "output")
		}
	}
	if len(a.Docs) > 0 && !supports.Context {
		req.Messages = injectPart(req.Messages, abi.NewTextPart(contextText(a.Docs)), "context")
	}
	return req
}

// formatInstructions tells a model without native constrained output what to produce.
func formatInstructions(s map[string]any) string {
	if s == nil {
		return "Output should be JSON."
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return "Output should be in JSON format and conform to the following schema:\n\n```\n" + string(b) + "\n```\n"
}

// contextText folds documents into text for a model that takes no documents.
func contextText(docs []*abi.Document) string {
	var b strings.Builder
	b.WriteString("\n\nUse the following information to complete your task:\n\n")
	for i, d := range docs {
		ref := fmt.Sprint(i)
		if id, ok := d.Metadata["ref"].(string); ok {
			ref = id
		}
		fmt.Fprintf(&b, "- [%s]: %s\n", ref, d.Text())
	}
	b.WriteString("\n")
	return b.String()
}

// injectedKey marks parts the call added to a prompt, so that they are never added twice
// when a conversation is sent back.
const injectedKey = "purpose"

// injectPart appends a part, marked with its purpose, to the last user message (or a
// new one), copying that message so the caller's history is untouched.
func injectPart(msgs []*abi.Message, p *abi.Part, purpose string) []*abi.Message {
	p.Metadata = map[string]any{injectedKey: purpose}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == abi.RoleUser {
			m := *msgs[i]
			m.Content = append(append([]*abi.Part(nil), m.Content...), p)
			out := append([]*abi.Message(nil), msgs...)
			out[i] = &m
			return out
		}
	}
	return append(append([]*abi.Message(nil), msgs...), abi.NewUserMessage(p))
}

// stripInjected drops parts an earlier call injected (format instructions, folded
// documents) from a conversation sent back as history.
func stripInjected(msgs []*abi.Message) []*abi.Message {
	out := msgs
	copied := false
	for i, m := range msgs {
		keep := m.Content[:0:0]
		dropped := false
		for _, p := range m.Content {
			if purpose, _ := p.Metadata[injectedKey].(string); purpose == "output" || purpose == "context" {
				dropped = true
				continue
			}
			keep = append(keep, p)
		}
		if !dropped {
			continue
		}
		if !copied {
			out = append([]*abi.Message(nil), msgs...)
			copied = true
		}
		c := *m
		c.Content = keep
		out[i] = &c
	}
	return out
}

// toolResult is the outcome of one tool request.
type toolResult struct {
	output    any
	interrupt *InterruptError
	err       error
}

// toolCall is one tool request to run; resumed is the metadata of a restart, nil for a
// first run.
type toolCall struct {
	req     *abi.ToolRequest
	resumed map[string]any
}

// toolCalls lists the tool requests of a message by content index.
func toolCalls(m *abi.Message) map[int]toolCall {
	calls := map[int]toolCall{}
	for i, p := range m.Content {
		if p.IsToolRequest() {
			calls[i] = toolCall{req: p.ToolRequest}
		}
	}
	return calls
}

// runTools runs tool calls concurrently and returns their results by the same keys. It
// fails with the first tool failure in key order, preferring a real failure to the
// cancellations it caused in the other tools.
func (c *call) runTools(ctx context.Context, model Model, calls map[int]toolCall) (map[int]*toolResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(map[int]*toolResult, len(calls))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, tc := range calls {
		tctx := ctx
		if tc.resumed != nil {
			tctx = context.WithValue(ctx, resumedKey{}, tc.resumed)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := c.runTool(tctx, model, tc.req)
			if res.err != nil {
				cancel()
			}
			mu.Lock()
			results[i] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	var firstErr error
	for _, i := range slices.Sorted(maps.Keys(results)) {
		err := results[i].err
		if err != nil && (firstErr == nil || errors.Is(firstErr, context.Canceled) && !errors.Is(err, context.Canceled)) {
			firstErr = err
		}
	}
	return results, firstErr
}

func interrupted(results map[int]*toolResult) bool {
	for _, r := range results {
		if r.interrupt != nil {
			return true
		}
	}
	return false
}

// markInterrupted returns a copy of the model message m annotated for a later resume:
// requests that interrupted carry "interrupt" metadata (the tool's metadata, or true),
// requests that finished carry their output as "pendingOutput".
func markInterrupted(m *abi.Message, results map[int]*toolResult) *abi.Message {
	out := m.Clone()
	for i, p := range out.Content {
		res := results[i]
		if res == nil {
			continue
		}
		if p.Metadata == nil {
			p.Metadata = map[string]any{}
		}
		if res.interrupt != nil {
			var md any = true
			if res.interrupt.Metadata != nil {
				md = res.interrupt.Metadata
			}
			p.Metadata["interrupt"] = md
			delete(p.Metadata, "pendingOutput")
		} else {
			p.Metadata["pendingOutput"] = res.output
			delete(p.Metadata, "interrupt")
		}
	}
	return out
}

// toolMessage answers the tool requests of m, in order, with their results.
func toolMessage(m *abi.Message, results map[int]*toolResult) *abi.Message {
	var parts []*abi.Part
	for i, p := range m.Content {
		if res := results[i]; res != nil {
			parts = append(parts, abi.NewToolResponsePart(&abi.ToolResponse{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Output: res.output}))
		}
	}
	return abi.NewMessage(abi.RoleTool, parts...)
}

func (c *call) runTool(ctx context.Context, model Model, req *abi.ToolRequest) *toolResult {
	t, ok := c.tools[req.Name]
	if !ok {
		return &toolResult{err: fmt.Errorf("agent: %w %q: model %s asked for it but the call offers %s", ErrUnknownTool, req.Name, model.Name(), toolList(c.tools))}
	}
	def := t.Definition()
	input := req.Input
	if input == nil && def.InputSchema != nil && def.InputSchema["type"] == "object" {
		input = map[string]any{} // models omit the arguments of a tool that takes none
	}
	v, err := schema.Compile(def.InputSchema)
	if err != nil {
		return &toolResult{err: fmt.Errorf("agent: tool %q has an invalid input schema: %w", req.Name, err)}
	}
	if err := v.Validate(input); err != nil {
		return &toolResult{err: fmt.Errorf("agent: tool %q: %w: %v", req.Name, ErrInvalidToolInput, err)}
	}
	out, err := wrapTool(c.middleware, t, t.Run)(ctx, input)
	var ie *InterruptError
	switch {
	case errors.As(err, &ie):
		return &toolResult{interrupt: ie}
	case errors.Is(err, ErrInvalidToolInput):
		return &toolResult{err: fmt.Errorf("agent: tool %q: %w", req.Name, err)}
	case err != nil:
		return &toolResult{err: fmt.Errorf("agent: tool %q: %w: %w", req.Name, ErrToolFailed, err)}
	}
	return &toolResult{output: out}
}

func toolList(tools map[string]Tool) string {
	if len(tools) == 0 {
		return "no tools"
	}
	names := slices.Sorted(maps.Keys(tools))
	for i, n := range names {
		names[i] = strconv.Quote(n)
	}
	return "tools " + strings.Join(names, ", ")
}
