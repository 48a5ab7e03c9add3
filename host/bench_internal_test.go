package host

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

func loadForBench(b *testing.B, m Manifest) *Plugin {
	b.Helper()
	path, err := pluginbuild.Build(context.Background(), "../plugins/calculator")
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(agent.NewRegistry(), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	p, err := h.Load(context.Background(), data, m)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkInstanceCheckout measures taking a warm instance from the pool and giving
// it back.
func BenchmarkInstanceCheckout(b *testing.B) {
	p := loadForBench(b, Manifest{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		e, err := p.pool.get(ctx, claim{})
		if err != nil {
			b.Fatal(err)
		}
		p.pool.put(e, claim{}, false)
	}
}

// BenchmarkWarmInstanceMemory reports the memory one more warm instance of the
// calculator plugin costs (Go runtime initialized, one call served): the growth of the
// process's heap per instance.
func BenchmarkWarmInstanceMemory(b *testing.B) {
	const n = 16
	p := loadForBench(b, Manifest{MaxInstances: n})
	ctx := context.Background()
	var perInstance float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		insts := make([]instance, n)
		for i := range insts {
			inst, err := p.module.instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := inst.call(context.WithValue(ctx, bindingKey{}, &binding{plugin: p}), plugin.ExportDescribe, nil); err != nil {
				b.Fatal(err)
			}
			insts[i] = inst
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perInstance = float64(after.HeapInuse-before.HeapInuse) / n
		for _, inst := range insts {
			inst.close(ctx)
		}
	}
	b.ReportMetric(perInstance/(1<<20), "MiB/instance")
}

// BenchmarkCallDeadlines measures what bounding a call's time costs on the tool-call
// path. Three variants take turns within each iteration (each going first in turn), so
// that the load of a shared machine weighs on each alike, and the ratios between them
// are reported:
//   - before: an instance as the host made them before sleeps ended with the call
//     (wazero's own nanosleep, no close notifier), called under a deadline;
//   - after: an instance as the engine makes them now (a nanosleep that wakes at the
//     call's end, the close notifier), called under a deadline;
//   - host: the whole of Plugin.call, on such instances: the queue timeout, the call's
//     and the guest's contexts, the pool, the log accounting.
func BenchmarkCallDeadlines(b *testing.B) {
	p := loadForBench(b, Manifest{MaxInstances: 1})
	mod := p.module.(*extismModule)
	input := []byte(`{"tool":"calc","input":{"expression":"(1.5 + 2) * -3 / 7"}}`)
	bound := context.WithValue(context.Background(), bindingKey{}, &binding{plugin: p})

	mc := wazero.NewModuleConfig().WithSysWalltime().WithSysNanotime().WithSysNanosleep().WithRandSource(rand.Reader)
	before, err := mod.compiled.Instance(bound, extism.PluginInstanceConfig{ModuleConfig: mc})
	if err != nil {
		b.Fatal(err)
	}
	defer before.Close(bound)
	before.CallWithContext(bound, plugin.ExportDescribe, nil) // the Go runtime starts in the first call
	after, err := mod.instantiate(bound)
	if err != nil {
		b.Fatal(err)
	}
	defer after.close(bound)
	after.call(bound, plugin.ExportDescribe, nil)

	variants := [3]func() error{
		func() error {
			ctx, cancel := context.WithTimeout(bound, time.Minute)
			defer cancel()
			_, _, err := before.CallWithContext(ctx, plugin.ExportCallTool, input)
			return err
		},
		func() error {
			ctx, cancel := context.WithTimeoutCause(bound, time.Minute, errTimedOut)
			defer cancel()
			_, err := after.call(ctx, plugin.ExportCallTool, input)
			return err
		},
		func() error {
			_, err := p.call(context.Background(), plugin.ExportCallTool, input, &binding{})
			return err
		},
	}
	var spent [3]time.Duration
	for i := 0; b.Loop(); i++ {
		for j := range variants {
			v := (i + j) % len(variants) // each goes first in turn
			start := time.Now()
			if err := variants[v](); err != nil {
				b.Fatal(err)
			}
			spent[v] += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Microseconds())/n, "µs/before")
	b.ReportMetric(float64(spent[1].Microseconds())/n, "µs/after")
	b.ReportMetric(float64(spent[2].Microseconds())/n, "µs/host")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "after/before")
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "host/before")
}
