package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

func TestRegistryKeysAndDescriptors(t *testing.T) {
	r := agent.NewRegistry()
	info := &abi.ModelInfo{Label: "Echo", Supports: &abi.ModelSupports{Multiturn: true}, ConfigSchema: map[string]any{"type": "object"}, Stage: abi.StageStable}
	agent.DefineModel(r, "local/echo", info, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		return &abi.GenerateResponse{Message: req.Messages[len(req.Messages)-1]}, nil
	})
	agent.DefineTool(r, "add", "adds", func(ctx context.Context, in addIn) (int, error) { return in.A + in.B, nil })

	descs := r.Actions()
	if len(descs) != 2 || descs[0].Key != "/model/local/echo" || descs[1].Key != "/tool/add" {
		t.Fatalf("actions = %+v", descs)
	}
	md := descs[0].Metadata["model"].(map[string]any)
	if md["label"] != "Echo" || md["customOptions"] == nil || md["stage"] != abi.StageStable {
		t.Errorf("model metadata = %v", md)
	}
	tool := descs[1]
	if tool.Description != "adds" || tool.InputSchema["type"] != "object" || tool.OutputSchema["type"] != "integer" {
		t.Errorf("tool descriptor = %+v", tool)
	}
	if _, err := r.LookupModel("local/echo"); err != nil {
		t.Error(err)
	}
	if _, err := r.LookupTool("add"); err != nil {
		t.Error(err)
	}
	if _, err := r.LookupTool("local/echo"); !errors.Is(err, agent.ErrNotFound) {
		t.Errorf("a model found as a tool: %v", err)
	}

	err := r.Register(agent.NewTool("add", "again", func(ctx context.Context, in addIn) (int, error) { return 0, nil }))
	if !errors.Is(err, agent.ErrAlreadyRegistered) || !strings.Contains(err.Error(), "/tool/add") {
		t.Errorf("duplicate: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("DefineTool with a taken name did not panic")
			}
		}()
		agent.DefineTool(r, "add", "again", func(ctx context.Context, in addIn) (int, error) { return 0, nil })
	}()
	if err := r.Register(agent.NewTool("bad name", "x", func(ctx context.Context, in addIn) (int, error) { return 0, nil })); err == nil {
		t.Error("a name with a space was accepted")
	}
	if !r.Unregister("/tool/add") || r.Lookup("/tool/add") != nil {
		t.Error("Unregister did not remove the tool")
	}
}
