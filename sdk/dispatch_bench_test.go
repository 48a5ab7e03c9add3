package sdk

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/internal/benchfixture"
)

// BenchmarkCallTool is the SDK's share of a tool call, natively: decoding the call,
// checking and decoding the tool's input, encoding the output. In wasm the same work
// runs several times slower; its profile here shows where the guest's time goes.
func BenchmarkCallTool(b *testing.B) {
	type text struct {
		Text string `json:"text"`
	}
	r := newRegistry()
	r.setInfo(Info{Name: "bench"})
	addTool(r, "log", "Logs.", func(_ context.Context, in text) (string, error) { return "logged", nil })
	addTool(r, "raw", "Takes raw JSON.", func(_ context.Context, in json.RawMessage) (int, error) { return len(in), nil })
	for _, c := range []struct {
		name, tool string
		size       int
	}{{"log-1KiB", "log", 1 << 10}, {"log-1MiB", "log", 1 << 20}, {"raw-1MiB", "raw", 1 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			input, err := json.Marshal(map[string]any{"tool": c.tool, "input": text{strings.Repeat("x", c.size)}})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(input)))
			b.ReportAllocs()
			for b.Loop() {
				if _, aerr := r.dispatch("terrarium_call_tool", input); aerr != nil {
					b.Fatal(aerr)
				}
			}
		})
	}
}

// BenchmarkCallToolOrder is the SDK's share of a call with a structured ~1 KiB input,
// hostcheck's order: where log-1KiB's input is one string, this one's values are many
// (a nested object, an array of objects, an array of strings), each checked against
// its schema and decoded into its field.
func BenchmarkCallToolOrder(b *testing.B) {
	r := newRegistry()
	r.setInfo(Info{Name: "bench"})
	addTool(r, "order", "Takes an order.", func(_ context.Context, in benchfixture.Order) (int, error) { return len(in.Items), nil })
	input, err := json.Marshal(map[string]any{"tool": "order", "input": benchfixture.OrderInput()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, aerr := r.dispatch("terrarium_call_tool", input); aerr != nil {
			b.Fatal(aerr)
		}
	}
}

// BenchmarkCallToolSmall is the SDK's share of a call with a small input and output,
// the calculator's shape, where no one pass over the input dominates: what is left is
// the SDK's fixed cost per call.
func BenchmarkCallToolSmall(b *testing.B) {
	type in struct {
		Expression string `json:"expression"`
	}
	type out struct {
		Value      float64 `json:"value"`
		Expression string  `json:"expression"`
	}
	r := newRegistry()
	r.setInfo(Info{Name: "bench"})
	addTool(r, "calc", "Calculates.", func(_ context.Context, in in) (out, error) { return out{-1.5, in.Expression}, nil })
	input := []byte(`{"tool":"calc","input":{"expression":"(1.5 + 2) * -3 / 7"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, aerr := r.dispatch("terrarium_call_tool", input); aerr != nil {
			b.Fatal(aerr)
		}
	}
}
