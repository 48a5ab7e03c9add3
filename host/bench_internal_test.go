package host

import (
	"context"
	"crypto/rand"
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
	h, err := New(agent.NewRegistry())
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
		inst, err := p.pool.get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.pool.put(inst, false)
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
// path, side by side in one run: "before" is an instance as the host made them before
// sleeps ended with the call (wazero's own nanosleep, no close notifier), called under
// a deadline; "after" is an instance as the engine makes them now (a nanosleep that
// wakes at the call's end, the close notifier), called as the pool calls it; "host"
// is the whole of Plugin.call: the queue timeout, the call timeout, the pool, the log
// accounting.
func BenchmarkCallDeadlines(b *testing.B) {
	p := loadForBench(b, Manifest{})
	mod := p.module.(*extismModule)
	input := []byte(`{"tool":"calc","input":{"expression":"(1.5 + 2) * -3 / 7"}}`)
	bound := context.WithValue(context.Background(), bindingKey{}, &binding{plugin: p})
	b.Run("before", func(b *testing.B) {
		mc := wazero.NewModuleConfig().WithSysWalltime().WithSysNanotime().WithSysNanosleep().WithRandSource(rand.Reader)
		inst, err := mod.compiled.Instance(bound, extism.PluginInstanceConfig{ModuleConfig: mc})
		if err != nil {
			b.Fatal(err)
		}
		defer inst.Close(bound)
		inst.CallWithContext(bound, plugin.ExportDescribe, nil) // the Go runtime starts in the first call
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(bound, time.Minute)
			if _, _, err := inst.CallWithContext(ctx, plugin.ExportCallTool, input); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	})
	b.Run("after", func(b *testing.B) {
		inst, err := mod.instantiate(bound)
		if err != nil {
			b.Fatal(err)
		}
		defer inst.close(bound)
		inst.call(bound, plugin.ExportDescribe, nil)
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeoutCause(bound, time.Minute, errTimedOut)
			if _, err := inst.call(ctx, plugin.ExportCallTool, input); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	})
	b.Run("host", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.call(context.Background(), plugin.ExportCallTool, input, &binding{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
