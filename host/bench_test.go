package host_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/internal/benchfixture"
	"github.com/terrarium-ai/terrarium/internal/langtest"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// nativeCalc is the calculator plugin's work done natively: parse, evaluate exactly,
// convert. It is the baseline the plugin's round trip is compared to.
func nativeCalc() agent.Tool {
	type in struct {
		Expression string `json:"expression"`
	}
	type out struct {
		Value      float64 `json:"value"`
		Expression string  `json:"expression"`
	}
	var eval func(e ast.Expr) constant.Value
	eval = func(e ast.Expr) constant.Value {
		switch e := e.(type) {
		case *ast.BasicLit:
			return constant.MakeFromLiteral(e.Value, e.Kind, 0)
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.UnaryExpr:
			return constant.UnaryOp(e.Op, eval(e.X), 0)
		case *ast.BinaryExpr:
			return constant.BinaryOp(eval(e.X), e.Op, eval(e.Y))
		}
		return constant.MakeUnknown()
	}
	return agent.NewTool("calc", "native calculator", func(ctx context.Context, i in) (out, error) {
		tree, err := parser.ParseExpr(i.Expression)
		if err != nil {
			return out{}, err
		}
		v, _ := constant.Float64Val(constant.ToFloat(eval(tree)))
		return out{Value: v, Expression: i.Expression}, nil
	})
}

// BenchmarkToolCall compares one call of the calculator tool: native Go, through the
// host (pool checkout, JSON envelopes, schema check excluded as in Tool.Run), and a
// bare Extism call of the same module and input (no pool, no envelopes decoded).
func BenchmarkToolCall(b *testing.B) {
	input := map[string]any{"expression": "(1.5 + 2) * -3 / 7"}
	raw := []byte(`{"tool":"calc","input":{"expression":"(1.5 + 2) * -3 / 7"}}`)
	ctx := context.Background()
	b.Run("native", func(b *testing.B) {
		tool := nativeCalc()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tool.Run(ctx, input); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plugin", func(b *testing.B) {
		h, r := newHost(&testing.T{})
		defer h.Close(ctx)
		if _, err := h.Load(ctx, benchWasm(b, "../plugins/calculator"), host.Manifest{}); err != nil {
			b.Fatal(err)
		}
		tool, _ := r.LookupTool("calculator/calc")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tool.Run(ctx, input); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A bare Extism call of the same module and input: no pool, no envelopes decoded.
	// "interruptible" adds what the host needs to stop a guest at its deadline:
	// wazero's CloseOnContextDone, which compiles a check into every loop and call,
	// and a context with a deadline.
	bare := func(b *testing.B, interruptible bool) {
		cache, _ := wazero.NewCompilationCacheWithDir(bareCacheDir(b))
		rc := wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(interruptible)
		p, err := extism.NewPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: benchWasm(b, "../plugins/calculator")}}},
			extism.PluginConfig{
				EnableWasi:    true,
				RuntimeConfig: rc,
				ModuleConfig:  wazero.NewModuleConfig().WithSysWalltime().WithSysNanotime().WithSysNanosleep().WithRandSource(rand.Reader),
			}, stubHostFunctions())
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		b.ReportAllocs()
		for b.Loop() {
			callCtx := ctx
			var cancel context.CancelFunc = func() {}
			if interruptible {
				callCtx, cancel = context.WithTimeout(ctx, time.Minute)
			}
			if _, _, err := p.CallWithContext(callCtx, "terrarium_call_tool", raw); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	}
	b.Run("extism-bare", func(b *testing.B) { bare(b, false) })
	b.Run("extism-bare-interruptible", func(b *testing.B) { bare(b, true) })
}

// stubHostFunctions satisfies the imports of an SDK-built plugin for a bare Extism run.
func stubHostFunctions() []extism.HostFunction {
	var fns []extism.HostFunction
	for name, params := range map[string]int{"session_id": 0, "state_get": 0, "state_set": 1, "messages_get": 0, "messages_append": 1,
		"messages_set": 1, "artifact_add": 1, "stream": 1, "config_get": 1, "secret_get": 1, "http_request": 2, "http_read": 2, "http_close": 1, "log": 2} {
		ps := make([]extism.ValueType, params)
		for i := range ps {
			ps[i] = extism.ValueTypeI64
		}
		f := extism.NewHostFunctionWithStack(name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			off, _ := p.WriteBytes([]byte{1, '{', '}'})
			stack[0] = off
		}, ps, []extism.ValueType{extism.ValueTypeI64})
		f.SetNamespace("terrarium:host/v1")
		fns = append(fns, f)
	}
	return fns
}

// BenchmarkColdStart measures loading the calculator plugin into a new host: compile
// (or fetch from the compilation cache), instantiate, describe, register.
func BenchmarkColdStart(b *testing.B) {
	ctx := context.Background()
	data := benchWasm(b, "../plugins/calculator")
	once := func(b *testing.B, opts ...host.Option) {
		h, err := host.New(agent.NewRegistry(), opts...)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Load(ctx, data, host.Manifest{}); err != nil {
			b.Fatal(err)
		}
		h.Close(ctx)
	}
	b.Run("cache=off", func(b *testing.B) {
		for b.Loop() {
			once(b, host.WithCompilationCache(""))
		}
	})
	warm := b.TempDir()
	for _, e := range engines {
		engine := host.WithEngine(e.engine)
		once(b, host.WithCompilationCache(warm), engine) // fill it
		b.Run("cache=warm/engine="+e.name, func(b *testing.B) {
			for b.Loop() {
				once(b, host.WithCompilationCache(warm), engine)
			}
		})
	}
}

// BenchmarkConcurrentToolCalls runs tool calls from many goroutines through a pool of
// 4 instances.
func BenchmarkConcurrentToolCalls(b *testing.B) {
	ctx := context.Background()
	h, r := newHost(&testing.T{})
	defer h.Close(ctx)
	if _, err := h.Load(ctx, benchWasm(b, "../plugins/calculator"), host.Manifest{MaxInstances: 4}); err != nil {
		b.Fatal(err)
	}
	tool, _ := r.LookupTool("calculator/calc")
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if _, err := tool.Run(ctx, map[string]any{"expression": fmt.Sprintf("%d*2", i)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEngines compares one tool call four ways: done natively in Go; as a plugin
// through the host on the native engine and on Extism's; and the same module on bare
// wazero (host.BareToolCall: uninstrumented, the envelope ready-made, nothing checked,
// with the native engine's kernel, which the ABI needs). The cases are guestCases:
// the calculator, a noop, hostcheck's log (a JSON input, one host function) with 1 KiB
// and 1 MiB of text, its order (about 1 KiB in several fields, a nested object and
// arrays), and 1 MiB received raw. The variants take turns within each
// iteration, each going first in turn, so that the load of a shared machine weighs on
// each alike; it reports each one's time per call and the ratios between them.
func BenchmarkEngines(b *testing.B) {
	ctx := context.Background()
	natives := map[string]agent.Tool{
		"calc": nativeCalc(),
		"noop": agent.NewTool("noop", "native noop", func(context.Context, struct{}) (struct{}, error) { return struct{}{}, nil }),
		"log": agent.NewTool("log", "native log", func(ctx context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			slog.New(slog.DiscardHandler).WarnContext(ctx, in.Text)
			return "logged", nil
		}),
		"order": agent.NewTool("order", "native order", func(ctx context.Context, in benchfixture.Order) (int, error) {
			slog.New(slog.DiscardHandler).WarnContext(ctx, in.Notes)
			return len(in.Items), nil
		}),
		"raw": agent.NewTool("raw_length", "native raw length", func(_ context.Context, in json.RawMessage) (int, error) { return len(in), nil }),
	}
	for _, c := range guestCases {
		b.Run(c.name, func(b *testing.B) {
			wasm := benchWasm(b, c.dir)
			calls := []func() error{toolCall(natives[strings.SplitN(c.name, "-", 2)[0]], c.input)}
			var native *host.Plugin
			for _, e := range engines {
				h, r := newHost(&testing.T{}, host.WithEngine(e.engine))
				defer h.Close(ctx)
				p, err := h.Load(ctx, wasm, host.Manifest{MemoryPages: 1024})
				if err != nil {
					b.Fatal(err)
				}
				if native == nil {
					native = p
				}
				tool, err := r.LookupTool(c.tool)
				if err != nil {
					b.Fatal(err)
				}
				calls = append(calls, toolCall(tool, c.input))
			}
			_, tool, _ := strings.Cut(c.tool, "/")
			calls = append(calls, host.BareToolCall(b, native, wasm, tool, c.input))
			for _, call := range calls { // warm: each guest's heap grown
				for range 100 {
					if err := call(); err != nil {
						b.Fatal(err)
					}
				}
			}
			spent := host.TakeTurns(b, len(calls), func(v int) time.Duration {
				start := time.Now()
				if err := calls[v](); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			})
			n := float64(b.N)
			names := []string{"go", "native-engine", "extism-engine", "wazero"}
			for v, name := range names {
				b.ReportMetric(float64(spent[v].Nanoseconds())/n/1e3, "µs/"+name)
			}
			b.ReportMetric(float64(spent[1])/float64(spent[3]), "native-engine/wazero")
			b.ReportMetric(float64(spent[2])/float64(spent[3]), "extism-engine/wazero")
			b.ReportMetric(float64(spent[2])/float64(spent[1]), "extism/native")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "native-engine/go")
		})
	}
}

// toolCall returns a function running tool with input.
func toolCall(tool agent.Tool, input any) func() error {
	return func() error {
		_, err := tool.Run(context.Background(), input)
		return err
	}
}

// BenchmarkLoadSeveral loads four plugins from a warm compilation cache into a new
// host, one Load after another and all at once with LoadAll, the two taking turns
// within each iteration.
func BenchmarkLoadSeveral(b *testing.B) {
	ctx := context.Background()
	var srcs []host.Source
	for _, name := range []string{"calculator", "clock", "scratchpad", "profile"} {
		srcs = append(srcs, host.Source{From: name, Wasm: benchWasm(b, "../plugins/"+name), Manifest: host.Manifest{State: plugin.StateWrite}})
	}
	cache := b.TempDir()
	variants := []func(h *host.Host) error{
		func(h *host.Host) error {
			for _, s := range srcs {
				if _, err := h.Load(ctx, s.Wasm, s.Manifest); err != nil {
					return err
				}
			}
			return nil
		},
		func(h *host.Host) error { _, err := h.LoadAll(ctx, srcs); return err },
	}
	run := func(v int) time.Duration {
		h, err := host.New(agent.NewRegistry(), host.WithCompilationCache(cache), host.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(ctx)
		start := time.Now()
		if err := variants[v](h); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	run(1) // fills the cache
	spent := host.TakeTurns(b, len(variants), run)
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Milliseconds())/n, "ms/one-by-one")
	b.ReportMetric(float64(spent[1].Milliseconds())/n, "ms/load-all")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "one-by-one/load-all")
}

// runInTurns runs the tools with input in turn (host.TakeTurns), and returns the time
// spent in each.
func runInTurns(b *testing.B, tools []agent.Tool, input any) []time.Duration {
	return host.TakeTurns(b, len(tools), func(v int) time.Duration {
		start := time.Now()
		if _, err := tools[v].Run(context.Background(), input); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	})
}

// BenchmarkColdStartSizes loads plugins of several sizes from a warm compilation
// cache, each into a new host (load), and compiles each from that cache alone, as a
// new process does (compile: what wazero and the host do before the first instance):
// a C plugin, the smallest Go plugin (testdata/minimal: Go's runtime, no SDK), three
// Go plugins of the SDK (clock, the calculator, openai), and hostcheck, a test plugin.
// It reports each module's size and the size of its compiled code in the cache.
func BenchmarkColdStartSizes(b *testing.B) {
	ctx := context.Background()
	plugins := []struct {
		name string
		wasm func(b *testing.B) []byte
	}{
		{"adder-c", func(b *testing.B) []byte {
			wasm, err := os.ReadFile(langtest.BuildC(b, "../examples/plugins-c/adder/plugin.c"))
			if err != nil {
				b.Fatal(err)
			}
			return wasm
		}},
		{"minimal-go", func(b *testing.B) []byte { return benchWasm(b, "testdata/minimal") }},
		{"clock", func(b *testing.B) []byte { return benchWasm(b, "../plugins/clock") }},
		{"hostcheck", func(b *testing.B) []byte { return benchWasm(b, "testdata/hostcheck") }},
		{"calculator", func(b *testing.B) []byte { return benchWasm(b, "../plugins/calculator") }},
		{"openai", func(b *testing.B) []byte { return benchWasm(b, "../plugins/openai") }},
	}
	for _, pl := range plugins {
		b.Run(pl.name, func(b *testing.B) {
			wasm := pl.wasm(b)
			cache := b.TempDir()
			load := func() (*host.Host, *host.Plugin) {
				h, err := host.New(agent.NewRegistry(), host.WithCompilationCache(cache), host.WithLogger(slog.New(slog.DiscardHandler)))
				if err != nil {
					b.Fatal(err)
				}
				p, err := h.Load(ctx, wasm, host.Manifest{})
				if err != nil {
					b.Fatal(err)
				}
				return h, p
			}
			h, p := load() // fills the cache
			defer h.Close(ctx)
			var code int64
			filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasPrefix(filepath.Base(filepath.Dir(path)), "wazero-") {
					if info, err := d.Info(); err == nil {
						code += info.Size()
					}
				}
				return nil
			})
			steps := []struct {
				name string
				run  func()
			}{
				{"compile", func() {
					if err := host.CompileFromCache(ctx, p, wasm); err != nil {
						b.Fatal(err)
					}
				}},
				{"load", func() {
					h, _ := load()
					h.Close(ctx)
				}},
			}
			for _, s := range steps {
				b.Run(s.name, func(b *testing.B) {
					start := testenv.CPUTime()
					for b.Loop() {
						s.run()
					}
					b.ReportMetric(float64((testenv.CPUTime()-start).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
					b.ReportMetric(float64(len(wasm))/1e6, "wasm-MB")
					b.ReportMetric(float64(code)/1e6, "code-MB")
				})
			}
		})
	}
}
