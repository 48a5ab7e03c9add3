package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"weak"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/tracing"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// validators holds the compiled input schema of each tool definition, by the
// definition's identity: a definition does not change once made (a reloaded plugin
// makes new ones), and schema.Compile's own cache, keyed by the schema's JSON, encodes
// the schema at every call to find it. An entry goes when its definition does.
var validators sync.Map // weak.Pointer[abi.ToolDefinition] -> *schema.Validator

// inputValidator returns the compiled input schema of def.
func inputValidator(def *abi.ToolDefinition) (*schema.Validator, error) {
	key := weak.Make(def)
	if v, ok := validators.Load(key); ok {
		return v.(*schema.Validator), nil
	}
	v, err := schema.Compile(def.InputSchema)
	if err != nil {
		return nil, err
	}
	if _, loaded := validators.LoadOrStore(key, v); !loaded {
		runtime.AddCleanup(def, func(k weak.Pointer[abi.ToolDefinition]) { validators.Delete(k) }, key)
	}
	return v, nil
}

// toolResult is the outcome of one tool request.
type toolResult struct {
	output    any
	content   []*abi.Part
	interrupt *InterruptError
	err       error
	// failed marks an output that is a tool's error handed to the model
	// (ToolErrorsToModel).
	failed bool
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
	if len(calls) == 1 {
		// The common case, run where it is: a goroutine of its own would cost its start
		// and the growth of its stack, more than a fast tool's call.
		for i, tc := range calls {
			if tc.resumed != nil {
				ctx = context.WithValue(ctx, resumedKey{}, tc.resumed)
			}
			res := c.runTool(ctx, model, tc.req)
			return map[int]*toolResult{i: res}, res.err
		}
	}
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
		wg.Go(func() {
			res := c.runTool(tctx, model, tc.req)
			if res.err != nil {
				cancel()
			}
			mu.Lock()
			results[i] = res
			mu.Unlock()
		})
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

// runTool runs one tool request: the tool found, its input checked against its schema,
// the call made within a tool span, a panic recovered into its failure. Every failure
// names the tool (ActionError). With the tool-errors-to-model policy a failure becomes
// the tool's answer to the model, unless the call itself was cancelled or the tool
// panicked: a bug fails the turn.
func (c *call) runTool(ctx context.Context, model Model, req *abi.ToolRequest) *toolResult {
	res := c.runToolOnce(ctx, model, req)
	if res.err == nil {
		return res
	}
	res.err = &ActionError{Type: ActionTypeTool, Name: req.Name, Err: res.err}
	var pe *PanicError
	if c.returnToolErrors && ctx.Err() == nil && !errors.Is(res.err, context.Canceled) && !errors.As(res.err, &pe) {
		e := AsError(res.err)
		return &toolResult{output: map[string]any{"error": e.Message, "code": e.Code}, failed: true}
	}
	return res
}

func (c *call) runToolOnce(ctx context.Context, model Model, req *abi.ToolRequest) (res *toolResult) {
	t, ok := c.tools[req.Name]
	if !ok {
		return &toolResult{err: fmt.Errorf("agent: %w %q: model %s asked for it but the call offers %s", ErrUnknownTool, req.Name, model.Name(), toolList(c.tools))}
	}
	def := t.Definition()
	input := req.Input
	if input == nil && def.InputSchema != nil && def.InputSchema["type"] == "object" {
		input = map[string]any{} // models omit the arguments of a tool that takes none
	}
	v, err := inputValidator(def)
	if err != nil {
		return &toolResult{err: fmt.Errorf("agent: tool %q has an invalid input schema: %w", req.Name, err)}
	}
	if err := v.Validate(input); err != nil {
		return &toolResult{err: fmt.Errorf("agent: tool %q: %w: %v", req.Name, ErrInvalidToolInput, err)}
	}
	ctx, span := tracing.Start(ctx, t.Name(), tracing.Tool, input)
	defer func() {
		if v := recover(); v != nil {
			err := fmt.Errorf("agent: tool %q: %w", req.Name, Recovered(ctx, v, "tool", req.Name))
			span.End(nil, err)
			res = &toolResult{err: err}
		}
	}()
	out, err := wrapTool(c.middleware, t, t.Run)(ctx, input)
	span.End(out, err)
	var ie *InterruptError
	switch {
	case errors.As(err, &ie):
		return &toolResult{interrupt: ie}
	case errors.Is(err, ErrInvalidToolInput):
		return &toolResult{err: fmt.Errorf("agent: tool %q: %w", req.Name, err)}
	case err != nil:
		return &toolResult{err: fmt.Errorf("agent: tool %q: %w: %w", req.Name, ErrToolFailed, err)}
	}
	if mp, ok := out.(*MultipartToolResponse); ok {
		return &toolResult{output: mp.Output, content: mp.Content}
	}
	return &toolResult{output: out}
}

// responsePart is the tool response part answering the request r with the result.
func responsePart(r *abi.ToolRequest, res *toolResult) *abi.Part {
	p := abi.NewToolResponsePart(&abi.ToolResponse{Name: r.Name, Ref: r.Ref, Output: res.output, Content: res.content})
	if res.failed {
		p.Metadata = map[string]any{"error": true}
	}
	return p
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
			parts = append(parts, responsePart(p.ToolRequest, res))
		}
	}
	return abi.NewMessage(abi.RoleTool, parts...)
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
