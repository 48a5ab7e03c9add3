package host

import (
	"context"
	"testing"

	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// TestToolCallGarbageStaysLow bounds the host's garbage per tool call, made as
// BenchmarkGuest makes them: the calculator (an output checked against its schema),
// hostcheck's noop (no input, no host function) and log (one host function, its
// logger off). A call encodes its input's envelope, takes an instance from the pool,
// runs the guest until its deadline, and decodes the output and checks it against its
// schema. What is left is the input's encoding, the binding, the output's copy and
// its decoding, and the schema library's check (BENCHMARKS.md, "Plugins: garbage per
// tool call"); a bound fails a change that brings back a context or a timer per call,
// a decoder per output, or the call's context for a host function that needs none.
func TestToolCallGarbageStaysLow(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers, and so garbage; .ci/run runs this test again without it")
	}
	// Measured 2026-11-23; before the guest's context, the envelope's decoder and the
	// host functions' contexts were reworked: 41, 24 and 42.
	for _, c := range []struct {
		dir, tool string
		input     map[string]any
		bound     float64
	}{
		{"../plugins/calculator", "calc", map[string]any{"expression": "(1.5 + 2) * -3 / 7"}, 26},
		{"testdata/hostcheck", "noop", map[string]any{}, 9},
		{"testdata/hostcheck", "log", map[string]any{"text": "a line"}, 20},
	} {
		t.Run(c.tool, func(t *testing.T) {
			p, r := benchPlugin(t, c.dir, Manifest{MemoryPages: 1024, MaxInstances: 1})
			tool, err := r.LookupTool(p.Name() + "/" + c.tool)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			call := func() {
				if _, err := tool.Run(ctx, c.input); err != nil {
					t.Fatal(err)
				}
			}
			for range 100 { // the guest's heap grown, the pool's instance warm
				call()
			}
			if allocs := testing.AllocsPerRun(200, call); allocs > c.bound {
				t.Errorf("%v allocations per tool call, want at most %v", allocs, c.bound)
			}
		})
	}
}
