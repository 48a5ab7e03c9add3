package host

import (
	"context"
	"testing"
)

// TestToolCallGarbageStaysLow bounds the host's garbage per tool call: a calculator
// call through the registry's tool, as BenchmarkGuest/calc makes it (the input's
// envelope encoded, an instance from the pool, the call's deadline, the engine's call,
// the output decoded and checked against its schema). What is left is mostly the
// decoded output and its schema check (BENCHMARKS.md, "Garbage per call"); the bound
// fails a change that makes the call's contexts, or its stopping, cost garbage again.
func TestToolCallGarbageStaysLow(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers, and so garbage; .ci/run runs this test again without it")
	}
	const bound = 41 // measured 2026-11-23: 57 before the call's contexts and stopping were reworked
	p, r := benchPlugin(t, "../plugins/calculator", Manifest{MemoryPages: 1024, MaxInstances: 1})
	tool, err := r.LookupTool(p.Name() + "/calc")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	input := map[string]any{"expression": "(1.5 + 2) * -3 / 7"}
	call := func() {
		if _, err := tool.Run(ctx, input); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 { // the guest's heap grown, the pool's instance warm
		call()
	}
	if allocs := testing.AllocsPerRun(200, call); allocs > bound {
		t.Errorf("%v allocations per tool call, want at most %d", allocs, bound)
	}
}
