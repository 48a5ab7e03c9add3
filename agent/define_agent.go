package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/terrarium-ai/terrarium/abi"
)

// AgentOption configures DefineAgent. WithSnapshotStore and WithSnapshotCallback are
// AgentOptions too.
type AgentOption[State any] interface {
	applyAgent(*agentConfig[State])
}

type agentConfig[State any] struct {
	flow     sessionFlowConfig[State]
	genOpts  []GenerateOption
	handlers []Handler
	// render renders the base prompt with the session's prompt input.
	render       func(ctx context.Context, input any) (*abi.GenerateActionOptions, []GenerateOption, error)
	defaultInput any
}

type agentOptionFunc[State any] func(*agentConfig[State])

func (f agentOptionFunc[State]) applyAgent(c *agentConfig[State]) { f(c) }

func (o *SnapshotOption[State]) applyAgent(c *agentConfig[State]) { o.applySessionFlow(&c.flow) }

// WithGenerateOpts sets the generate options of every turn: model, config, tools,
// system, output type, middleware... Messages given here (WithMessages) are initial
// context, added to the session once when it starts. These options override the base
// prompt's settings.
func WithGenerateOpts[State any](opts ...GenerateOption) AgentOption[State] {
	return agentOptionFunc[State](func(c *agentConfig[State]) { c.genOpts = append(c.genOpts, opts...) })
}

// WithBasePrompt makes the agent's prompt: rendered again every turn with the session's
// prompt input ({{var}}) and its current custom state ({{@state.field}}); its rendered
// messages precede the conversation and are never stored. input is the default prompt
// input (the zero value: none), stored in the session at its start unless the client
// gives its own with WithPromptInput. A *DataPrompt[In, Out] makes the compiler check
// the input's type.
func WithBasePrompt[State, In any](p PromptRenderer[In], input In) AgentOption[State] {
	return agentOptionFunc[State](func(c *agentConfig[State]) {
		c.render = func(ctx context.Context, stored any) (*abi.GenerateActionOptions, []GenerateOption, error) {
			in, err := convertInput[In](stored)
			if err != nil {
				return nil, nil, err
			}
			a, err := p.Render(ctx, in)
			if err != nil {
				return nil, nil, err
			}
			if g, ok := p.(interface {
				generateOptions(*abi.GenerateActionOptions) []GenerateOption
			}); ok {
				return a, g.generateOptions(a), nil
			}
			return a, []GenerateOption{WithActionOptions(a)}, nil
		}
		c.defaultInput = nil
		if v := reflect.ValueOf(input); v.IsValid() && !v.IsZero() {
			c.defaultInput = input
		}
	})
}

// WithHandlers runs handlers at the points of every turn, in the order given.
func WithHandlers[State any](handlers ...Handler) AgentOption[State] {
	return agentOptionFunc[State](func(c *agentConfig[State]) { c.handlers = append(c.handlers, handlers...) })
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
		return in, fmt.Errorf("agent: encoding the prompt input: %w", err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("agent: the prompt input does not decode into %T: %w", in, err)
	}
	return in, nil
}

// DefineAgent defines a prompt-driven agent: a SessionFlow whose every turn is done for
// you. The turn adds the input to the session, renders the base prompt, generates
// (model chunks streamed as they arrive, tools run automatically), keeps the model's
// messages, and ends the turn (snapshot per the callback). Handlers run at the turn's
// points. A tool that interrupts ends the turn with finish reason "interrupted"; the
// client resumes with SessionFlowInput.Resume.
func DefineAgent[Stream, State any](r *Registry, name string, opts ...AgentOption[State]) *SessionFlow[Stream, State] {
	var cfg agentConfig[State]
	for _, o := range opts {
		o.applyAgent(&cfg)
	}
	var initial generateOptions
	for _, o := range cfg.genOpts {
		o(&initial)
	}
	if initial.err != nil {
		panic(fmt.Sprintf("agent: agent %q: %v", name, initial.err))
	}
	a := &agentLoop[Stream, State]{reg: r, cfg: cfg, initial: initial.messages}
	if initial.hasSystem {
		a.system = abi.NewSystemTextMessage(initial.system)
	}
	f := newSessionFlow(name, a.run, cfg.flow)
	r.mustRegister(f)
	return f
}

type agentLoop[Stream, State any] struct {
	reg     *Registry
	cfg     agentConfig[State]
	initial []*abi.Message
	// system is the system message of WithGenerateOpts(WithSystem(...)): it replaces the
	// base prompt's system messages.
	system *abi.Message
}

func (a *agentLoop[Stream, State]) run(ctx context.Context, inCh <-chan *SessionFlowInput, resp *Responder[Stream], params *SessionFlowParams[Stream, State]) error {
	sess := params.Session
	sess.mu.RLock()
	fresh := sess.parentID == "" && params.Init.State == nil
	sess.mu.RUnlock()
	if fresh && len(a.initial) > 0 {
		sess.AddMessages(a.initial...)
	}
	if sess.PromptInput() == nil && a.cfg.defaultInput != nil {
		sess.SetPromptInput(a.cfg.defaultInput)
	}
	for input := range inCh {
		halt, err := a.turn(ctx, resp, sess, input)
		if err != nil {
			return err
		}
		if halt {
			return nil
		}
	}
	return nil
}

// turn runs one turn and reports whether a handler halted the session.
func (a *agentLoop[Stream, State]) turn(ctx context.Context, resp *Responder[Stream], sess *Session[State], input *SessionFlowInput) (halt bool, err error) {
	hin := &abi.HandlerInput{Turn: sess.TurnIndex(), Input: input.Messages}
	if input.Resume == nil {
		sess.AddMessages(input.Messages...)
	}
	if d, err := a.handle(ctx, hin, abi.HookTurnStart); err != nil || d != nil {
		return a.follow(resp, sess, d, err)
	}

	var opts []GenerateOption
	var rendered []*abi.Message
	if a.cfg.render != nil {
		ao, extra, err := a.cfg.render(ctx, sess.PromptInput())
		if err != nil {
			return false, fmt.Errorf("agent: rendering the base prompt: %w", err)
		}
		rendered, opts = ao.Messages, extra
	}
	if a.system != nil {
		rendered = slices.DeleteFunc(slices.Clone(rendered), func(m *abi.Message) bool { return m.Role == abi.RoleSystem })
		rendered = append([]*abi.Message{a.system}, rendered...)
	}
	// The options' system and prompt are folded into rendered above, or meaningless
	// for an agent (the user's input is the prompt).
	opts = append(opts, a.cfg.genOpts...)
	opts = append(opts, func(o *generateOptions) { o.hasSystem, o.hasPrompt = false, false })
	history := sess.Messages()
	sent := append(append([]*abi.Message(nil), rendered...), history...)
	var final []*abi.Message
	opts = append(opts, WithMessages(sent...), func(o *generateOptions) { o.onHistory = func(m []*abi.Message) { final = m } })
	if input.Resume != nil {
		opts = append(opts, WithToolResponses(input.Resume.Respond...), WithToolRestarts(input.Resume.Restart...))
	}
	if d, err := a.handle(ctx, hin, abi.HookBeforeGenerate); err != nil || d != nil {
		return a.follow(resp, sess, d, err)
	}

	var res *abi.GenerateResponse
	for v, err := range GenerateStream(ctx, a.reg, opts...) {
		if errors.Is(err, ErrInvalidResume) {
			// The client's answer does not fit what is pending: refuse it, change
			// nothing, and keep the session open for a corrected one.
			if err := resp.reject(err); err != nil {
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

	// The session keeps the conversation as the call ended it: the tool exchanges of
	// this turn, the resolved interrupts of a resume, and the final message. Messages
	// added by tools or handlers while the model ran are kept after them.
	now := sess.Messages()
	var extra []*abi.Message
	if len(now) > len(history) && commonPrefix(now, history) == len(history) {
		extra = now[len(history):]
	}
	kept := append(append(append([]*abi.Message(nil), final[len(rendered):]...), res.Message), extra...)
	sess.SetMessages(kept)
	if res.FinishReason == abi.FinishInterrupted {
		// Stream the pending requests with their interrupt metadata, so the client
		// can answer them.
		if err := resp.SendChunk(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: PendingToolRequests(kept)}); err != nil {
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
	return false, resp.endTurnWith(reason)
}

// handle runs the handlers at a point; it returns a directive only when it is not
// continue.
func (a *agentLoop[Stream, State]) handle(ctx context.Context, in *abi.HandlerInput, point abi.HookPoint) (*abi.Directive, error) {
	if len(a.cfg.handlers) == 0 {
		return nil, nil
	}
	hin := *in
	hin.Point = point
	d, err := RunHandlers(ctx, a.cfg.handlers, &hin)
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
	if last.Role != abi.RoleModel {
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
