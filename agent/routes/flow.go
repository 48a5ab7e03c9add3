package routes

import (
	"context"
	"errors"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
)

// Status is what a routed flow streams after each turn's text: where the conversation
// stands, the tools run, and whether the route completed.
type Status struct {
	Route         string     `json:"route,omitempty"`
	Step          string     `json:"step,omitempty"`
	RouteComplete bool       `json:"routeComplete,omitempty"`
	ToolCalls     []ToolCall `json:"toolCalls,omitempty"`
	Warnings      []Warning  `json:"warnings,omitempty"`
}

// DefineFlow binds the agent to a session flow and registers it: every turn of a
// connection is a Respond on the session's messages, its State kept as the session's
// custom state, so snapshots, resume, branching, detach and streaming work as for any
// flow. The answer streams as generation chunks, then a Status. A session's prompt
// input (session.WithPromptInput), a JSON object, overrides the agent's context.
//
// A turn's warnings are in its Status. A turn whose answer is not canned in strict
// composition (ErrNotCanned), or, for a strict agent, whose extracted data is invalid
// (ErrInvalidData), whose model answer does not match its schema
// (agent.ErrInvalidOutput) or whose template names a missing variable
// (ErrMissingVariable, with MissingError), is refused: the client's Receive yields the
// error, the session is unchanged, and the connection stays open. The agent's
// persistence (WithPersistence) is not used: the session's snapshots keep its State.
// A turn's messages must be the user's. DefineFlow panics if the agent's definition is
// invalid, an option is invalid, or the name is taken.
func DefineFlow(r *agent.Registry, name string, a *Agent, opts ...session.SessionFlowOption[State]) *session.SessionFlow[Status, State] {
	if err := a.Validate(); err != nil {
		panic(fmt.Sprintf("routes: flow %q: %v", name, err))
	}
	body := func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, State]) error {
		for input := range inCh {
			if err := a.flowTurn(ctx, resp, p.Session, input); err != nil {
				return err
			}
		}
		return nil
	}
	return session.DefineSessionFlow(r, name, body, opts...)
}

// flowTurn runs one turn of a flow.
func (a *Agent) flowTurn(ctx context.Context, resp *session.Responder[Status], sess *session.Session[State], input *session.SessionFlowInput) error {
	refuse := func(err error) error {
		if err := resp.Refuse(err); err != nil {
			return err
		}
		return resp.EndTurn()
	}
	if err := checkInput(input); err != nil {
		return refuse(err)
	}
	vars, err := toData(sess.PromptInput())
	if err != nil {
		return refuse(fmt.Errorf("routes: %w: the session's prompt input is the context, a JSON object: %v", agent.ErrInvalidInput, err))
	}
	st := sess.Custom()
	if st.ID == "" {
		st.ID = sess.ID()
	}
	history := append(sess.Messages(), input.Messages...)
	out, err := a.respond(ctx, RespondInput{History: history, Session: &st, Context: vars}, func(delta string) error {
		return resp.SendChunk(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{abi.NewTextPart(delta)}})
	})
	if errors.Is(err, ErrInvalidData) || errors.Is(err, ErrNotCanned) || errors.Is(err, ErrMissingVariable) || errors.Is(err, agent.ErrInvalidOutput) {
		// What a strict agent refuses ends the turn, not the session.
		return refuse(err)
	}
	if err != nil {
		return err
	}
	sess.AddMessages(input.Messages...)
	if out.Message != "" {
		sess.AddMessages(abi.NewModelTextMessage(out.Message))
	}
	sess.SetCustom(*out.Session)
	status := Status{RouteComplete: out.RouteComplete, ToolCalls: out.ToolCalls, Warnings: out.Warnings}
	if r := out.Session.CurrentRoute; r != nil {
		status.Route = r.ID
	}
	if s := out.Session.CurrentStep; s != nil {
		status.Step = s.ID
	}
	if err := resp.SendStatus(status); err != nil {
		return err
	}
	return resp.EndTurnWith(abi.FinishStop)
}

// checkInput accepts a turn of user messages only: the conversation's other messages
// are the agent's own.
func checkInput(in *session.SessionFlowInput) error {
	switch {
	case in.Resume != nil:
		return fmt.Errorf("routes: %w: a routed flow has no interrupted tool requests to resume", agent.ErrInvalidInput)
	case len(in.Tools) > 0:
		return fmt.Errorf("routes: %w: a routed flow takes no client tools: its routes decide its tools", agent.ErrInvalidInput)
	case in.Output != nil:
		return fmt.Errorf("routes: %w: a routed flow's answers are its routes': it takes no output format", agent.ErrInvalidInput)
	}
	if len(in.Messages) == 0 {
		return fmt.Errorf("routes: %w: a turn needs a user message", agent.ErrInvalidInput)
	}
	for _, m := range in.Messages {
		if m.Role != abi.RoleUser {
			return fmt.Errorf("routes: %w: a turn's messages are the user's, not %s", agent.ErrInvalidInput, m.Role)
		}
	}
	return nil
}
