package host

import (
	"context"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// gcVariants are the garbage collector settings a Go guest is measured under, through
// its manifest's environment: Go's default first, the baseline of the ratios, then the
// host's default (GOGC=DefaultGOGC, an empty environment).
var gcVariants = []struct {
	name string
	env  map[string]string
}{
	{"GOGC=100", map[string]string{"GOGC": "100"}},
	{"GOGC=50", map[string]string{"GOGC": "50"}},
	{"GOGC=25", nil},
	{"GOGC=10", map[string]string{"GOGC": "10"}},
	{"GOMEMLIMIT=4MiB", map[string]string{"GOGC": "100", "GOMEMLIMIT": "4MiB"}},
}

// BenchmarkGuestGC compares a Go guest (the calculator) under the garbage collector
// settings of gcVariants: the memory of a warm instance after a thousand calls (Go
// heap, resident, linear memory), one variant after the other; then, the variants
// taking turns within each iteration, a new instance and its first thousand calls,
// and calls on a warm instance.
func BenchmarkGuestGC(b *testing.B) {
	for _, v := range gcVariants {
		b.Run("warm-instance/"+v.name, func(b *testing.B) { warmMemory(b, nativeEngine{}, Manifest{Env: v.env}) })
	}
	ctx := context.Background()
	input := []byte(`{"tool":"calc","input":{"expression":"(1.5 + 2) * -3 / 7"}}`)
	plugins := func(b *testing.B) []*Plugin {
		ps := make([]*Plugin, len(gcVariants))
		for v, gv := range gcVariants {
			ps[v] = loadForBench(b, Manifest{MemoryPages: 1024, Env: gv.env})
		}
		return ps
	}
	reportGC := func(b *testing.B, spent []time.Duration, calls int) {
		for v, d := range spent {
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N*calls)/1e3, "µs/"+gcVariants[v].name)
			b.ReportMetric(float64(d)/float64(spent[0]), gcVariants[v].name+"/GOGC=100")
		}
	}
	b.Run("first-1000-calls/calc", func(b *testing.B) {
		ps := plugins(b)
		reportGC(b, takeTurns(b, len(ps), func(v int) time.Duration {
			return firstCalls(b, ps[v], 1000, input)
		}), 1000)
	})
	b.Run("calls/calc", func(b *testing.B) {
		ps := plugins(b)
		insts := make([]instance, len(ps))
		ctxs := make([]context.Context, len(ps))
		for v, p := range ps {
			ctxs[v] = context.WithValue(ctx, bindingKey{}, &binding{plugin: p})
			inst, err := p.module.Instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { inst.Close(ctx) })
			insts[v] = inst
		}
		const calls = 100
		run := func(v int) {
			for range calls {
				if _, err := insts[v].Call(ctxs[v], plugin.ExportCallTool, input); err != nil {
					b.Fatal(err)
				}
			}
		}
		for v := range insts {
			for range 1000 / calls { // warm: the guest's heap grown
				run(v)
			}
		}
		reportGC(b, takeTurns(b, len(insts), func(v int) time.Duration {
			start := time.Now()
			run(v)
			return time.Since(start)
		}), calls)
	})
}
