package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/internal/benchfixture"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// guestCases are the tool calls of the guest benchmarks: the calculator, hostcheck's
// noop (no input, no host function), log (a JSON input, one host function) and order
// (the same with a structured input of about 1 KiB), and
// hostcheck's raw_length, which takes its input as raw JSON without decoding it: the
// ceiling of a Go guest that must only receive its input.
var guestCases = []struct {
	name, dir, tool string
	input           map[string]any
}{
	{"calc", "../plugins/calculator", "calculator/calc", map[string]any{"expression": "(1.5 + 2) * -3 / 7"}},
	{"noop", "testdata/hostcheck", "hostcheck/noop", map[string]any{}},
	{"log-1KiB", "testdata/hostcheck", "hostcheck/log", map[string]any{"text": strings.Repeat("x", 1<<10)}},
	{"order-1KiB", "testdata/hostcheck", "hostcheck/order", benchfixture.OrderInput()},
	{"log-1MiB", "testdata/hostcheck", "hostcheck/log", map[string]any{"text": strings.Repeat("x", 1<<20)}},
	{"raw-1MiB", "testdata/hostcheck", "hostcheck/raw_length", map[string]any{"text": strings.Repeat("x", 1<<20)}},
}

// BenchmarkGuest calls each guest case through the host on the native engine, the
// engine whose own cost is smallest, so that a CPU profile of it shows the guest's
// share (go test -bench Guest -cpuprofile). Besides the time, it reports the process's
// CPU time per call and, for a case with input, the MB/s that CPU time gives: on a
// loaded machine, what the calls cost rather than how long they waited.
func BenchmarkGuest(b *testing.B) {
	ctx := context.Background()
	for _, c := range guestCases {
		b.Run(c.name, func(b *testing.B) {
			tool := loadGuestTool(b, benchWasm(b, c.dir), c.tool)
			size := inputSize(c.input)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			start := testenv.CPUTime()
			for b.Loop() {
				if _, err := tool.Run(ctx, c.input); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := testenv.CPUTime() - start; cpu > 0 {
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
				if size > 0 {
					b.ReportMetric(float64(size)*float64(b.N)/cpu.Seconds()/1e6, "MB/s-cpu")
				}
			}
		})
	}
}

// BenchmarkGuestBaseline compares the plugins built from this tree with the same
// plugins built from another commit, whose .wasm files (calculator.wasm,
// hostcheck.wasm) are in the directory TERRARIUM_BASELINE_WASM names: the guest SDK's
// cost before and after a change, side by side in one run, on the native engine. The
// two take turns within each iteration, each going first in turn.
func BenchmarkGuestBaseline(b *testing.B) {
	dir := os.Getenv("TERRARIUM_BASELINE_WASM")
	if dir == "" {
		b.Skip("TERRARIUM_BASELINE_WASM names no directory of baseline plugins")
	}
	for _, c := range guestCases {
		b.Run(c.name, func(b *testing.B) {
			old, err := os.ReadFile(filepath.Join(dir, filepath.Base(c.dir)+".wasm"))
			if err != nil {
				b.Fatal(err)
			}
			tools := []agent.Tool{loadGuestTool(b, old, c.tool), loadGuestTool(b, benchWasm(b, c.dir), c.tool)}
			spent := runInTurns(b, tools, c.input)
			n := float64(b.N)
			b.ReportMetric(float64(spent[0].Nanoseconds())/n/1e3, "µs/before")
			b.ReportMetric(float64(spent[1].Nanoseconds())/n/1e3, "µs/after")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "after/before")
			if size := inputSize(c.input); size > 0 {
				b.ReportMetric(float64(size)*n/spent[1].Seconds()/1e6, "MB/s-after")
			}
		})
	}
}

// loadGuestTool loads wasm into a new host on the native engine and returns its tool.
func loadGuestTool(b *testing.B, wasm []byte, name string) agent.Tool {
	b.Helper()
	ctx := context.Background()
	h, r := newHost(&testing.T{}, host.WithEngine(host.NativeEngine()))
	b.Cleanup(func() { h.Close(ctx) })
	if _, err := h.Load(ctx, wasm, host.Manifest{MemoryPages: 1024}); err != nil {
		b.Fatal(err)
	}
	tool, err := r.LookupTool(name)
	if err != nil {
		b.Fatal(err)
	}
	return tool
}

// inputSize is the length of a case's text, the bulk of its input.
func inputSize(input map[string]any) int {
	s, _ := input["text"].(string)
	return len(s)
}
