package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/internal/genkitref"
)

// generateCase is one case of Genkit's cross-language generate conformance suite.
type generateCase struct {
	Name           string  `yaml:"name"`
	Stream         bool    `yaml:"stream"`
	Input          any     `yaml:"input"`
	ModelResponses []any   `yaml:"modelResponses"`
	StreamChunks   [][]any `yaml:"streamChunks"`
	ExpectResponse any     `yaml:"expectResponse"`
	ExpectChunks   []any   `yaml:"expectChunks"`
}

// TestGenkitGenerateConformance runs every case of Genkit's generate.yaml against
// Generate with the programmable model and compares responses and chunks field by field.
func TestGenkitGenerateConformance(t *testing.T) {
	genkitref.Require(t)
	raw, err := genkitref.File("generate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests []generateCase `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &suite); err != nil {
		t.Fatal(err)
	}
	if len(suite.Tests) == 0 {
		t.Fatal("generate.yaml has no cases")
	}
	for _, tc := range suite.Tests {
		t.Run(tc.Name, func(t *testing.T) { runGenerateCase(t, tc) })
	}
}

func runGenerateCase(t *testing.T, tc generateCase) {
	r := agent.NewRegistry()
	model := testmodel.Define(r, "programmableModel")
	draft7 := map[string]any{"$schema": "http://json-schema.org/draft-07/schema#"}
	agent.DefineTool(r, "testTool", "description",
		func(ctx context.Context, in any) (any, error) { return "tool called", nil },
		agent.WithToolInputSchema(draft7), agent.WithToolOutputSchema(draft7))

	for i, mr := range tc.ModelResponses {
		var turn testmodel.Turn
		decode(t, mr, &turn.Response)
		if i < len(tc.StreamChunks) {
			decode(t, tc.StreamChunks[i], &turn.Chunks)
		}
		model.Push(turn)
	}
	var input abi.GenerateActionOptions
	decode(t, tc.Input, &input)

	ctx := context.Background()
	var resp *abi.GenerateResponse
	var chunks []*abi.GenerateResponseChunk
	if tc.Stream {
		for v, err := range agent.GenerateStream(ctx, r, agent.WithActionOptions(&input)) {
			if err != nil {
				t.Fatal(err)
			}
			if v.Done {
				resp = v.Response
			} else {
				chunks = append(chunks, v.Chunk)
			}
		}
	} else {
		var err error
		if resp, err = agent.Generate(ctx, r, agent.WithActionOptions(&input)); err != nil {
			t.Fatal(err)
		}
	}
	if err := genkitref.ValidateValue("GenerateResponse", resp); err != nil {
		t.Errorf("response does not validate against Genkit's schema: %v", err)
	}
	for _, d := range diffJSON("response", toJSON(t, tc.ExpectResponse), toJSON(t, resp)) {
		t.Error(d)
	}
	if tc.ExpectChunks != nil || len(chunks) > 0 {
		for _, d := range diffJSON("chunks", toJSON(t, tc.ExpectChunks), toJSON(t, chunks)) {
			t.Error(d)
		}
	}
	if n := model.Pending(); n != 0 {
		t.Errorf("%d scripted model responses were not used", n)
	}
}

// decode converts a YAML-decoded value into a typed one through JSON.
func decode(t *testing.T, v any, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
}

// toJSON returns v as generic JSON (maps, slices, float64 ...).
func toJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffJSON lists every path where got differs from want.
func diffJSON(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want object %v, got %v", path, want, got)}
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !wok:
				out = append(out, fmt.Sprintf("%s.%s: unexpected field with value %v", path, k, gv))
			case !gok:
				out = append(out, fmt.Sprintf("%s.%s: missing, want %v", path, k, wv))
			default:
				out = append(out, diffJSON(path+"."+k, wv, gv)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
		}
		var out []string
		for i := range w {
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
	}
	return nil
}
