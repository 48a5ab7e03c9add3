package agent

import (
	"fmt"
	"slices"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// Options come in kinds, one per place of use, so that the compiler refuses an option
// where it does not apply (as Genkit's do):
//
//   - CommonOption: what a generate call, a prompt and an agent share (model, config,
//     tools, output, middleware, system instructions, initial messages). Every
//     CommonOption is also a GenerateOption and a PromptOption, and an agent takes them
//     in session.WithGenerateOpts.
//   - PromptingOption: the user prompt (WithPrompt), for generate calls and prompts; an
//     agent's user prompt is its client's input.
//   - GenerateOption: the above, plus what only a single call can say: documents, tool
//     responses and restarts, returning tool requests, the serializable form.
//   - PromptOption: what a prompt definition takes (package agent/prompt).
//
// A setting that holds one value (the model, the config, the output...) can be given
// once per call or definition: a second one is an error naming both options, rather
// than a silent override. Settings that are lists (tools, middleware, docs) add up.

// DefaultMaxTurns is how many rounds of tool calls a generate call allows unless
// WithMaxTurns says otherwise.
const DefaultMaxTurns = 5

// GenerateOption configures a generate call: Generate, GenerateStream, GenerateData,
// and a prompt's Execute.
type GenerateOption interface {
	applyGenerate(*generateConfig) error
}

// PromptOption configures a prompt definition (package agent/prompt), where the system
// text and the prompt text are templates.
type PromptOption interface {
	applyPrompt(*PromptConfig) error
}

// CommonOption configures what generate calls, prompts and agents share.
type CommonOption interface {
	GenerateOption
	PromptOption
	applyCommon(*Settings) error
}

// PromptingOption configures generate calls and prompts, but not agents.
type PromptingOption interface {
	GenerateOption
	PromptOption
}

// Settings are the resolved common options: what a generate call, a prompt and an agent
// share. A zero field is unset. Packages that compose calls (prompts, agents) read them
// with NewSettings and give them back with WithSettings or WithDefaults.
type Settings struct {
	// Model is the model by value; ModelName names a registered one. At most one is set.
	Model     Model
	ModelName string
	// Config is passed to the model, after validation against its config schema.
	Config any
	// Tools are offered by value, ToolNames by registered name.
	Tools     []Tool
	ToolNames []string
	// ToolChoice says whether the model may, must or must not call tools.
	ToolChoice abi.ToolChoice
	// MaxTurns limits the rounds of tool calls (DefaultMaxTurns when zero).
	MaxTurns int
	// Output is the output asked for; OutputType, the Go value whose type it decodes
	// into (WithOutputType).
	Output     *abi.GenerateActionOutputConfig
	OutputType any
	// ToolErrors says what a failing tool does to the call (WithReturnToolErrors); empty
	// leaves it to where the settings are used: Generate and prompts end the call,
	// agents (session.DefineAgent) tell the model.
	ToolErrors ToolErrorPolicy
	// Middleware wraps the call, its model calls and its tool calls.
	Middleware []Middleware
	// System is the system instructions (a template, in a prompt).
	System string
	// Messages are the conversation so far (an agent's initial context, a prompt's
	// fixed messages).
	Messages []*abi.Message

	// set names the option that set each single setting, to refuse a second one.
	set map[string]string
}

// claim records that option sets the single setting what, failing if another option
// already did.
func (s *Settings) claim(what, option string) error {
	if prev, ok := s.set[what]; ok {
		if prev == option {
			return fmt.Errorf("agent: %w: %s given twice: the %s can be set once", ErrInvalidOption, option, what)
		}
		return fmt.Errorf("agent: %w: %s after %s: the %s can be set once", ErrInvalidOption, option, prev, what)
	}
	if s.set == nil {
		s.set = map[string]string{}
	}
	s.set[what] = option
	return nil
}

func (s *Settings) output() *abi.GenerateActionOutputConfig {
	if s.Output == nil {
		s.Output = &abi.GenerateActionOutputConfig{}
	}
	return s.Output
}

// NewSettings resolves common options, failing on an invalid or repeated one.
func NewSettings(opts ...CommonOption) (*Settings, error) {
	var s Settings
	for _, o := range opts {
		if err := o.applyCommon(&s); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// WithSettings gives resolved settings back as an option: every field they set, as if
// set by the options that produced them.
func WithSettings(s *Settings) CommonOption {
	return commonFunc(func(dst *Settings) error {
		const by = "WithSettings"
		if s.Model != nil || s.ModelName != "" {
			if err := dst.claim("model", by); err != nil {
				return err
			}
			dst.Model, dst.ModelName = s.Model, s.ModelName
		}
		if s.Config != nil {
			if err := dst.claim("config", by); err != nil {
				return err
			}
			dst.Config = s.Config
		}
		dst.Tools = append(dst.Tools, s.Tools...)
		dst.ToolNames = append(dst.ToolNames, s.ToolNames...)
		if s.ToolChoice != "" {
			if err := dst.claim("tool choice", by); err != nil {
				return err
			}
			dst.ToolChoice = s.ToolChoice
		}
		if s.MaxTurns != 0 {
			if err := dst.claim("maximum turns", by); err != nil {
				return err
			}
			dst.MaxTurns = s.MaxTurns
		}
		if s.Output != nil {
			if err := dst.claim("output", by); err != nil {
				return err
			}
			c := *s.Output
			dst.Output, dst.OutputType = &c, s.OutputType
		}
		if s.ToolErrors != "" {
			if err := dst.claim("tool error handling", by); err != nil {
				return err
			}
			dst.ToolErrors = s.ToolErrors
		}
		dst.Middleware = append(dst.Middleware, s.Middleware...)
		if s.System != "" {
			if err := dst.claim("system instructions", by); err != nil {
				return err
			}
			dst.System = s.System
		}
		if s.Messages != nil {
			if err := dst.claim("messages", by); err != nil {
				return err
			}
			dst.Messages = s.Messages
		}
		return nil
	})
}

// WithDefaults gives settings that apply where the call's other options set nothing:
// a single setting the call gives (the model, the config, the output...) wins over the
// default, while tools and middleware add up. Give it last: it sees only the options
// before it. A prompt's Execute and an agent's base prompt use it, so the caller's
// options override the prompt's.
func WithDefaults(s *Settings) GenerateOption {
	return generateFunc(func(c *generateConfig) error {
		unset := func(what string) bool {
			_, set := c.set[what]
			return !set
		}
		if (s.Model != nil || s.ModelName != "") && unset("model") {
			c.Model, c.ModelName = s.Model, s.ModelName
		}
		if s.Config != nil && unset("config") {
			c.Config = s.Config
		}
		c.Tools = append(c.Tools, s.Tools...)
		c.ToolNames = append(c.ToolNames, s.ToolNames...)
		if s.ToolChoice != "" && unset("tool choice") {
			c.ToolChoice = s.ToolChoice
		}
		if s.MaxTurns != 0 && unset("maximum turns") {
			c.MaxTurns = s.MaxTurns
		}
		if s.Output != nil && c.Output == nil {
			o := *s.Output
			c.Output, c.OutputType = &o, s.OutputType
		}
		if s.ToolErrors != "" && unset("tool error handling") {
			c.ToolErrors = s.ToolErrors
		}
		c.Middleware = append(c.Middleware, s.Middleware...)
		if s.System != "" && unset("system instructions") {
			c.System = s.System
		}
		if s.Messages != nil && unset("messages") {
			c.Messages = s.Messages
		}
		return nil
	})
}

// PromptConfig is what a prompt definition was given: the common settings, with System
// a template, and the user prompt template. Package agent/prompt reads it with
// NewPromptConfig.
type PromptConfig struct {
	Settings
	// Prompt is the user message template (WithPrompt).
	Prompt string
}

// NewPromptConfig resolves prompt options, failing on an invalid or repeated one.
func NewPromptConfig(opts ...PromptOption) (*PromptConfig, error) {
	var c PromptConfig
	for _, o := range opts {
		if err := o.applyPrompt(&c); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// generateConfig is everything a generate call was asked for, before resolution.
type generateConfig struct {
	Settings
	prompt             string
	docs               []*abi.Document
	returnToolRequests bool
	resume             *abi.Resume
}

func newGenerateConfig(opts []GenerateOption) (*generateConfig, error) {
	var c generateConfig
	for _, o := range opts {
		if err := o.applyGenerate(&c); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// commonFunc is a CommonOption.
type commonFunc func(*Settings) error

func (f commonFunc) applyCommon(s *Settings) error         { return f(s) }
func (f commonFunc) applyGenerate(c *generateConfig) error { return f(&c.Settings) }
func (f commonFunc) applyPrompt(c *PromptConfig) error     { return f(&c.Settings) }

// generateFunc is a GenerateOption that applies nowhere else.
type generateFunc func(*generateConfig) error

func (f generateFunc) applyGenerate(c *generateConfig) error { return f(c) }

// promptingFunc is a PromptingOption.
type promptingFunc struct {
	generate func(*generateConfig) error
	prompt   func(*PromptConfig) error
}

func (f promptingFunc) applyGenerate(c *generateConfig) error { return f.generate(c) }
func (f promptingFunc) applyPrompt(c *PromptConfig) error     { return f.prompt(c) }

// WithModel sets the model by value.
func WithModel(m Model) CommonOption {
	return commonFunc(func(s *Settings) error {
		if m == nil {
			return fmt.Errorf("agent: %w: WithModel(nil)", ErrInvalidOption)
		}
		if err := s.claim("model", "WithModel"); err != nil {
			return err
		}
		s.Model = m
		return nil
	})
}

// WithModelName sets the model by its registered name ("provider/model").
func WithModelName(name string) CommonOption {
	return commonFunc(func(s *Settings) error {
		if name == "" {
			return fmt.Errorf("agent: %w: WithModelName(\"\")", ErrInvalidOption)
		}
		if err := s.claim("model", "WithModelName"); err != nil {
			return err
		}
		s.ModelName = name
		return nil
	})
}

// WithConfig sets the model config. It is checked against the model's config schema,
// when the model declares one, before the model is called.
func WithConfig(config any) CommonOption {
	return commonFunc(func(s *Settings) error {
		if err := s.claim("config", "WithConfig"); err != nil {
			return err
		}
		s.Config = config
		return nil
	})
}

// WithTools offers tools to the model by value.
func WithTools(tools ...Tool) CommonOption {
	return commonFunc(func(s *Settings) error {
		s.Tools = append(s.Tools, tools...)
		return nil
	})
}

// WithToolNames offers registered tools to the model by name.
func WithToolNames(names ...string) CommonOption {
	return commonFunc(func(s *Settings) error {
		s.ToolNames = append(s.ToolNames, names...)
		return nil
	})
}

// WithToolChoice tells the model whether it may, must or must not call tools.
func WithToolChoice(c abi.ToolChoice) CommonOption {
	return commonFunc(func(s *Settings) error {
		if err := s.claim("tool choice", "WithToolChoice"); err != nil {
			return err
		}
		s.ToolChoice = c
		return nil
	})
}

// WithMaxTurns limits the rounds of tool calls (DefaultMaxTurns when unset).
func WithMaxTurns(n int) CommonOption {
	return commonFunc(func(s *Settings) error {
		if n < 1 {
			return fmt.Errorf("agent: %w: WithMaxTurns(%d): want at least 1", ErrInvalidOption, n)
		}
		if err := s.claim("maximum turns", "WithMaxTurns"); err != nil {
			return err
		}
		s.MaxTurns = n
		return nil
	})
}

// WithOutputType asks for JSON output matching the schema of v's type, and makes the
// typed output available (GenerateData, Output).
func WithOutputType(v any) CommonOption {
	return commonFunc(func(s *Settings) error {
		sch := schema.Of(v)
		if sch == nil {
			return fmt.Errorf("agent: %w: WithOutputType(%T): no schema for an interface value", ErrInvalidOption, v)
		}
		if err := s.claim("output schema", "WithOutputType"); err != nil {
			return err
		}
		out := s.output()
		out.Format, out.JSONSchema, out.ContentType = "json", sch, "application/json"
		s.OutputType = v
		return nil
	})
}

// WithOutputSchema asks for JSON output matching a JSON Schema.
func WithOutputSchema(sch map[string]any) CommonOption {
	return commonFunc(func(s *Settings) error {
		if _, err := schema.Compile(sch); err != nil {
			return fmt.Errorf("agent: %w: WithOutputSchema: %w", ErrInvalidOption, err)
		}
		if err := s.claim("output schema", "WithOutputSchema"); err != nil {
			return err
		}
		out := s.output()
		out.Format, out.JSONSchema, out.ContentType = "json", sch, "application/json"
		return nil
	})
}

// WithOutputFormat sets the output format: "text" or "json".
func WithOutputFormat(format string) CommonOption {
	return commonFunc(func(s *Settings) error {
		if format != "text" && format != "json" {
			return fmt.Errorf("agent: %w: WithOutputFormat(%q): want text or json", ErrInvalidOption, format)
		}
		if err := s.claim("output format", "WithOutputFormat"); err != nil {
			return err
		}
		s.output().Format = format
		return nil
	})
}

// WithOutputInstructions replaces the format instructions added to the prompt when the
// model cannot constrain its output natively; an empty text adds none.
func WithOutputInstructions(text string) CommonOption {
	return commonFunc(func(s *Settings) error {
		if err := s.claim("output instructions", "WithOutputInstructions"); err != nil {
			return err
		}
		if text == "" {
			s.output().Instructions = false
		} else {
			s.output().Instructions = text
		}
		return nil
	})
}

// WithConstrained, when false, declines the model's native constrained generation even
// where it is supported, so format instructions are used instead.
func WithConstrained(on bool) CommonOption {
	return commonFunc(func(s *Settings) error {
		if err := s.claim("constrained generation", "WithConstrained"); err != nil {
			return err
		}
		s.output().Constrained = &on
		return nil
	})
}

// ToolErrorPolicy says what a tool that fails (its error, a plugin's fault or timeout,
// an input from the model that breaks the tool's schema, an unknown tool) does to a
// generate call. A tool that panics, or a call that was cancelled, ends the call
// whatever the policy; an interrupt is no error.
type ToolErrorPolicy string

// The tool error policies.
const (
	// ToolErrorsFail ends the call with the tool's error: Generate's default, as
	// Genkit's.
	ToolErrorsFail ToolErrorPolicy = "fail"
	// ToolErrorsToModel hands the error to the model as the tool's response,
	// {"error": message, "code": code} with part metadata "error": true, so that it
	// can correct itself; the call's turn limit (WithMaxTurns) bounds its retries.
	// session.DefineAgent's default.
	ToolErrorsToModel ToolErrorPolicy = "model"
)

// WithReturnToolErrors chooses the tool error policy: on, ToolErrorsToModel (a
// failing tool's error, an input that does not match its schema, or an unknown tool
// becomes the tool's response, marked with metadata "error": true, so the model can
// recover, as most agent frameworks do); off, ToolErrorsFail (the call ends with the
// error). Without it, Generate fails and an agent tells the model.
func WithReturnToolErrors(on bool) CommonOption {
	return commonFunc(func(s *Settings) error {
		if err := s.claim("tool error handling", "WithReturnToolErrors"); err != nil {
			return err
		}
		s.ToolErrors = ToolErrorsFail
		if on {
			s.ToolErrors = ToolErrorsToModel
		}
		return nil
	})
}

// WithMiddleware wraps the call, its model calls and its tool calls. The first
// middleware given is the outermost.
func WithMiddleware(mw ...Middleware) CommonOption {
	return commonFunc(func(s *Settings) error {
		s.Middleware = append(s.Middleware, mw...)
		return nil
	})
}

// WithSystem sets the system instructions, sent as the first message with role system.
// In a prompt they are a template.
func WithSystem(text string) CommonOption {
	return commonFunc(func(s *Settings) error {
		if err := s.claim("system instructions", "WithSystem"); err != nil {
			return err
		}
		s.System = text
		return nil
	})
}

// WithMessages sets the conversation so far. In a prompt they are fixed messages after
// the system template; in an agent, initial context added once when a session starts.
func WithMessages(msgs ...*abi.Message) CommonOption {
	return commonFunc(func(s *Settings) error {
		if err := s.claim("messages", "WithMessages"); err != nil {
			return err
		}
		s.Messages = msgs
		return nil
	})
}

// WithPrompt adds a user message with the given text after the other messages. In a
// prompt it is a template.
func WithPrompt(text string) PromptingOption {
	return promptingFunc{
		generate: func(c *generateConfig) error {
			if err := c.claim("prompt", "WithPrompt"); err != nil {
				return err
			}
			c.prompt = text
			return nil
		},
		prompt: func(c *PromptConfig) error {
			if err := c.claim("prompt", "WithPrompt"); err != nil {
				return err
			}
			c.Prompt = text
			return nil
		},
	}
}

// WithDocs hands documents to the model as context. Models that do not support context
// get them folded into the last user message.
func WithDocs(docs ...*abi.Document) GenerateOption {
	return generateFunc(func(c *generateConfig) error {
		c.docs = append(c.docs, docs...)
		return nil
	})
}

// WithReturnToolRequests returns the model's tool requests to the caller instead of
// running them.
func WithReturnToolRequests(on bool) GenerateOption {
	return generateFunc(func(c *generateConfig) error {
		if err := c.claim("tool request handling", "WithReturnToolRequests"); err != nil {
			return err
		}
		c.returnToolRequests = on
		return nil
	})
}

// WithToolResponses resumes an interrupted generation by answering its pending tool
// requests. The messages must end with the model message holding the requests.
func WithToolResponses(parts ...*abi.Part) GenerateOption {
	return generateFunc(func(c *generateConfig) error {
		if c.resume == nil {
			c.resume = &abi.Resume{}
		}
		c.resume.Respond = append(c.resume.Respond, parts...)
		return nil
	})
}

// WithToolRestarts resumes an interrupted generation by running pending tool requests
// again, with the input and metadata of the given request parts; the tool sees the
// metadata through Resumed.
func WithToolRestarts(parts ...*abi.Part) GenerateOption {
	return generateFunc(func(c *generateConfig) error {
		if c.resume == nil {
			c.resume = &abi.Resume{}
		}
		c.resume.Restart = append(c.resume.Restart, parts...)
		return nil
	})
}

// WithActionOptions applies the serializable form of a generate call, as Genkit's
// /util/generate action receives it. Each field it sets counts as set by this option.
func WithActionOptions(a *abi.GenerateActionOptions) GenerateOption {
	return generateFunc(func(c *generateConfig) error {
		if a == nil {
			return nil
		}
		const by = "WithActionOptions"
		claim := func(what string, isSet bool, set func()) error {
			if !isSet {
				return nil
			}
			if err := c.claim(what, by); err != nil {
				return err
			}
			set()
			return nil
		}
		for _, err := range []error{
			claim("model", a.Model != "", func() { c.ModelName = a.Model }),
			claim("messages", a.Messages != nil, func() { c.Messages = a.Messages }),
			claim("tool choice", a.ToolChoice != "", func() { c.ToolChoice = a.ToolChoice }),
			claim("config", a.Config != nil, func() { c.Config = a.Config }),
			claim("output schema", a.Output != nil, func() { o := *a.Output; c.Output = &o }),
			claim("maximum turns", a.MaxTurns > 0, func() { c.MaxTurns = a.MaxTurns }),
			claim("tool request handling", a.ReturnToolRequests, func() { c.returnToolRequests = true }),
		} {
			if err != nil {
				return err
			}
		}
		c.ToolNames = append(c.ToolNames, a.Tools...)
		c.docs = append(c.docs, a.Docs...)
		if a.Resume != nil {
			if c.resume == nil {
				c.resume = &abi.Resume{}
			}
			c.resume.Respond = append(c.resume.Respond, a.Resume.Respond...)
			c.resume.Restart = append(c.resume.Restart, a.Resume.Restart...)
		}
		return nil
	})
}

// actionOptions returns the serializable form of the call: system and prompt folded
// into the messages, tools named.
func (c *generateConfig) actionOptions(model Model, tools []Tool) *abi.GenerateActionOptions {
	_, prompt := c.set["prompt"]
	// The caller's messages are shared, clipped, when nothing is added to them: a call
	// on a long conversation does not copy it.
	msgs := slices.Clip(c.Messages)
	if c.System != "" || prompt {
		msgs = make([]*abi.Message, 0, len(c.Messages)+2)
		if c.System != "" {
			msgs = append(msgs, abi.NewSystemTextMessage(c.System))
		}
		msgs = append(msgs, c.Messages...)
		if prompt {
			msgs = append(msgs, abi.NewUserTextMessage(c.prompt))
		}
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name()
	}
	a := &abi.GenerateActionOptions{
		Messages:           msgs,
		Tools:              names,
		ToolChoice:         c.ToolChoice,
		Config:             c.Config,
		Output:             c.Output,
		Resume:             c.resume,
		ReturnToolRequests: c.returnToolRequests,
		MaxTurns:           c.MaxTurns,
		Docs:               c.docs,
	}
	if model != nil {
		a.Model = model.Name()
	}
	if a.MaxTurns == 0 {
		a.MaxTurns = DefaultMaxTurns
	}
	return a
}
