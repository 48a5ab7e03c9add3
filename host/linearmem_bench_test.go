package host

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
)

// memoryVariants are the native engine with its linear memories reserved as address
// space (the default) and as wazero makes them, on the Go heap.
var memoryVariants = []struct {
	name   string
	engine nativeEngine
}{
	{"reserved", nativeEngine{}},
	{"goheap", nativeEngine{goHeapMemory: true}},
}

var variantNames = [2]string{memoryVariants[0].name, memoryVariants[1].name}

// BenchmarkLinearMemory compares the native engine's linear memories reserved as
// address space with wazero's own on the Go heap, side by side in one run: tool calls
// on a warm instance (calc, log of 1 KiB and 1 MiB), the first thousand calc calls of
// a new instance (while a Go guest's heap grows), the memory of a warm instance (Go
// heap and resident), and a call and Reset (against the reset before, on the Go heap:
// the whole snapshot copied back). The variants take turns within each iteration.
func BenchmarkLinearMemory(b *testing.B) {
	compareCalls(b, [2]nativeEngine{memoryVariants[0].engine, memoryVariants[1].engine}, variantNames, true)
	for _, v := range memoryVariants {
		b.Run("warm-instance/"+v.name, func(b *testing.B) { warmMemory(b, v.engine, Manifest{}) })
	}
	b.Run("warm-instance/reserved-data-copied", func(b *testing.B) {
		warmMemory(b, nativeEngine{copyData: true}, Manifest{})
	})
	b.Run("reset", func(b *testing.B) {
		var insts []*nativeInstance
		var ctxs []context.Context
		for _, v := range memoryVariants {
			inst, ctx := newInstanceOn(b, v.engine, "../plugins/calculator", true, nil)
			insts, ctxs = append(insts, inst), append(ctxs, ctx)
		}
		input := []byte(`{"tool":"calc","input":{"expression":"6 * 7"}}`)
		whole := bytes.Clone(memoryOf(insts[1].guest.Memory()))
		resets := [2]func(){
			func() {
				if err := insts[0].Reset(ctxs[0]); err != nil {
					b.Fatal(err)
				}
			},
			func() { // Reset as it was: the whole snapshot copied back
				inst := insts[1]
				copy(memoryOf(inst.guest.Memory()), whole)
				for j, g := range inst.snapshot.handles {
					g.Set(inst.snapshot.globals[j])
				}
				clear(memoryOf(inst.kernel.mem))
			},
		}
		// Only the resets are timed; each follows a call.
		report(b, [2]string{"reserved-changed", "goheap-whole"}, takeTurns(b, 2, func(v int) time.Duration {
			if _, err := insts[v].Call(ctxs[v], plugin.ExportCallTool, input); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			resets[v]()
			return time.Since(start)
		}))
		b.ReportMetric(float64(insts[0].snapshot.own)/(1<<20), "MiB-kept/snapshot")
		b.ReportMetric(float64(len(whole))/(1<<20), "MiB-whole/snapshot")
	})
}

// BenchmarkSharedData compares a module's data mapped into its instances' memories
// copy-on-write from one file (the default on linux) with the data copied into each
// instance's memory (as wazero copies data segments), side by side: tool calls on a
// warm instance, the first thousand calc calls of a new instance, and a reset after a
// call. warm-instance/reserved and warm-instance/reserved-data-copied of
// BenchmarkLinearMemory compare their memory.
func BenchmarkSharedData(b *testing.B) {
	variants := [2]nativeEngine{{}, {copyData: true}}
	names := [2]string{"mapped", "copied"}
	compareCalls(b, variants, names, false)
	b.Run("reset", func(b *testing.B) {
		var insts []*nativeInstance
		var ctxs []context.Context
		for _, eng := range variants {
			inst, ctx := newInstanceOn(b, eng, "../plugins/calculator", true, nil)
			insts, ctxs = append(insts, inst), append(ctxs, ctx)
		}
		input := []byte(`{"tool":"calc","input":{"expression":"6 * 7"}}`)
		report(b, names, takeTurns(b, 2, func(v int) time.Duration {
			if _, err := insts[v].Call(ctxs[v], plugin.ExportCallTool, input); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := insts[v].Reset(ctxs[v]); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		}))
	})
}

// compareCalls compares two variants of the native engine side by side, taking turns
// within each iteration: tool calls on a warm instance (calc, log of 1 KiB and, if
// large, of 1 MiB), and the first thousand calc calls of a new instance (while a Go
// guest's heap grows).
func compareCalls(b *testing.B, engines [2]nativeEngine, names [2]string, large bool) {
	ctx := context.Background()
	calls := []struct {
		name, dir, tool string
		input           map[string]any
	}{
		{"calc", "../plugins/calculator", "calculator/calc", map[string]any{"expression": "(1.5 + 2) * -3 / 7"}},
		{"log-1KiB", "testdata/hostcheck", "hostcheck/log", map[string]any{"text": strings.Repeat("x", 1<<10)}},
	}
	if large {
		calls = append(calls, calls[1])
		calls[2].name, calls[2].input = "log-1MiB", map[string]any{"text": strings.Repeat("x", 1<<20)}
	}
	for _, c := range calls {
		b.Run("call/"+c.name, func(b *testing.B) {
			var tools []agent.Tool
			for _, eng := range engines {
				tools = append(tools, benchTool(b, eng, c.dir, c.tool, 1))
			}
			report(b, names, takeTurns(b, 2, func(v int) time.Duration {
				start := time.Now()
				if _, err := tools[v].Run(ctx, c.input); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}))
		})
	}
	b.Run("first-1000-calls/calc", func(b *testing.B) {
		var ps []*Plugin
		for _, eng := range engines {
			ps = append(ps, loadForBench(b, Manifest{MemoryPages: 1024}, WithEngine(eng)))
		}
		input := []byte(`{"tool":"calc","input":{"expression":"(1.5 + 2) * -3 / 7"}}`)
		report(b, names, takeTurns(b, 2, func(v int) time.Duration {
			return firstCalls(b, ps[v], 1000, input)
		}))
	})
}

// report reports the time per iteration of two variants and the first's relative to
// the second's.
func report(b *testing.B, names [2]string, spent []time.Duration) {
	for v, d := range spent {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "ns/"+names[v])
	}
	b.ReportMetric(float64(spent[0])/float64(spent[1]), names[0]+"/"+names[1])
}

// benchTool loads the plugin of dir on eng, n instances at most, and returns its tool.
func benchTool(b *testing.B, eng nativeEngine, dir, name string, n int) agent.Tool {
	b.Helper()
	_, r := benchPlugin(b, dir, Manifest{MemoryPages: 1024, MaxInstances: n}, WithEngine(eng))
	tool, err := r.LookupTool(name)
	if err != nil {
		b.Fatal(err)
	}
	return tool
}

// warmMemory reports what one more warm calculator instance on eng with manifest m
// costs, after a thousand calls (its Go heap grown): on the Go heap; resident (RSS),
// which counts a page shared by n instances n times; the process's proportional set
// size (PSS), which counts it 1/n times in each; and private (pages no other mapping
// shares), all after the collector has returned what it can to the system (linux
// only but the heap); and the size of its guest's linear memory. It also reports the
// data shared by the module's instances, mapped into each (once per module).
func warmMemory(b *testing.B, eng nativeEngine, m Manifest) {
	const n = 8
	m.MaxInstances, m.MemoryPages = n, 1024
	p := loadForBench(b, m, WithEngine(eng))
	ctx := context.WithValue(context.Background(), bindingKey{}, &binding{plugin: p})
	input := []byte(`{"tool":"calc","input":{"expression":"(1.5 + 2) * -3 / 7"}}`)
	var use memoryUse
	var linear float64
	for b.Loop() {
		before := memoryInUse(b)
		insts := make([]instance, n)
		for i := range insts {
			inst, err := p.module.Instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for range 1000 {
				if _, err := inst.Call(ctx, plugin.ExportCallTool, input); err != nil {
					b.Fatal(err)
				}
			}
			insts[i] = inst
		}
		use = memoryInUse(b).minus(before)
		linear = 0
		for _, inst := range insts {
			linear += float64(inst.(*nativeInstance).guest.Memory().Size()) / n
			inst.Close(ctx)
		}
	}
	for _, r := range []struct {
		bytes int64
		unit  string
	}{{use.heap, "heap"}, {use.rss, "rss"}, {use.pss, "pss"}, {use.private, "private"}} {
		b.ReportMetric(float64(r.bytes)/n/(1<<20), "MiB-"+r.unit+"/instance")
	}
	b.ReportMetric(linear/(1<<20), "MiB-linear/instance")
	shared := 0.0
	if d := p.module.(*nativeModule).data; d != nil && d.file != nil {
		shared = float64(d.size) / (1 << 20)
	}
	b.ReportMetric(shared, "MiB-shared/module")
}

// memoryUse is the memory of the process: the Go heap in use, and resident, PSS and
// private bytes (0 where /proc/self/smaps_rollup is not).
type memoryUse struct {
	heap, rss, pss, private int64
}

func (u memoryUse) minus(v memoryUse) memoryUse {
	return memoryUse{u.heap - v.heap, u.rss - v.rss, u.pss - v.pss, u.private - v.private}
}

// memoryInUse returns the process's memory after a collection that returned to the
// system what it could.
func memoryInUse(b *testing.B) memoryUse {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u := memoryUse{heap: int64(ms.HeapInuse)}
	rollup, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return u
	}
	// Lines such as "Pss:   342 kB".
	for line := range strings.Lines(string(rollup)) {
		var field string
		var kb int64
		if _, err := fmt.Sscanf(line, "%s %d kB", &field, &kb); err != nil {
			continue
		}
		switch field {
		case "Rss:":
			u.rss = kb << 10
		case "Pss:":
			u.pss = kb << 10
		case "Private_Clean:", "Private_Dirty:":
			u.private += kb << 10
		}
	}
	return u
}
