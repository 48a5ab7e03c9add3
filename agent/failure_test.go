package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// A tool's error handed to the model carries its code and message: a plugin's
// invalid_input stays invalid_input.
func TestToolErrorToTheModelCarriesItsCode(t *testing.T) {
	r := agent.NewRegistry()
	picky := agent.NewTool("picky", "refuses", func(ctx context.Context, in struct{}) (string, error) {
		return "", fmt.Errorf("plugin p: %w", &abi.Error{Code: abi.CodeInvalidInput, Message: "n must be even"})
	})
	m := testmodel.Define(r, "test/m").Reply(toolReq("picky", "1", nil)).ReplyText("ok")
	if _, err := agent.Generate(t.Context(), r, agent.WithModelName("test/m"), agent.WithPrompt("go"),
		agent.WithTools(picky), agent.WithReturnToolErrors(true)); err != nil {
		t.Fatal(err)
	}
	out, _ := m.LastRequest().Messages[2].Content[0].ToolResponse.Output.(map[string]any)
	if out["code"] != string(abi.CodeInvalidInput) || out["error"] != "n must be even" {
		t.Errorf("the model was told %v", out)
	}
}

// A panicking tool fails the call, whatever the policy, naming the tool; the process
// lives on.
func TestToolPanicFailsTheCall(t *testing.T) {
	r := agent.NewRegistry()
	bomb := agent.NewTool("bomb", "panics", func(ctx context.Context, in struct{}) (string, error) {
		var m map[string]int
		m["boom"] = 1
		return "", nil
	})
	for _, toModel := range []bool{false, true} {
		testmodel.Define(r, fmt.Sprintf("test/bomb%v", toModel)).Reply(toolReq("bomb", "1", nil)).ReplyText("unreached")
		_, err := agent.Generate(t.Context(), r, agent.WithModelName(fmt.Sprintf("test/bomb%v", toModel)), agent.WithPrompt("go"),
			agent.WithTools(bomb), agent.WithReturnToolErrors(toModel))
		var pe *agent.PanicError
		var ae *agent.ActionError
		if !errors.As(err, &pe) || !errors.As(err, &ae) || ae.Type != agent.ActionTypeTool || ae.Name != "bomb" || !strings.Contains(err.Error(), "nil map") {
			t.Errorf("to model %v: %v, want the tool's panic", toModel, err)
		}
		if pe != nil && !strings.Contains(string(pe.Stack), "failure_test.go") {
			t.Errorf("the panic's stack does not show where it happened:\n%s", pe.Stack)
		}
		if got := agent.AsError(err); got.Code != abi.CodeInternal {
			t.Errorf("a panic is classified %q", got.Code)
		}
	}
}

// Every failure names the action that failed: the model, the tool (under the fail
// policy), the handler; a model's and a handler's panics too.
func TestFailuresNameTheirAction(t *testing.T) {
	r := agent.NewRegistry()
	agent.DefineModel(r, "test/down", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		return nil, &abi.Error{Code: abi.CodeUnavailable, Message: "provider down", Status: 503}
	})
	agent.DefineModel(r, "test/crash", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		panic("model bug")
	})
	failing := agent.NewTool("failing", "fails", func(ctx context.Context, in struct{}) (string, error) {
		return "", errors.New("disk full")
	})
	testmodel.Define(r, "test/caller").Reply(toolReq("failing", "1", nil)).ReplyText("unreached")
	name := func(err error) string {
		var ae *agent.ActionError
		if !errors.As(err, &ae) {
			return fmt.Sprintf("no ActionError in %v", err)
		}
		return string(ae.Type) + " " + ae.Name
	}
	_, err := agent.Generate(t.Context(), r, agent.WithModelName("test/down"), agent.WithPrompt("hi"))
	if got := name(err); got != "model test/down" || agent.AsError(err).Code != abi.CodeUnavailable {
		t.Errorf("model error: %s, %v", got, err)
	}
	_, err = agent.Generate(t.Context(), r, agent.WithModelName("test/crash"), agent.WithPrompt("hi"))
	var pe *agent.PanicError
	if got := name(err); got != "model test/crash" || !errors.As(err, &pe) {
		t.Errorf("model panic: %s, %v", got, err)
	}
	_, err = agent.Generate(t.Context(), r, agent.WithModelName("test/caller"), agent.WithPrompt("hi"), agent.WithTools(failing))
	if got := name(err); got != "tool failing" || !errors.Is(err, agent.ErrToolFailed) {
		t.Errorf("tool error: %s, %v", got, err)
	}
	h := agent.NewHandler("h", "panics", func(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error) {
		panic("handler bug")
	}, abi.HookTurnStart)
	_, err = agent.RunHandlers(t.Context(), []agent.Handler{h}, &abi.HandlerInput{Point: abi.HookTurnStart})
	if got := name(err); got != "handler h" || !errors.As(err, &pe) {
		t.Errorf("handler panic: %s, %v", got, err)
	}
}

func TestAsError(t *testing.T) {
	plugin := &abi.Error{Code: abi.CodeInvalidInput, Message: "bad n", Status: 400}
	for _, tc := range []struct {
		err  error
		code abi.ErrorCode
		msg  string
	}{
		{fmt.Errorf("tool t: %w: %w", agent.ErrToolFailed, plugin), abi.CodeInvalidInput, "bad n"},
		{fmt.Errorf("tool t: %w: x", agent.ErrInvalidToolInput), abi.CodeInvalidInput, "tool t: invalid tool input: x"},
		{fmt.Errorf("%w \"x\"", agent.ErrUnknownTool), abi.CodeNotFound, "unknown tool \"x\""},
		{fmt.Errorf("%w: 5", agent.ErrMaxTurns), abi.CodeLimitExceeded, "exceeded maximum turns: 5"},
		{fmt.Errorf("plugin p: timed out: %w", context.DeadlineExceeded), abi.CodeLimitExceeded, "plugin p: timed out: context deadline exceeded"},
		{errors.New("anything"), abi.CodeInternal, "anything"},
	} {
		got := agent.AsError(tc.err)
		if got.Code != tc.code || got.Message != tc.msg {
			t.Errorf("AsError(%v) = %+v, want code %s, message %q", tc.err, got, tc.code, tc.msg)
		}
	}
	// The plugin's own error keeps its status, and is a copy.
	got := agent.AsError(fmt.Errorf("x: %w", plugin))
	got.Message = "changed"
	if got.Status != 400 || plugin.Message != "bad n" {
		t.Errorf("AsError of a plugin error: %+v, and the original became %+v", got, plugin)
	}
}

// The policy: unset, Generate fails and WithDefaults leaves it unset; set, it is
// claimed once.
func TestToolErrorPolicySettings(t *testing.T) {
	s, err := agent.NewSettings()
	if err != nil || s.ToolErrors != "" {
		t.Fatalf("default policy %q, %v", s.ToolErrors, err)
	}
	s, _ = agent.NewSettings(agent.WithReturnToolErrors(true))
	if s.ToolErrors != agent.ToolErrorsToModel {
		t.Errorf("WithReturnToolErrors(true) = %q", s.ToolErrors)
	}
	s, _ = agent.NewSettings(agent.WithReturnToolErrors(false))
	if s.ToolErrors != agent.ToolErrorsFail {
		t.Errorf("WithReturnToolErrors(false) = %q", s.ToolErrors)
	}
	if _, err := agent.NewSettings(agent.WithReturnToolErrors(false), agent.WithSettings(s)); !errors.Is(err, agent.ErrInvalidOption) {
		t.Errorf("the policy given twice: %v", err)
	}
}
