package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// The model checks follow Genkit's model tests. They go through agent.Generate, the
// path every caller uses (format instructions for models without native constrained
// output included), and judge the form of the answers, not their wisdom: a model is
// asked for what it claims to support and must give a well-formed answer of that kind.

// weatherTool is the tool offered by the tool check.
var weatherTool = agent.NewTool("get_weather", "Returns the current weather in a city.",
	func(ctx context.Context, in struct {
		City string `json:"city"`
	}) (map[string]any, error) {
		return map[string]any{"city": in.City, "temperatureC": 21, "sky": "clear"}, nil
	})

// tinyPNG is a 1x1 red PNG.
const tinyPNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

func (s *suite) checkModel(md plugin.ModelDescriptor) {
	name := "model " + md.Name
	m, err := s.reg.LookupModel(s.desc.Name + "/" + md.Name)
	if err != nil {
		s.record(name, Fail, 0, "not in the registry: %v", err)
		return
	}
	sup := m.Info().Supports
	if sup == nil {
		sup = &abi.ModelSupports{}
	}
	claims := func(check string, claimed bool, fn func() (string, error)) {
		if !claimed {
			s.record(fmt.Sprintf("%s: %s", name, check), Skip, 0, "not claimed in supports")
			return
		}
		s.timed(fmt.Sprintf("%s: %s", name, check), fn)
	}
	gen := func(opts ...agent.GenerateOption) (*abi.GenerateResponse, error) {
		ctx, _ := s.session()
		return agent.Generate(ctx, s.reg, append([]agent.GenerateOption{agent.WithModel(m)}, opts...)...)
	}

	s.timed(name+": text", func() (string, error) {
		resp, err := gen(agent.WithPrompt("Say hello in one short sentence."))
		if err != nil {
			return "", err
		}
		return answered(resp)
	})
	claims("multi-turn history", sup.Multiturn, func() (string, error) {
		resp, err := gen(agent.WithMessages(
			abi.NewUserTextMessage("Remember this code word: tangerine."),
			abi.NewModelTextMessage("Understood, the code word is tangerine."),
			abi.NewUserTextMessage("What is the code word?"),
		))
		if err != nil {
			return "", err
		}
		return answered(resp)
	})
	claims("system role", sup.SystemRole, func() (string, error) {
		resp, err := gen(agent.WithSystem("You answer in lower case only."), agent.WithPrompt("Say hello."))
		if err != nil {
			return "", err
		}
		return answered(resp)
	})
	claims("tool request and follow-up", sup.Tools, func() (string, error) {
		opts := []agent.GenerateOption{
			agent.WithPrompt("use get_weather: what is the weather in Paris right now?"),
			agent.WithTools(weatherTool),
			agent.WithReturnToolRequests(true),
		}
		if sup.ToolChoice {
			opts = append(opts, agent.WithToolChoice(abi.ToolChoiceRequired))
		}
		resp, err := gen(opts...)
		if err != nil {
			return "", err
		}
		reqs := resp.ToolRequests()
		if len(reqs) == 0 {
			return "", fmt.Errorf("claims tools but asked to use get_weather answered %q without a tool request", truncate(resp.Text(), 100))
		}
		tr := reqs[0]
		if tr.Name != "get_weather" {
			return "", fmt.Errorf("requested tool %q, which was not offered", tr.Name)
		}
		if err := schema.Validate(weatherTool.Definition().InputSchema, orEmpty(tr.Input)); err != nil {
			return "", fmt.Errorf("the tool request's input does not match the tool's schema: %v", err)
		}
		// The follow-up: the tool's answer goes back, the model answers.
		history := append(append([]*abi.Message(nil), resp.Request.Messages...), resp.Message,
			abi.NewToolMessage(&abi.ToolResponse{Name: tr.Name, Ref: tr.Ref, Output: map[string]any{"city": "Paris", "temperatureC": 21, "sky": "clear"}}))
		final, err := gen(agent.WithMessages(history...), agent.WithTools(weatherTool), agent.WithReturnToolRequests(true))
		if err != nil {
			return "", fmt.Errorf("the follow-up with the tool's response failed: %w", err)
		}
		if _, err := answered(final); err != nil && len(final.ToolRequests()) == 0 {
			return "", fmt.Errorf("the follow-up: %w", err)
		}
		return fmt.Sprintf("requested get_weather %v (ref %q), then answered", tr.Input, tr.Ref), nil
	})
	jsonOutput := slices.Contains(sup.Output, "json") || (sup.Constrained != "" && sup.Constrained != abi.ConstrainedNone)
	claims("structured output", jsonOutput, func() (string, error) {
		type person struct {
			Name string `json:"name"`
			Age  int    `json:"age"`
		}
		ctx, _ := s.session()
		out, resp, err := agent.GenerateData[person](ctx, s.reg, agent.WithModel(m),
			agent.WithPrompt("Invent a person: give a name and an age."))
		if errors.Is(err, agent.ErrInvalidOutput) {
			return "", fmt.Errorf("claims JSON output but answered %q: %v", truncate(resp.Text(), 100), err)
		}
		if err != nil {
			return "", err
		}
		how := "through format instructions"
		if resp.Request.Output.Constrained {
			how = "constrained natively"
		}
		return fmt.Sprintf("%+v, %s", *out, how), nil
	})
	s.timed(name+": streaming", func() (string, error) {
		ctx, _ := s.session()
		var chunks []*abi.GenerateResponseChunk
		var final *abi.GenerateResponse
		for v, err := range agent.GenerateStream(ctx, s.reg, agent.WithModel(m), agent.WithPrompt("Count from one to five.")) {
			if err != nil {
				return "", err
			}
			if v.Done {
				final = v.Response
			} else {
				chunks = append(chunks, v.Chunk)
			}
		}
		if final == nil {
			return "", fmt.Errorf("no final response after the chunks")
		}
		for _, c := range chunks {
			if c.Role != abi.RoleModel {
				return "", fmt.Errorf("a chunk has role %q, want model", c.Role)
			}
			if c.Index != 0 {
				return "", fmt.Errorf("a chunk has index %d, want 0 for the first message", c.Index)
			}
		}
		var acc abi.Accumulator
		for _, c := range chunks {
			acc.Add(c)
		}
		if got, want := acc.Message(abi.RoleModel).Text(), final.Text(); got != want && !strings.HasPrefix(want, got) {
			return "", fmt.Errorf("the chunks say %q, the final response %q", truncate(got, 80), truncate(want, 80))
		}
		if _, err := answered(final); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d chunks, then the final response", len(chunks)), nil
	})
	claims("media input", sup.Media, func() (string, error) {
		resp, err := gen(agent.WithMessages(abi.NewUserMessage(abi.NewTextPart("What color is this image?"), abi.NewMediaPart("image/png", tinyPNG))))
		if err != nil {
			return "", err
		}
		return answered(resp)
	})
	claims("documents as context", sup.Context, func() (string, error) {
		resp, err := gen(agent.WithPrompt("What is the capital of Xanadu?"), agent.WithDocs(abi.NewTextDocument("The capital of Xanadu is Shangdu.")))
		if err != nil {
			return "", err
		}
		return answered(resp)
	})
}

// answered checks a response is a well-formed answer: a model message with content, a
// known finish reason.
func answered(resp *abi.GenerateResponse) (string, error) {
	if resp.Message == nil {
		return "", fmt.Errorf("the response has no message")
	}
	if resp.Message.Role != abi.RoleModel {
		return "", fmt.Errorf("the response's message has role %q, want model", resp.Message.Role)
	}
	if len(resp.Message.Content) == 0 {
		return "", fmt.Errorf("the response's message is empty")
	}
	switch resp.FinishReason {
	case "", abi.FinishStop, abi.FinishLength, abi.FinishBlocked, abi.FinishAborted, abi.FinishInterrupted, abi.FinishOther, abi.FinishUnknown:
	default:
		return "", fmt.Errorf("unknown finish reason %q", resp.FinishReason)
	}
	text := resp.Text()
	if text == "" && len(resp.ToolRequests()) == 0 {
		return "", fmt.Errorf("the response holds neither text nor a tool request")
	}
	return "answered " + truncate(fmt.Sprintf("%q", text), 100), nil
}

func orEmpty(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}
