package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// PromptRenderer is a base prompt (seed 000): Render renders its messages for an input,
// with the session in ctx for {{@state.field}}; Settings gives its generation settings
// (model, tools, config, output, middleware), which the serializable form of Render
// cannot all carry. prompt.Prompt (In any) and *prompt.DataPrompt[In, Out] (typed
// input) implement it.
type PromptRenderer[In any] interface {
	Render(ctx context.Context, input In) (*abi.GenerateActionOptions, error)
	Settings() *agent.Settings
}

// AgentOption configures DefineAgent. WithSnapshotStore, WithSnapshotCallback and
// WithHandlers are AgentOptions too.
type AgentOption[State any] interface {
	applyAgent(*agentConfig[State]) error
}

type agentConfig[State any] struct {
	flow     flowConfig[State]
	settings []agent.CommonOption
	base     *basePrompt
	// noClientTools refuses turns that bring tools of their own (WithClientTools).
	noClientTools bool
}

// basePrompt is a PromptRenderer with its input type erased.
type basePrompt struct {
	render       func(ctx context.Context, input any) (*abi.GenerateActionOptions, error)
	settings     func() *agent.Settings
	defaultInput any
}

type agentFunc[State any] func(*agentConfig[State]) error

func (f agentFunc[State]) applyAgent(c *agentConfig[State]) error { return f(c) }

// WithGenerateOpts sets what every turn generates with: model, config, tools, system
// instructions, output, middleware... They override the base prompt's settings (tools
// add up). Messages given here (WithMessages) are initial context, added to a new
// session once. Options that do not apply to an agent (the user prompt, whose place the
// client's input takes, tool responses, returning tool requests) are not CommonOptions:
// the compiler refuses them.
func WithGenerateOpts[State any](opts ...agent.CommonOption) AgentOption[State] {
	return agentFunc[State](func(c *agentConfig[State]) error {
		c.settings = append(c.settings, opts...)
		return nil
	})
}

// WithBasePrompt makes the agent's prompt: rendered again every turn with the session's
// prompt input ({{var}}) and its current custom state ({{@state.field}}); its rendered
// messages precede the conversation and are never stored. input is the default prompt
// input (the zero value: none), stored in the session at its start unless the client
// gives its own with WithPromptInput. A *prompt.DataPrompt[In, Out] makes the compiler
// check the input's type.
func WithBasePrompt[State, In any](p PromptRenderer[In], input In) AgentOption[State] {
	return agentFunc[State](func(c *agentConfig[State]) error {
		if c.base != nil {
			return fmt.Errorf("session: %w: WithBasePrompt given twice", agent.ErrInvalidOption)
		}
		b := &basePrompt{
			render: func(ctx context.Context, stored any) (*abi.GenerateActionOptions, error) {
				in, err := convertInput[In](stored)
				if err != nil {
					return nil, err
				}
				return p.Render(ctx, in)
			},
			settings: p.Settings,
		}
		if v := reflect.ValueOf(input); v.IsValid() && !v.IsZero() {
			b.defaultInput = input
		}
		c.base = b
		return nil
	})
}

// WithClientTools says whether the agent offers its model the tools a turn's input
// brings (SessionFlowInput.Tools), which it does by default; false refuses such a
// turn, naming the agent.
func WithClientTools[State any](allowed bool) AgentOption[State] {
	return agentFunc[State](func(c *agentConfig[State]) error {
		c.noClientTools = !allowed
		return nil
	})
}

// convertInput turns a stored prompt input (after a resume, decoded JSON) into In.
func convertInput[In any](stored any) (In, error) {
	var in In
	if stored == nil {
		return in, nil
	}
	if v, ok := stored.(In); ok {
		return v, nil
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return in, fmt.Errorf("session: encoding the prompt input: %w", err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("session: the prompt input does not decode into %T: %w", in, err)
	}
	return in, nil
}

// DefineAgent defines a prompt-driven agent: a SessionFlow whose every turn is done for
// you. The turn adds the input to the session, renders the base prompt, generates
// (model chunks streamed as they arrive, tools run automatically), keeps the model's
// messages, and ends the turn (snapshot per the callback). Handlers run at the turn's
// points. A tool that interrupts ends the turn with finish reason "interrupted"; the
// client resumes with SessionFlowInput.Resume.
//
// A base prompt with a default input is rendered once here, with that input and a state
// holding every field of State, so that a template naming a variable or a state field
// that does not exist fails now, not at the first turn (without a default input, the
// variables are known only once a session gives its input). DefineAgent panics on that,
// on an invalid or repeated option, and if the name is taken.
func DefineAgent[Stream, State any](r *agent.Registry, name string, opts ...AgentOption[State]) *SessionFlow[Stream, State] {
	var cfg agentConfig[State]
	for _, o := range opts {
		if err := o.applyAgent(&cfg); err != nil {
			panic(fmt.Sprintf("session: agent %q: %v", name, err))
		}
	}
	settings, err := agent.NewSettings(cfg.settings...)
	if err != nil {
		panic(fmt.Sprintf("session: agent %q: %v", name, err))
	}
	a := &agentLoop[Stream, State]{name: name, reg: r, base: cfg.base, initial: settings.Messages, handlers: cfg.flow.handlers,
		noClientTools: cfg.noClientTools}
	if settings.System != "" {
		a.system = abi.NewSystemTextMessage(settings.System)
	}
	settings.System, settings.Messages = "", nil
	if settings.ToolErrors == "" && (cfg.base == nil || cfg.base.settings().ToolErrors == "") {
		// An agent's model is told of a failing tool, to correct itself, unless the
		// agent or its prompt says otherwise: a turn is a conversation's, not one call's.
		settings.ToolErrors = agent.ToolErrorsToModel
	}
	a.settings = settings
	if err := a.checkPrompt(); err != nil {
		panic(fmt.Sprintf("session: agent %q: %v", name, err))
	}
	f := newSessionFlow(name, a.run, cfg.flow)
	f.setup = a.setup
	f.register(r)
	return f
}

type agentLoop[Stream, State any] struct {
	name     string
	reg      *agent.Registry
	base     *basePrompt
	settings *agent.Settings // without System and Messages, kept below
	initial  []*abi.Message
	// system is the system message of WithGenerateOpts(WithSystem(...)): it replaces the
	// base prompt's system messages.
	system        *abi.Message
	handlers      []agent.Handler
	noClientTools bool
}

// checkPrompt renders the base prompt as a first turn would, with its default input
// and a state with every field of State.
func (a *agentLoop[Stream, State]) checkPrompt() error {
	if a.base == nil || a.base.defaultInput == nil {
		return nil
	}
	input := a.base.defaultInput
	st := New[json.RawMessage]("definition", nil)
	raw, err := json.Marshal(probe(schema.For[State]()))
	if err != nil {
		return err
	}
	st.SetCustom(raw)
	if _, err := a.base.render(agent.NewSessionContext(context.Background(), st), input); err != nil {
		return fmt.Errorf("rendering the base prompt: %w", err)
	}
	return nil
}

// probe builds a value with every property a JSON Schema declares, recursively, to
// stand for a state not known yet.
func probe(s map[string]any) any {
	switch s["type"] {
	case "object":
		props, _ := s["properties"].(map[string]any)
		out := make(map[string]any, len(props))
		for k, p := range props {
			if ps, ok := p.(map[string]any); ok {
				out[k] = probe(ps)
			}
		}
		return out
	case "array":
		return []any{}
	case "string":
		return ""
	case "number", "integer":
		return 0
	case "boolean":
		return false
	}
	return nil
}

// setup gives a new session the agent's initial context, and any session without a
// prompt input the default one.
func (a *agentLoop[Stream, State]) setup(sess *Session[State], init *SessionFlowInit[State]) {
	fresh := sess.SnapshotID() == "" && init.State == nil
	if fresh && len(a.initial) > 0 {
		sess.AddMessages(a.initial...)
	}
	if a.base != nil && sess.PromptInput() == nil && a.base.defaultInput != nil {
		sess.SetPromptInput(a.base.defaultInput)
	}
}

func (a *agentLoop[Stream, State]) run(ctx context.Context, inCh <-chan *SessionFlowInput, resp *Responder[Stream], params *SessionFlowParams[Stream, State]) error {
	sess := params.Session
	for input := range inCh {
		halt, err := a.turn(ctx, resp, sess, input)
		if err != nil && ctx.Err() == nil {
			// The model, a tool, a handler or the prompt failed (or the turn's
			// snapshot could not be saved): the turn fails, the session goes on.
			err = resp.FailTurn(err)
		}
		if err != nil {
			return err
		}
		if halt {
			return nil
		}
	}
	return nil
}

// turn runs one turn and reports whether a handler halted the session. A panic in the
// turn (the flow's own code: a tool's, a model's or a handler's is their call's error
// already) is its error.
func (a *agentLoop[Stream, State]) turn(ctx context.Context, resp *Responder[Stream], sess *Session[State], input *SessionFlowInput) (halt bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			halt, err = false, fmt.Errorf("session: agent turn: %w", agent.Recovered(ctx, v, "session", sess.ID()))
		}
	}()
	clientTools, err := a.clientTools(input.Tools)
	if err == nil {
		err = checkOutput(input.Output)
	}
	if err == nil {
		err = checkInput(input, sess.Messages())
	}
	if err != nil {
		// Refused before anything changed: the session stays open for another input.
		if err := resp.Refuse(err); err != nil {
			return false, err
		}
		return false, resp.EndTurn()
	}
	hin := &abi.HandlerInput{Turn: sess.TurnIndex(), Input: input.Messages}
	if input.Resume == nil {
		sess.AddMessages(input.Messages...)
	}
	if d, err := a.handle(ctx, hin, abi.HookTurnStart); err != nil || d != nil {
		return a.follow(resp, sess, d, err)
	}

	var rendered []*abi.Message
	var defaults *agent.Settings
	if a.base != nil {
		ao, err := a.base.render(ctx, sess.PromptInput())
		if err != nil {
			return false, fmt.Errorf("session: rendering the base prompt: %w", err)
		}
		rendered, defaults = ao.Messages, a.base.settings()
	}
	if a.system != nil {
		rendered = slices.DeleteFunc(slices.Clone(rendered), func(m *abi.Message) bool { return m.Role == abi.RoleSystem })
		rendered = append([]*abi.Message{a.system}, rendered...)
	}
	history := sess.Messages()
	settings := a.settings
	if input.Output != nil {
		// The turn's format replaces the agent's, and its prompt's (WithDefaults
		// leaves an output set here alone).
		c := *settings
		c.Output, c.OutputType = input.Output, nil
		settings = &c
	}
	opts := []agent.GenerateOption{
		agent.WithSettings(settings),
		agent.WithMessages(append(slices.Clone(rendered), history...)...),
	}
	if len(clientTools) > 0 {
		opts = append(opts, agent.WithTools(clientTools...))
	}
	if input.Resume != nil {
		opts = append(opts, agent.WithToolResponses(input.Resume.Respond...), agent.WithToolRestarts(input.Resume.Restart...))
	}
	if defaults != nil {
		opts = append(opts, agent.WithDefaults(defaults))
	}
	if d, err := a.handle(ctx, hin, abi.HookBeforeGenerate); err != nil || d != nil {
		return a.follow(resp, sess, d, err)
	}

	var res *abi.GenerateResponse
	for v, err := range agent.GenerateStream(ctx, a.reg, opts...) {
		if errors.Is(err, agent.ErrInvalidResume) {
			// The client's answer does not fit what is pending: refuse it, change
			// nothing, and keep the session open for a corrected one.
			if err := resp.Refuse(err); err != nil {
				return false, err
			}
			return false, resp.EndTurn()
		}
		if err != nil {
			return false, err
		}
		if v.Done {
			res = v.Response
			continue
		}
		if err := resp.SendChunk(v.Chunk); err != nil {
			return false, err
		}
	}

	// The session keeps the conversation as the call ended it, without the rendered
	// prompt: the tool exchanges of this turn, the resolved interrupts of a resume, and
	// the final message. Messages added by tools or handlers while the model ran are
	// kept after them.
	now := sess.Messages()
	var extra []*abi.Message
	if len(now) > len(history) && commonPrefix(now, history) == len(history) {
		extra = now[len(history):]
	}
	kept := append(slices.Clone(res.History()[len(rendered):]), extra...)
	sess.SetMessages(kept)
	if res.FinishReason == abi.FinishInterrupted {
		// Stream the pending requests with their interrupt metadata, so the client
		// can answer them: a chunk of role tool, as Genkit's agents stream them.
		if err := resp.SendChunk(&abi.GenerateResponseChunk{Role: abi.RoleTool, Content: PendingToolRequests(kept)}); err != nil {
			return false, err
		}
	}

	hin.Response = res
	if d, err := a.handle(ctx, hin, abi.HookAfterGenerate); err != nil || d != nil {
		return a.follow(resp, sess, d, err)
	}
	if d, err := a.handle(ctx, hin, abi.HookTurnEnd); err != nil || d != nil {
		return a.follow(resp, sess, d, err)
	}
	reason := res.FinishReason
	if reason == "" {
		reason = abi.FinishStop
	}
	return false, resp.EndTurnWith(reason)
}

// clientTools returns the tools a turn's input brings, refusing them (wrapping
// agent.ErrInvalidInput) when the agent takes none, when one is invalid, given twice,
// or named as one of the agent's own, which it would hide from the model.
func (a *agentLoop[Stream, State]) clientTools(defs []*abi.ToolDefinition) ([]agent.Tool, error) {
	if len(defs) == 0 {
		return nil, nil
	}
	if a.noClientTools {
		return nil, fmt.Errorf("session: %w: agent %s takes no client tools", agent.ErrInvalidInput, a.name)
	}
	own := map[string]bool{}
	for _, s := range []*agent.Settings{a.settings, a.baseSettings()} {
		if s == nil {
			continue
		}
		for _, n := range s.ToolNames {
			own[n] = true
		}
		for _, t := range s.Tools {
			own[t.Name()] = true
		}
	}
	tools := make([]agent.Tool, 0, len(defs))
	seen := map[string]bool{}
	for _, d := range defs {
		t, err := agent.NewClientTool(d)
		if err != nil {
			return nil, fmt.Errorf("session: %w: %w", agent.ErrInvalidInput, err)
		}
		switch {
		case own[d.Name]:
			return nil, fmt.Errorf("session: %w: client tool %q has the name of one of agent %s's own tools", agent.ErrInvalidInput, d.Name, a.name)
		case seen[d.Name]:
			return nil, fmt.Errorf("session: %w: client tool %q is given twice", agent.ErrInvalidInput, d.Name)
		}
		seen[d.Name] = true
		tools = append(tools, t)
	}
	return tools, nil
}

// baseSettings returns the base prompt's settings, or nil.
func (a *agentLoop[Stream, State]) baseSettings() *agent.Settings {
	if a.base == nil {
		return nil
	}
	return a.base.settings()
}

// checkOutput refuses a turn's output format that no answer could meet: an unknown
// format, or a schema that is not a valid JSON Schema.
func checkOutput(o *abi.GenerateActionOutputConfig) error {
	if o == nil {
		return nil
	}
	if o.Format != "" && o.Format != "text" && o.Format != "json" {
		return fmt.Errorf("session: %w: output format %q: want text or json", agent.ErrInvalidInput, o.Format)
	}
	if o.JSONSchema != nil {
		if _, err := schema.Compile(o.JSONSchema); err != nil {
			return fmt.Errorf("session: %w: the output schema: %v", agent.ErrInvalidInput, err)
		}
	}
	return nil
}

// handle runs the handlers at a point; it returns a directive only when it is not
// continue.
func (a *agentLoop[Stream, State]) handle(ctx context.Context, in *abi.HandlerInput, point abi.HookPoint) (*abi.Directive, error) {
	if len(a.handlers) == 0 {
		return nil, nil
	}
	hin := *in
	hin.Point = point
	d, err := agent.RunHandlers(ctx, a.handlers, &hin)
	if err != nil || d.Action == abi.DirectiveContinue {
		return nil, err
	}
	return d, nil
}

// follow carries out a handler's directive (or error), ending the turn.
func (a *agentLoop[Stream, State]) follow(resp *Responder[Stream], sess *Session[State], d *abi.Directive, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	if d.Text != "" {
		msg := abi.NewModelTextMessage(d.Text)
		sess.AddMessages(msg)
		if err := resp.SendChunk(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: msg.Content}); err != nil {
			return false, err
		}
	}
	if err := resp.EndTurn(); err != nil {
		return false, err
	}
	return d.Action == abi.DirectiveHalt, nil
}

// PendingToolRequests returns the tool requests waiting for an answer at the end of a
// conversation: the parts of its last message that carry "interrupt" metadata. A client
// resumes by answering each with SessionFlowInput.Resume.
func PendingToolRequests(msgs []*abi.Message) []*abi.Part {
	if len(msgs) == 0 {
		return nil
	}
	last := msgs[len(msgs)-1]
	if last == nil || last.Role != abi.RoleModel {
		return nil
	}
	var out []*abi.Part
	for _, p := range last.Content {
		if p.IsToolRequest() && p.Metadata["interrupt"] != nil {
			out = append(out, p)
		}
	}
	return out
}

// commonPrefix counts the leading messages two conversations share. Messages are
// immutable once added, so the same pointer means the same message.
func commonPrefix(a, b []*abi.Message) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
