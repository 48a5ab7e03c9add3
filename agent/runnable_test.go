package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

func TestAsRunnableModelStreamsAndAnswers(t *testing.T) {
	m := agent.NewModel("local/echo", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		text := req.Messages[len(req.Messages)-1].Text()
		if cb != nil {
			if err := cb(ctx, &abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{abi.NewTextPart(text)}}); err != nil {
				return nil, err
			}
		}
		return &abi.GenerateResponse{Message: abi.NewModelTextMessage(text), FinishReason: abi.FinishStop}, nil
	})
	run, ok := agent.AsRunnable(m)
	if !ok {
		t.Fatal("a model is not runnable")
	}
	var chunks []string
	out, err := run.RunJSON(t.Context(), json.RawMessage(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`),
		func(_ context.Context, c json.RawMessage) error {
			chunks = append(chunks, string(c))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	var resp abi.GenerateResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.Text() != "hi" {
		t.Fatalf("output %s: %v", out, err)
	}
	if len(chunks) != 1 || !strings.Contains(chunks[0], `"text":"hi"`) {
		t.Errorf("chunks = %q", chunks)
	}

	for _, bad := range []string{`{"messages": 3}`, `null`, `{"messages":[{"role":"user","content":[{"bogus":1}]}]}`} {
		if _, err := run.RunJSON(t.Context(), json.RawMessage(bad), nil); !errors.Is(err, agent.ErrInvalidInput) {
			t.Errorf("input %s: error %v, want ErrInvalidInput", bad, err)
		}
	}
}

func TestAsRunnableToolChecksItsInput(t *testing.T) {
	tool := agent.NewTool("add", "adds", func(ctx context.Context, in addIn) (int, error) { return in.A + in.B, nil })
	run, ok := agent.AsRunnable(tool)
	if !ok {
		t.Fatal("a tool is not runnable")
	}
	out, err := run.RunJSON(t.Context(), json.RawMessage(`{"a":2,"b":3}`), nil)
	if err != nil || string(out) != "5" {
		t.Fatalf("add(2, 3) = %s, %v", out, err)
	}
	if _, err := run.RunJSON(t.Context(), json.RawMessage(`{"a":"two"}`), nil); !errors.Is(err, agent.ErrInvalidToolInput) {
		t.Errorf("a string for an integer: %v, want ErrInvalidToolInput", err)
	}
}

func TestAsRunnableRefusesWhatCannotRunAlone(t *testing.T) {
	h := agent.NewHandler("h", "", func(context.Context, *abi.HandlerInput) (*abi.Directive, error) { return nil, nil }, abi.HookTurnStart)
	if _, ok := agent.AsRunnable(h); ok {
		t.Error("a handler, which needs a session, is runnable")
	}
}
