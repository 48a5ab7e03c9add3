package host

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host/extismengine"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/host/internal/instrument"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// loadForBench loads the calculator plugin with manifest m into a new host made with
// opts.
func loadForBench(b *testing.B, m Manifest, opts ...Option) *Plugin {
	b.Helper()
	p, _ := benchPlugin(b, "../plugins/calculator", m, opts...)
	return p
}

// benchPlugin loads the plugin of dir with manifest m into a new host made with opts,
// and returns it and the host's registry.
func benchPlugin(b testing.TB, dir string, m Manifest, opts ...Option) (*Plugin, *agent.Registry) {
	b.Helper()
	data := pluginbuild.WasmForTest(b, dir)
	r := agent.NewRegistry()
	h, err := New(r, append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	p, err := h.Load(context.Background(), data, m)
	if err != nil {
		b.Fatal(err)
	}
	return p, r
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
// process's heap per instance. The native engine's linear memories are not on the
// heap; BenchmarkLinearMemory reports the resident memory too.
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

// BenchmarkColdStartSteps splits loading the calculator plugin from a warm compilation
// cache on the native engine into its steps, each alone in a sub-benchmark: reading
// the file, hashing it, checking its interface, opening its cache directory, the
// rewritten module read back from the cache (and, for comparison, rewriting it again),
// its data mapped from the cache (and, for comparison, derived again from the module),
// the compilation (wazero reading its compiled code back, the host modules), an
// instance (the start function) and its first describe (a Go guest's runtime starts),
// then the whole Load into a new host.
func BenchmarkColdStartSteps(b *testing.B) {
	ctx := context.Background()
	path := pluginbuild.ForTest(b, "../plugins/calculator")
	wasm := pluginbuild.WasmForTest(b, "../plugins/calculator")
	cacheDir := b.TempDir()
	newHost := func(b *testing.B) *Host {
		h, err := New(agent.NewRegistry(), WithLogger(slog.New(slog.DiscardHandler)), WithCompilationCache(cacheDir))
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	h := newHost(b)
	defer h.Close(ctx)
	p, err := h.Load(ctx, wasm, Manifest{}) // fills the cache
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256Hex(wasm)
	cfg := engine.ModuleConfig{MemoryPages: p.manifest.MemoryPages, HostFuncs: h.hostFuncs()}
	cfg.Cache, cfg.CacheDir, err = h.cache.forModule(h.eng.Name(), sum)
	if err != nil {
		b.Fatal(err)
	}
	describe := context.WithValue(ctx, bindingKey{}, &binding{plugin: p})
	steps := []struct {
		name string
		run  func() error
	}{
		{"read", func() error { _, err := os.ReadFile(path); return err }},
		{"sha256", func() error { sha256Hex(wasm); return nil }},
		{"check-module", func() error { return CheckModule(wasm) }},
		{"cache-dir", func() error { _, _, err := h.cache.forModule(h.eng.Name(), sum); return err }},
		{"rewritten-from-cache", func() error {
			p, err := prepare(wasm, cfg.CacheDir)
			if err == nil {
				p.close()
			}
			return err
		}},
		{"rewrite-again", func() error { _, err := prepare(wasm, ""); return err }},
		{"data-from-cache", func() error {
			f, err := os.Open(filepath.Join(cfg.CacheDir, dataFile))
			if err != nil {
				return err
			}
			d, err := openDataImage(f, true)
			if err == nil {
				err = d.close()
			}
			return err
		}},
		{"data-derived", func() error {
			// What a load from the cache did before the data was kept there: the data
			// read again from the original module, into a memory file.
			data, err := instrument.Data(wasm)
			if err == nil {
				err = newDataImage(data, true).close()
			}
			return err
		}},
		{"compile-from-cache", func() error { return CompileFromCache(ctx, p, wasm) }},
		{"runtime-set-up", func() error {
			// What Compile does beside wazero compiling the guest, now at the same
			// time: the host modules and the kernel.
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cfg.Cache))
			err := setUpRuntime(ctx, rt, &nativeModule{}, cfg.HostFuncs)
			return errors.Join(err, rt.Close(ctx))
		}},
		{"instantiate", func() error {
			inst, err := p.module.Instantiate(ctx)
			if err == nil {
				err = inst.Close(ctx)
			}
			return err
		}},
		{"instantiate-describe", func() error {
			inst, err := p.module.Instantiate(ctx)
			if err != nil {
				return err
			}
			_, err = inst.Call(describe, plugin.ExportDescribe, nil)
			return errors.Join(err, inst.Close(ctx))
		}},
		{"load", func() error {
			h := newHost(b)
			_, err := h.Load(ctx, wasm, Manifest{})
			return errors.Join(err, h.Close(ctx))
		}},
	}
	for _, s := range steps {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			start := testenv.CPUTime()
			for b.Loop() {
				if err := s.run(); err != nil {
					b.Fatal(err)
				}
			}
			// On a shared machine the time a step waits for a CPU swamps its own: the
			// process's CPU time (the collector's included) is its cost.
			b.ReportMetric(float64((testenv.CPUTime()-start).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// takeTurns runs the variants of a side-by-side benchmark in turn within each
// iteration of b's loop, each going first in turn, so that a loaded machine weighs on
// each alike; run(v) runs variant v and returns the time that counts. It returns the
// time spent in each variant.
func takeTurns(b *testing.B, variants int, run func(v int) time.Duration) []time.Duration {
	spent := make([]time.Duration, variants)
	for i := 0; b.Loop(); i++ {
		for j := range variants {
			v := (i + j) % variants
			spent[v] += run(v)
		}
	}
	return spent
}

// firstCalls makes a new instance of p, calls it n times with a terrarium_call_tool
// input, closes it, and returns the time all that took: the cost of an instance's
// first calls, while a Go guest's heap grows.
func firstCalls(b *testing.B, p *Plugin, n int, input []byte) time.Duration {
	ctx := context.Background()
	start := time.Now()
	inst, err := p.module.Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Close(ctx)
	bound := context.WithValue(ctx, bindingKey{}, &binding{plugin: p})
	for range n {
		if _, err := inst.Call(bound, plugin.ExportCallTool, input); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}
