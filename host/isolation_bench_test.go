package host_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// calculatorWasm returns the calculator plugin's module.
func calculatorWasm(b *testing.B) []byte {
	b.Helper()
	return pluginbuild.WasmForTest(b, "../plugins/calculator")
}

// BenchmarkPluginIsolation compares one call of the calculator tool under each
// isolation mode: pooled (any warm instance of the tenant), session isolation with
// every call in one session (its own warm instance), and session isolation with every
// call from a new session, which is what a session's first call costs: another
// session's idle instance reset to its snapshot (a new instance on the Extism engine,
// which cannot reset one).
func BenchmarkPluginIsolation(b *testing.B) {
	data := calculatorWasm(b)
	input := map[string]any{"expression": "(1.5 + 2) * -3 / 7"}
	one := inSession("s") // a session is known by its identity, not its ID
	for _, c := range []struct {
		name      string
		isolation host.Isolation
		session   func(i int) context.Context
	}{
		{"isolation=pooled", host.IsolationPooled, func(int) context.Context { return context.Background() }},
		{"isolation=session/same-session", host.IsolationSession, func(int) context.Context { return one }},
		{"isolation=session/new-session", host.IsolationSession, func(i int) context.Context { return inSession(fmt.Sprint(i)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := agent.NewRegistry()
			h, err := host.New(r, host.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			if _, err := h.Load(context.Background(), data, host.Manifest{Isolation: c.isolation, MaxInstances: 2}); err != nil {
				b.Fatal(err)
			}
			tool, err := r.LookupTool("calculator/calc")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := tool.Run(c.session(i), input); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkTenantMemory reports what one more tenant costs with the calculator
// plugin loaded: a view, its plugin and one warm instance, the module compiled once
// for all. It is the growth of the process's heap per tenant, over 16 tenants.
func BenchmarkTenantMemory(b *testing.B) {
	const n = 16
	data := calculatorWasm(b)
	ctx := context.Background()
	var perTenant float64
	for b.Loop() {
		h, err := host.New(agent.NewRegistry(), host.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		// The first load compiles the module: it is not a tenant's cost.
		if _, err := h.Load(ctx, data, host.Manifest{}); err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			v, err := h.Tenant(fmt.Sprint("t", i), host.TenantConfig{Registry: agent.NewRegistry()})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := v.Load(ctx, data, host.Manifest{}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perTenant = float64(after.HeapInuse-before.HeapInuse) / n
		h.Close(ctx)
	}
	b.ReportMetric(perTenant/(1<<20), "MiB/tenant")
}
