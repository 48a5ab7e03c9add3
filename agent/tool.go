package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// Tool is a tool action: a function a model may ask to run. Native Go tools (NewTool)
// and tools served by plugins implement it alike.
type Tool interface {
	Action
	Name() string
	// Definition is what the model sees: name, description and schemas. It does not
	// change once the tool is made: its input schema is compiled once, for it.
	Definition() *abi.ToolDefinition
	// Run runs the tool with a JSON-decoded input that already matches the input schema.
	// A tool that needs outside input first returns an error made by Interrupt.
	Run(ctx context.Context, input any) (output any, err error)
}

// ToolOption configures NewTool and DefineTool.
type ToolOption interface {
	applyTool(*abi.ToolDefinition) error
}

type toolFunc func(*abi.ToolDefinition) error

func (f toolFunc) applyTool(d *abi.ToolDefinition) error { return f(d) }

// WithToolInputSchema replaces the input schema inferred from the tool's input type.
func WithToolInputSchema(s map[string]any) ToolOption {
	return toolFunc(func(d *abi.ToolDefinition) error {
		if _, err := schema.Compile(s); err != nil {
			return fmt.Errorf("agent: %w: WithToolInputSchema: %w", ErrInvalidOption, err)
		}
		d.InputSchema = s
		return nil
	})
}

// WithToolOutputSchema replaces the output schema inferred from the tool's output type.
func WithToolOutputSchema(s map[string]any) ToolOption {
	return toolFunc(func(d *abi.ToolDefinition) error {
		if _, err := schema.Compile(s); err != nil {
			return fmt.Errorf("agent: %w: WithToolOutputSchema: %w", ErrInvalidOption, err)
		}
		d.OutputSchema = s
		return nil
	})
}

// WithToolMetadata attaches metadata to the tool's definition.
func WithToolMetadata(md map[string]any) ToolOption {
	return toolFunc(func(d *abi.ToolDefinition) error {
		d.Metadata = md
		return nil
	})
}

// MultipartToolResponse is what a tool returns to answer with content parts (images,
// documents, text for the model to read) besides or instead of its output: Output
// becomes the tool response's output and Content its content, which providers pass to
// the model. A tool whose output type is *MultipartToolResponse declares no output
// schema.
type MultipartToolResponse struct {
	Output  any         `json:"output,omitempty"`
	Content []*abi.Part `json:"content,omitempty"`
}

type funcTool[In, Out any] struct {
	def *abi.ToolDefinition
	fn  func(context.Context, In) (Out, error)
}

// NewTool returns a tool backed by a Go function, without registering it. Its input and
// output schemas are inferred from In and Out. It panics on an invalid option (a
// programming error).
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, input In) (Out, error), opts ...ToolOption) Tool {
	def := &abi.ToolDefinition{
		Name:        name,
		Description: description,
		InputSchema: schema.For[In](),
	}
	if _, multipart := any(*new(Out)).(*MultipartToolResponse); !multipart {
		def.OutputSchema = schema.For[Out]()
	}
	for _, o := range opts {
		if err := o.applyTool(def); err != nil {
			panic(fmt.Sprintf("agent: tool %q: %v", name, err))
		}
	}
	return &funcTool[In, Out]{def: def, fn: fn}
}

// DefineTool creates a tool backed by a Go function and registers it. It panics if the
// name is taken or an option is invalid.
func DefineTool[In, Out any](r *Registry, name, description string, fn func(ctx context.Context, input In) (Out, error), opts ...ToolOption) Tool {
	t := NewTool(name, description, fn, opts...)
	r.MustRegister(t)
	return t
}

func (t *funcTool[In, Out]) Name() string                    { return t.def.Name }
func (t *funcTool[In, Out]) Definition() *abi.ToolDefinition { return t.def }
func (t *funcTool[In, Out]) Desc() ActionDesc                { return ToolDesc(t.def) }

func (t *funcTool[In, Out]) Run(ctx context.Context, input any) (any, error) {
	var in In
	if v, ok := input.(In); ok {
		in = v
	} else if input != nil {
		b, err := json.Marshal(input)
		if err != nil {
			return nil, fmt.Errorf("encoding input: %w", err)
		}
		if err := json.Unmarshal(b, &in); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidToolInput, err)
		}
	}
	return t.fn(ctx, in)
}

// ToolDesc is the registry description of a tool.
func ToolDesc(def *abi.ToolDefinition) ActionDesc {
	return ActionDesc{
		Key:          Key(ActionTypeTool, def.Name),
		Type:         ActionTypeTool,
		Name:         def.Name,
		Description:  def.Description,
		InputSchema:  def.InputSchema,
		OutputSchema: def.OutputSchema,
		Metadata:     def.Metadata,
	}
}

// InterruptError is returned by a tool that cannot finish without outside input: an
// approval, an answer from the user. The generate call then ends with finish reason
// "interrupted" and the tool request, marked with Metadata, waits in the history until
// a resume responds to it or restarts it.
type InterruptError struct {
	Metadata map[string]any
}

// Error implements error.
func (e *InterruptError) Error() string { return "tool interrupted" }

// Interrupt returns the error a tool returns to interrupt the generation. Metadata
// travels with the pending request to the client (what to ask, what to approve).
func Interrupt(metadata map[string]any) error { return &InterruptError{Metadata: metadata} }

type resumedKey struct{}

// Resumed reports whether a tool runs again because a client restarted its interrupted
// request, and returns the metadata of the restart (e.g. {"approved": true}).
func Resumed(ctx context.Context) (map[string]any, bool) {
	md, ok := ctx.Value(resumedKey{}).(map[string]any)
	return md, ok
}
