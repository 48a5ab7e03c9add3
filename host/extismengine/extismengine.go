// Package extismengine runs Terrarium plugins with Extism's go-sdk, the engine the
// host used before it ran the Extism kernel ABI itself. Select it with
//
//	host.New(r, host.WithEngine(extismengine.New()))
//
// It is kept as the reference the host's own engine is tested against (the same
// plugins, inputs and faults give the same results on both), and for plugins that
// need more of Extism's kernel than ABI.md defines. It lives in a package of its own so
// that a program using the default engine links none of the go-sdk's dependencies
// (protobuf, OpenTelemetry's OTLP types, observe-sdk).
//
// It is slower: every kernel call goes through Go, and wazero's close-on-context-done
// checks, which stop a looping guest at its deadline, exit to Go at every loop and
// call of the guest (BENCHMARKS.md).
package extismengine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/terrarium-ai/terrarium/host/internal/engine"
)

// New returns the Extism engine.
func New() engine.Engine { return extismEngine{} }

type extismEngine struct{}

func (extismEngine) Name() string { return "extism" }

func (extismEngine) Compile(ctx context.Context, wasm []byte, cfg engine.ModuleConfig) (engine.Module, error) {
	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(cfg.MemoryPages).
		// A cancelled or timed-out call stops the guest, even in a loop without calls.
		WithCloseOnContextDone(true)
	if cfg.Cache != nil {
		rc = rc.WithCompilationCache(cfg.Cache)
	}
	funcs := make([]extism.HostFunction, len(cfg.HostFuncs))
	for i, hf := range cfg.HostFuncs {
		params := make([]extism.ValueType, hf.Params)
		for j := range params {
			params[j] = extism.ValueTypeI64
		}
		fn := hf.Fn
		f := extism.NewHostFunctionWithStack(hf.Name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			result := fn(ctx, blocks{p}, stack[:len(params)])
			off, err := p.WriteBytes(result)
			if err != nil {
				// The guest's memory is exhausted: nothing can be handed back.
				panic(fmt.Errorf("host function %s: writing the result: %w", hf.Name, err))
			}
			stack[0] = off
		}, params, []extism.ValueType{extism.ValueTypeI64})
		f.SetNamespace(engine.HostModule)
		funcs[i] = f
	}
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}}
	compiled, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{RuntimeConfig: rc, EnableWasi: true}, funcs)
	if err != nil {
		return nil, err
	}
	return &module{compiled: compiled, env: cfg.Env}, nil
}

// blocks reads the calling instance's blocks.
type blocks struct{ p *extism.CurrentPlugin }

func (b blocks) Read(offset uint64) ([]byte, error) { return b.p.ReadBytes(offset) }

type module struct {
	compiled *extism.CompiledPlugin
	env      []string // the guest's environment, "KEY=value"
	exports  map[string]bool
	once     sync.Once
}

func (m *module) Instantiate(ctx context.Context) (engine.Instance, error) {
	stderr := &engine.TailBuffer{Max: 4096}
	life := &engine.Lifetime{}
	life.Begin(ctx)
	defer life.End()
	// wazero's defaults are a fake clock and a fixed random source: a Go guest's
	// garbage collector and timers stall under the first, and its crypto/rand repeats
	// under the second. Guests get real ones, and nothing else: no filesystem, no
	// arguments, only the environment the manifest sets. Sleeping ends with the call
	// (every blocking WASI function of wazero's waits in nanosleep: poll_oneoff's
	// clocks; stdin is empty).
	mc := engine.WithEnv(wazero.NewModuleConfig(), m.env).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(life.Nanosleep).
		WithRandSource(rand.Reader).
		WithStderr(stderr).
		WithStdout(io.Discard)
	p, err := m.compiled.Instance(experimental.WithCloseNotifier(ctx, life), extism.PluginInstanceConfig{ModuleConfig: mc})
	if err != nil {
		return nil, err
	}
	p.SetLogger(func(extism.LogLevel, string) {}) // the kernel's own logs: the host logs what matters
	m.once.Do(func() {
		m.exports = map[string]bool{}
		for name := range p.Module().ExportedFunctions() {
			m.exports[name] = true
		}
	})
	return &instance{p: p, stderr: stderr, life: life}, nil
}

func (m *module) HasExport(name string) bool { return m.exports[name] }

func (m *module) Close(ctx context.Context) error { return m.compiled.Close(ctx) }

type instance struct {
	p      *extism.Plugin
	stderr *engine.TailBuffer
	life   *engine.Lifetime
}

func (i *instance) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	// Extism keeps per-instance variables; an instance serves many sessions, so none
	// survive from one call to the next.
	clear(i.p.Var)
	i.stderr.Reset()
	i.life.Begin(ctx)
	rc, out, err := i.p.CallWithContext(ctx, export, input)
	i.life.End()
	if closed, code := i.life.Closed(); closed && err == nil {
		// Extism reports an exit with code 0 as a success; the instance is gone all
		// the same.
		return nil, fmt.Errorf("the plugin exited with code %d", code)
	}
	if err == nil {
		if rc != 0 {
			// Extism leaves the return code to its caller; a failure without a
			// reason is still a failure.
			return nil, engine.ReturnedWithoutError(export, rc)
		}
		return out, nil
	}
	// A plugin's own error comes back as exactly the message it set; anything else
	// is a trap, an exit or a cancellation, after which the instance is not reused.
	if msg := i.p.GetErrorWithContext(context.Background()); msg != "" && msg == err.Error() {
		return nil, &engine.PluginError{Msg: msg}
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("the plugin exited with code %d", exit.ExitCode())
	}
	if tail := strings.TrimSpace(i.stderr.String()); tail != "" {
		err = fmt.Errorf("%w (stderr: %s)", err, tail)
	}
	return nil, err
}

// Reset is not supported: Extism's kernel keeps its own state beside the guest's.
func (i *instance) Reset(context.Context) error { return engine.ErrNoReset }

func (i *instance) Close(ctx context.Context) error { return i.p.Close(ctx) }
