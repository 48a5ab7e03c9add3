package host

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// BenchmarkHostOverhead compares a tool call through the host (the tool's Run, as the
// registry hands it out: the input's envelope encoded, an instance from the pool, the
// call's deadline, the output decoded and checked against its schema) with the same
// module's call on the native engine alone: an instance of the same compiled module
// called with the envelope ready-made, under a context holding only what host
// functions need. The two take turns within each iteration; host/bare is what the
// host adds.
func BenchmarkHostOverhead(b *testing.B) {
	cases := []struct {
		name, dir, tool string
		input           map[string]any
	}{
		{"calc", "../plugins/calculator", "calc", map[string]any{"expression": "(1.5 + 2) * -3 / 7"}},
		{"log-1KiB", "testdata/hostcheck", "log", map[string]any{"text": strings.Repeat("x", 1<<10)}},
	}
	ctx := context.Background()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p, r := benchPlugin(b, c.dir, Manifest{MemoryPages: 1024, MaxInstances: 1})
			tool, err := r.LookupTool(p.Name() + "/" + c.tool)
			if err != nil {
				b.Fatal(err)
			}
			envelope, err := json.Marshal(plugin.ToolInput{Tool: c.tool, Input: c.input})
			if err != nil {
				b.Fatal(err)
			}
			inst, err := p.module.Instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { inst.Close(ctx) })
			bound := context.WithValue(ctx, bindingKey{}, &binding{plugin: p})
			calls := [2]func(){
				func() {
					if _, err := tool.Run(ctx, c.input); err != nil {
						b.Fatal(err)
					}
				},
				func() {
					if _, err := inst.Call(bound, plugin.ExportCallTool, envelope); err != nil {
						b.Fatal(err)
					}
				},
			}
			for range 1000 { // both instances warm: their guests' heaps grown
				calls[0]()
				calls[1]()
			}
			b.ReportAllocs()
			report(b, [2]string{"host", "bare"}, takeTurns(b, 2, func(v int) time.Duration {
				start := time.Now()
				calls[v]()
				return time.Since(start)
			}))
		})
	}
}
