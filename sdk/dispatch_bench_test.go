package sdk

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
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
