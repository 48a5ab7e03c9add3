package host

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

// BenchmarkToolOutputCheck measures what checking a tool's output costs per call:
// decoding the envelope alone (no outputSchema), then the same and validating it
// against the schema, strictly and with WithLenientOutputs (which validates as much;
// only a mismatch is handled differently), for a small output and a larger one
// (100 records, 7.2 KB).
func BenchmarkToolOutputCheck(b *testing.B) {
	small := map[string]any{
		"type": "object", "required": []any{"value"},
		"properties": map[string]any{"value": map[string]any{"type": "number"}, "unit": map[string]any{"type": "string"}},
	}
	record := map[string]any{
		"type": "object", "required": []any{"id", "name"}, "additionalProperties": false,
		"properties": map[string]any{
			"id":    map[string]any{"type": "integer", "minimum": 0},
			"name":  map[string]any{"type": "string", "minLength": 1},
			"score": map[string]any{"type": "number"},
			"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []any{"red", "green", "blue"}}},
		},
	}
	large := map[string]any{"type": "object", "required": []any{"records"},
		"properties": map[string]any{"records": map[string]any{"type": "array", "items": record}}}
	var records []any
	for i := range 100 {
		records = append(records, map[string]any{"id": i, "name": fmt.Sprintf("record %d", i), "score": float64(i) / 3, "tags": []any{"red", "blue"}})
	}
	outputs := []struct {
		name   string
		schema map[string]any
		output any
	}{
		{"small", small, map[string]any{"value": 42.5, "unit": "EUR"}},
		{"large", large, map[string]any{"records": records}},
	}
	for _, o := range outputs {
		out, err := json.Marshal(map[string]any{"output": o.output})
		if err != nil {
			b.Fatal(err)
		}
		for _, check := range []struct {
			name   string
			schema map[string]any
			opts   []Option
		}{{"none", nil, nil}, {"strict", o.schema, nil}, {"lenient", o.schema, []Option{WithLenientOutputs()}}} {
			b.Run(fmt.Sprintf("output=%s/check=%s", o.name, check.name), func(b *testing.B) {
				p := loadForBench(b, Manifest{}, check.opts...)
				def := &abi.ToolDefinition{Name: "t", OutputSchema: check.schema}
				p.desc.Tools = []*abi.ToolDefinition{def}
				if err := p.compileOutputSchemas(); err != nil {
					b.Fatal(err)
				}
				t := newPluginTool(p, def)
				b.SetBytes(int64(len(out)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := t.toolOutput(out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
