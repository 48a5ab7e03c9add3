package agent

import (
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// DefaultMaxTurns is how many rounds of tool calls a generate call allows unless
// WithMaxTurns says otherwise.
const DefaultMaxTurns = 5

// GenerateOption configures a generate call. The same options configure prompts
// (DefinePrompt), where System, Prompt and Messages are templates.
type GenerateOption func(*generateOptions)

// generateOptions is everything a generate call was asked for, before resolution.
type generateOptions struct {
	model              Model
	modelName          string
	system             string
	hasSystem          bool
	messages           []*abi.Message
	prompt             string
	hasPrompt          bool
	config             any
	tools              []Tool
	toolNames          []string
	toolChoice         abi.ToolChoice
	maxTurns           int
	output             *abi.GenerateActionOutputConfig
	outputType         any // the Go value whose type the output decodes into, if any
	returnToolRequests bool
	docs               []*abi.Document
	resume             *abi.Resume
	middleware         []Middleware
	// onHistory receives the conversation the final response answers (without the
	// call's injected parts): DefineAgent keeps the tool exchanges of a turn with it.
	onHistory func([]*abi.Message)
	err       error
}

func (o *generateOptions) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

func (o *generateOptions) out() *abi.GenerateActionOutputConfig {
	if o.output == nil {
		o.output = &abi.GenerateActionOutputConfig{}
	}
	return o.output
}

// WithModel sets the model by value.
func WithModel(m Model) GenerateOption {
	return func(o *generateOptions) { o.model, o.modelName = m, "" }
}

// WithModelName sets the model by its registered name ("provider/model").
func WithModelName(name string) GenerateOption {
	return func(o *generateOptions) { o.model, o.modelName = nil, name }
}

// WithSystem sets the system instructions, sent as the first message with role system.
func WithSystem(text string) GenerateOption {
	return func(o *generateOptions) { o.system, o.hasSystem = text, true }
}

// WithMessages sets the conversation so far.
func WithMessages(msgs ...*abi.Message) GenerateOption {
	return func(o *generateOptions) { o.messages = msgs }
}

// WithPrompt adds a user message with the given text after the other messages.
func WithPrompt(text string) GenerateOption {
	return func(o *generateOptions) { o.prompt, o.hasPrompt = text, true }
}

// WithConfig sets the model config, passed to the model untouched.
func WithConfig(config any) GenerateOption {
	return func(o *generateOptions) { o.config = config }
}

// WithTools offers tools to the model by value.
func WithTools(tools ...Tool) GenerateOption {
	return func(o *generateOptions) { o.tools = append(o.tools, tools...) }
}

// WithToolNames offers registered tools to the model by name.
func WithToolNames(names ...string) GenerateOption {
	return func(o *generateOptions) { o.toolNames = append(o.toolNames, names...) }
}

// WithToolChoice tells the model whether it may, must or must not call tools.
func WithToolChoice(c abi.ToolChoice) GenerateOption {
	return func(o *generateOptions) { o.toolChoice = c }
}

// WithMaxTurns limits the rounds of tool calls (DefaultMaxTurns when unset).
func WithMaxTurns(n int) GenerateOption {
	return func(o *generateOptions) {
		if n < 1 {
			o.fail(fmt.Errorf("agent: WithMaxTurns(%d): want at least 1", n))
			return
		}
		o.maxTurns = n
	}
}

// WithOutputType asks for JSON output matching the schema of v's type, and makes the
// typed output available (GenerateData, Output).
func WithOutputType(v any) GenerateOption {
	return func(o *generateOptions) {
		s := schema.Of(v)
		if s == nil {
			o.fail(fmt.Errorf("agent: WithOutputType(%T): no schema for an interface value", v))
			return
		}
		out := o.out()
		out.Format, out.JSONSchema, out.ContentType = "json", s, "application/json"
		o.outputType = v
	}
}

// WithOutputSchema asks for JSON output matching a JSON Schema.
func WithOutputSchema(s map[string]any) GenerateOption {
	return func(o *generateOptions) {
		if _, err := schema.Compile(s); err != nil {
			o.fail(fmt.Errorf("agent: WithOutputSchema: %w", err))
			return
		}
		out := o.out()
		out.Format, out.JSONSchema, out.ContentType = "json", s, "application/json"
	}
}

// WithOutputFormat sets the output format: "text" or "json".
func WithOutputFormat(format string) GenerateOption {
	return func(o *generateOptions) {
		if format != "text" && format != "json" {
			o.fail(fmt.Errorf("agent: WithOutputFormat(%q): want text or json", format))
			return
		}
		o.out().Format = format
	}
}

// WithOutputInstructions replaces the format instructions added to the prompt when the
// model cannot constrain its output natively; an empty text adds none.
func WithOutputInstructions(text string) GenerateOption {
	return func(o *generateOptions) {
		if text == "" {
			o.out().Instructions = false
			return
		}
		o.out().Instructions = text
	}
}

// WithConstrained, when false, declines the model's native constrained generation even
// where it is supported, so format instructions are used instead.
func WithConstrained(on bool) GenerateOption {
	return func(o *generateOptions) { o.out().Constrained = &on }
}

// WithReturnToolRequests returns the model's tool requests to the caller instead of
// running them.
func WithReturnToolRequests(on bool) GenerateOption {
	return func(o *generateOptions) { o.returnToolRequests = on }
}

// WithDocs hands documents to the model as context. Models that do not support context
// get them folded into the last user message.
func WithDocs(docs ...*abi.Document) GenerateOption {
	return func(o *generateOptions) { o.docs = append(o.docs, docs...) }
}

// WithToolResponses resumes an interrupted generation by answering its pending tool
// requests. The messages must end with the model message holding the requests.
func WithToolResponses(parts ...*abi.Part) GenerateOption {
	return func(o *generateOptions) {
		if o.resume == nil {
			o.resume = &abi.Resume{}
		}
		o.resume.Respond = append(o.resume.Respond, parts...)
	}
}

// WithToolRestarts resumes an interrupted generation by running pending tool requests
// again, with the input and metadata of the given request parts; the tool sees the
// metadata through Resumed.
func WithToolRestarts(parts ...*abi.Part) GenerateOption {
	return func(o *generateOptions) {
		if o.resume == nil {
			o.resume = &abi.Resume{}
		}
		o.resume.Restart = append(o.resume.Restart, parts...)
	}
}

// WithMiddleware wraps the call, its model calls and its tool calls. The first
// middleware given is the outermost.
func WithMiddleware(mw ...Middleware) GenerateOption {
	return func(o *generateOptions) { o.middleware = append(o.middleware, mw...) }
}

// WithActionOptions applies the serializable form of a generate call, as a prompt
// renders it or Genkit's /util/generate action receives it. Options given after it
// override its fields.
func WithActionOptions(a *abi.GenerateActionOptions) GenerateOption {
	return func(o *generateOptions) {
		if a == nil {
			return
		}
		if a.Model != "" {
			o.model, o.modelName = nil, a.Model
		}
		o.messages = a.Messages
		o.toolNames = append(o.toolNames, a.Tools...)
		if a.ToolChoice != "" {
			o.toolChoice = a.ToolChoice
		}
		if a.Config != nil {
			o.config = a.Config
		}
		if a.Output != nil {
			c := *a.Output
			o.output = &c
		}
		if a.Resume != nil {
			o.resume = a.Resume
		}
		o.returnToolRequests = a.ReturnToolRequests
		if a.MaxTurns > 0 {
			o.maxTurns = a.MaxTurns
		}
		o.docs = append(o.docs, a.Docs...)
	}
}

// actionOptions returns the serializable form of the call: system and prompt folded
// into the messages, tools named.
func (o *generateOptions) actionOptions(model Model, tools []Tool) *abi.GenerateActionOptions {
	msgs := make([]*abi.Message, 0, len(o.messages)+2)
	if o.hasSystem {
		msgs = append(msgs, abi.NewSystemTextMessage(o.system))
	}
	msgs = append(msgs, o.messages...)
	if o.hasPrompt {
		msgs = append(msgs, abi.NewUserTextMessage(o.prompt))
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name()
	}
	a := &abi.GenerateActionOptions{
		Messages:           msgs,
		Tools:              names,
		ToolChoice:         o.toolChoice,
		Config:             o.config,
		Output:             o.output,
		Resume:             o.resume,
		ReturnToolRequests: o.returnToolRequests,
		MaxTurns:           o.maxTurns,
		Docs:               o.docs,
	}
	if model != nil {
		a.Model = model.Name()
	}
	if a.MaxTurns == 0 {
		a.MaxTurns = DefaultMaxTurns
	}
	return a
}
