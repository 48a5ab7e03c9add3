package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// buildRequest assembles the model request for one turn, adding format instructions and
// documents where the model needs them in the prompt.
func buildRequest(m Model, tools []Tool, a *abi.GenerateActionOptions, msgs []*abi.Message) *abi.GenerateRequest {
	supports := supportsOf(m)
	req := &abi.GenerateRequest{
		Messages:   abi.WithoutInjected(msgs),
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
			req.Messages = injectPart(req.Messages, abi.NewTextPart(instructions), abi.PurposeOutput)
		}
	}
	if len(a.Docs) > 0 && !supports.Context {
		req.Messages = injectPart(req.Messages, abi.NewTextPart(contextText(a.Docs)), abi.PurposeContext)
	}
	return req
}

func supportsOf(m Model) *abi.ModelSupports {
	if s := m.Info().Supports; s != nil {
		return s
	}
	return &abi.ModelSupports{}
}

// checkConfig validates a call's config against the config schema the model declares,
// before the model is called, so a typo in a setting is an error naming it rather than
// a setting the provider silently ignores.
func checkConfig(m Model, config any) error {
	cs := m.Info().ConfigSchema
	if cs == nil || config == nil {
		return nil
	}
	v, err := schema.Compile(cs)
	if err != nil {
		return fmt.Errorf("agent: model %s declares an invalid config schema: %w", m.Name(), err)
	}
	raw, err := json.Marshal(config)
	if err != nil {
		return fmt.Errorf("agent: %w: model %s: encoding the config: %v", ErrInvalidConfig, m.Name(), err)
	}
	if err := v.ValidateJSON(raw); err != nil {
		return fmt.Errorf("agent: %w: model %s: %v", ErrInvalidConfig, m.Name(), err)
	}
	return nil
}

// The text with which a system message is simulated for a model without a system role,
// as Genkit simulates it.
const (
	systemPreface         = "SYSTEM INSTRUCTIONS:\n"
	systemAcknowledgement = "Understood."
)

// adaptRequest fits a request to what the model says it supports, as Genkit does: a
// system message becomes a user message for a model without a system role (followed by
// an acknowledgement when the model takes several turns, folded into the first user
// message when it takes one); media, tools, several turns and a tool choice the model
// cannot take are refused with ErrUnsupported before the model is called. The request
// given is not changed.
func adaptRequest(m Model, req *abi.GenerateRequest) (*abi.GenerateRequest, error) {
	s := supportsOf(m)
	unsupported := func(format string, args ...any) error {
		return fmt.Errorf("agent: %w: model %s %s", ErrUnsupported, m.Name(), fmt.Sprintf(format, args...))
	}
	if !s.Tools && len(req.Tools) > 0 {
		return nil, unsupported("does not support tools, but %d were offered", len(req.Tools))
	}
	if !s.ToolChoice && req.ToolChoice != "" && req.ToolChoice != abi.ToolChoiceAuto {
		return nil, unsupported("does not support a tool choice, but %q was asked for", req.ToolChoice)
	}
	if !s.Multiturn || !s.Media { // else nothing to check: the history is not read
		turns := 0
		for _, msg := range req.Messages {
			if msg.Role != abi.RoleSystem {
				turns++
			}
			if s.Media {
				continue
			}
			for _, p := range msg.Content {
				if p.IsMedia() {
					return nil, unsupported("does not support media, but a %s message holds a media part", msg.Role)
				}
			}
		}
		if !s.Multiturn && turns > 1 {
			return nil, unsupported("takes one message, but the request holds %d", turns)
		}
	}
	if s.SystemRole {
		return req, nil
	}
	sys := -1
	for i, msg := range req.Messages {
		if msg.Role == abi.RoleSystem {
			sys = i
			break
		}
	}
	if sys < 0 {
		return req, nil
	}
	out := *req
	preface := append([]*abi.Part{abi.NewTextPart(systemPreface)}, req.Messages[sys].Content...)
	rest := append(append([]*abi.Message(nil), req.Messages[:sys]...), req.Messages[sys+1:]...)
	if !s.Multiturn {
		// One message only: the instructions go before the user's text.
		for i, msg := range rest {
			if msg.Role == abi.RoleUser {
				c := *msg
				c.Content = append(append(preface, abi.NewTextPart("\n\n")), msg.Content...)
				rest[i] = &c
				out.Messages = rest
				return &out, nil
			}
		}
		out.Messages = append([]*abi.Message{abi.NewUserMessage(preface...)}, rest...)
		return &out, nil
	}
	msgs := append([]*abi.Message(nil), req.Messages[:sys]...)
	msgs = append(msgs, abi.NewUserMessage(preface...), abi.NewModelTextMessage(systemAcknowledgement))
	out.Messages = append(msgs, req.Messages[sys+1:]...)
	return &out, nil
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

// injectPart appends a part, marked with its purpose, to the last user message (or a
// new one), copying that message so the caller's history is untouched.
func injectPart(msgs []*abi.Message, p *abi.Part, purpose string) []*abi.Message {
	p.Metadata = map[string]any{"purpose": purpose}
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
