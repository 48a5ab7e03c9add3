package host

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
)

// TakeTurns is takeTurns, for the benchmarks of package host_test.
var TakeTurns = takeTurns

// BareToolCall is the bare wazero of BenchmarkEngines: it compiles wasm, the module p
// was loaded from, as it is (uninstrumented: its calls cannot be stopped) on wazero with
// the native engine's kernel and p's host functions, and returns a function calling
// tool with input on one warm instance, the envelope ready-made, nothing checked.
func BareToolCall(tb testing.TB, p *Plugin, wasm []byte, tool string, input any) func() error {
	ctx := context.Background()
	envelope, err := json.Marshal(plugin.ToolInput{Tool: tool, Input: input})
	if err != nil {
		tb.Fatal(err)
	}
	inst := compileInstance(tb, nativeEngine{uninstrumented: true}, wasm, engine.ModuleConfig{MemoryPages: p.manifest.MemoryPages, HostFuncs: p.host.hostFuncs()})
	bound := context.WithValue(ctx, bindingKey{}, &binding{plugin: p})
	return func() error {
		_, err := inst.Call(bound, plugin.ExportCallTool, envelope)
		return err
	}
}

// CompileFromCache compiles p's module, wasm, on p's engine from the host's compilation
// cache, as a new process does (a wazero cache of its own: one shared with p would hand
// over p's code from memory), and closes it: a cold start without its first instance.
func CompileFromCache(ctx context.Context, p *Plugin, wasm []byte) error {
	h := p.host.root
	cfg := engine.ModuleConfig{MemoryPages: p.manifest.MemoryPages, HostFuncs: h.hostFuncs()}
	_, dir, err := h.cache.forModule(h.eng.Name(), p.sha256)
	if err != nil {
		return err
	}
	cfg.CacheDir = dir
	if cfg.Cache, err = wazero.NewCompilationCacheWithDir(dir); err != nil {
		return err
	}
	m, err := h.eng.Compile(ctx, wasm, cfg)
	if err == nil {
		err = m.Close(ctx)
	}
	return errors.Join(err, cfg.Cache.Close(ctx))
}
