package host

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"testing"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host/extismengine"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

func loadForBench(b *testing.B, m Manifest, opts ...Option) *Plugin {
	b.Helper()
	path, err := pluginbuild.Build(context.Background(), "../plugins/calculator")
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(agent.NewRegistry(), append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
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
	for _, e := range []Engine{NativeEngine(), extismengine.New()} {
		b.Run("engine="+e.Name(), func(b *testing.B) { warmInstanceMemory(b, e) })
	}
}

func warmInstanceMemory(b *testing.B, e Engine) {
	const n = 16
	p := loadForBench(b, Manifest{MaxInstances: n}, WithEngine(e))
	ctx := context.Background()
	var perInstance float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		insts := make([]instance, n)
		for i := range insts {
			inst, err := p.module.Instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := inst.Call(context.WithValue(ctx, bindingKey{}, &binding{plugin: p}), plugin.ExportDescribe, nil); err != nil {
				b.Fatal(err)
			}
			insts[i] = inst
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perInstance = float64(after.HeapInuse-before.HeapInuse) / n
		for _, inst := range insts {
			inst.Close(ctx)
		}
	}
	b.ReportMetric(perInstance/(1<<20), "MiB/instance")
}
