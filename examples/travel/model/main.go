// Command model is the travel example's model as a Terrarium plugin, serving
// /model/travel/rules: the rules of package rules (a rule-based stand-in, not a
// language model), so that the agent file travel.yaml runs offline. The offline
// plugin (plugins/offline) cannot drive a routed agent: it fills JSON schemas with
// placeholder values, so it scores every route 0 and collects nothing.
//
// terrarium serve builds it from this directory; by hand:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o travel.wasm .
package main

import (
	"context"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/examples/travel/rules"
	"github.com/terrarium-ai/terrarium/sdk"
)

func main() {
	sdk.Plugin(sdk.Info{
		Name:        "travel",
		Version:     "1.0.0",
		Description: "The travel example's rule-based model, for a routed agent with routes flight and hotel. Not a language model.",
	})
	sdk.Model("rules", &abi.ModelInfo{
		Label: "Travel rules (rule-based, not a language model)",
		Supports: &abi.ModelSupports{
			Multiturn:   true,
			SystemRole:  true,
			Output:      []string{"text", "json"},
			Constrained: abi.ConstrainedNone,
		},
		Stage: abi.StageStable,
	}, generate)
}

// generate answers by the rules, streaming the answer a word at a time as a model
// would.
func generate(_ context.Context, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
	text := rules.Answer(req)
	for _, w := range strings.SplitAfter(text, " ") {
		if err := sdk.StreamChunk(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{abi.NewTextPart(w)}}); err != nil {
			return nil, err
		}
	}
	return &abi.GenerateResponse{Message: abi.NewModelTextMessage(text), FinishReason: abi.FinishStop}, nil
}
