package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
)

// The engine runs WebAssembly. The rest of the host sees only these interfaces, so
// the engine (today Extism's go-sdk on wazero) can be replaced without touching the
// pool, the host functions or the agent adapters.

// engine compiles modules.
type engine interface {
	compile(ctx context.Context, wasm []byte, cfg moduleConfig) (module, error)
}

// moduleConfig is what a compiled module needs to know about its plugin.
type moduleConfig struct {
	memoryPages uint32
	hostFuncs   []hostFunc
}

// hostFunc is one function of terrarium:host/v1: its name, its number of i64
// parameters, and its body, which returns the result block to hand back.
type hostFunc struct {
	name   string
	params int
	fn     func(ctx context.Context, call *hostCall, args []uint64) []byte
}

// hostCall gives a host function access to the calling instance's memory blocks.
type hostCall struct {
	read  func(offset uint64) ([]byte, error)
	write func(data []byte) (uint64, error)
}

// module is a compiled plugin: instances of it can be made concurrently.
type module interface {
	// instantiate makes an instance; it ends with ctx, even inside the module's start
	// function.
	instantiate(ctx context.Context) (instance, error)
	hasExport(name string) bool
	close(ctx context.Context) error
}

// instance is one instantiated plugin. It is not safe for concurrent use.
type instance interface {
	// call runs an export. A *pluginError is an error the plugin reported (the
	// instance is fine); any other error means the instance is no longer usable,
	// whatever the cause: a trap, an exit (even with code 0), the end of ctx. The call
	// ends with ctx, even while the guest sleeps or waits in a WASI function.
	call(ctx context.Context, export string, input []byte) ([]byte, error)
	// reset returns the instance to the state it was in when its first call (the
	// describe that warms it up) returned, so that nothing later calls left in its
	// memory reaches the next session. An engine that cannot returns an error wrapping
	// errors.ErrUnsupported, and the pool makes a new instance instead.
	reset(ctx context.Context) error
	close(ctx context.Context) error
}

// pluginError is an error a plugin reported through error_set.
type pluginError struct{ msg string }

func (e *pluginError) Error() string { return e.msg }

// extismEngine runs plugins with Extism's go-sdk on wazero.
type extismEngine struct {
	cache wazero.CompilationCache // nil: compile every time
}

func (e *extismEngine) compile(ctx context.Context, wasm []byte, cfg moduleConfig) (module, error) {
	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(cfg.memoryPages).
		// A cancelled or timed-out call stops the guest, even in a loop without calls.
		WithCloseOnContextDone(true)
	if e.cache != nil {
		rc = rc.WithCompilationCache(e.cache)
	}
	funcs := make([]extism.HostFunction, len(cfg.hostFuncs))
	for i, hf := range cfg.hostFuncs {
		params := make([]extism.ValueType, hf.params)
		for j := range params {
			params[j] = extism.ValueTypeI64
		}
		fn := hf.fn
		f := extism.NewHostFunctionWithStack(hf.name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			hc := &hostCall{read: p.ReadBytes, write: p.WriteBytes}
			result := fn(ctx, hc, stack[:len(params)])
			off, err := p.WriteBytes(result)
			if err != nil {
				// The guest's memory is exhausted: nothing can be handed back.
				panic(fmt.Errorf("host function %s: writing the result: %w", hf.name, err))
			}
			stack[0] = off
		}, params, []extism.ValueType{extism.ValueTypeI64})
		f.SetNamespace(hostModuleName)
		funcs[i] = f
	}
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}}
	compiled, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{RuntimeConfig: rc, EnableWasi: true}, funcs)
	if err != nil {
		return nil, err
	}
	return &extismModule{compiled: compiled}, nil
}

type extismModule struct {
	compiled *extism.CompiledPlugin
	exports  map[string]bool
	once     sync.Once
}

func (m *extismModule) instantiate(ctx context.Context) (instance, error) {
	stderr := &tailBuffer{max: 4096}
	life := &lifetime{}
	life.begin(ctx)
	defer life.end()
	// wazero's defaults are a fake clock and a fixed random source: a Go guest's
	// garbage collector and timers stall under the first, and its crypto/rand repeats
	// under the second. Guests get real ones, and nothing else: no filesystem, no
	// environment, no arguments. Sleeping ends with the call (every blocking WASI
	// function of wazero's waits in nanosleep: poll_oneoff's clocks; stdin is empty).
	mc := wazero.NewModuleConfig().
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(life.nanosleep).
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
	return &extismInstance{p: p, stderr: stderr, life: life}, nil
}

func (m *extismModule) hasExport(name string) bool { return m.exports[name] }

func (m *extismModule) close(ctx context.Context) error { return m.compiled.Close(ctx) }

type extismInstance struct {
	p      *extism.Plugin
	stderr *tailBuffer
	life   *lifetime
}

func (i *extismInstance) call(ctx context.Context, export string, input []byte) ([]byte, error) {
	// Extism keeps per-instance variables; an instance serves many sessions, so none
	// survive from one call to the next.
	clear(i.p.Var)
	i.stderr.reset()
	i.life.begin(ctx)
	_, out, err := i.p.CallWithContext(ctx, export, input)
	i.life.end()
	if closed, code := i.life.closed(); closed && err == nil {
		// Extism reports an exit with code 0 as a success; the instance is gone all
		// the same.
		return nil, fmt.Errorf("the plugin exited with code %d", code)
	}
	if err == nil {
		return out, nil
	}
	// A plugin's own error comes back as exactly the message it set; anything else
	// is a trap, an exit or a cancellation, after which the instance is not reused.
	if msg := i.p.GetErrorWithContext(context.Background()); msg != "" && msg == err.Error() {
		return nil, &pluginError{msg: msg}
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

func (i *extismInstance) close(ctx context.Context) error { return i.p.Close(ctx) }

// lifetime follows one instance: the call it is serving, so that a sleeping guest
// wakes when the call ends (wazero's nanosleep gets no context), and whether its
// module was closed (a trap, an exit, the end of a call's context).
type lifetime struct {
	mu   sync.Mutex
	done <-chan struct{} // the current call's, or nil between calls

	exited atomic.Bool
	code   atomic.Uint32
}

// begin and end bracket a call (or the instantiation) running under ctx.
func (l *lifetime) begin(ctx context.Context) {
	l.mu.Lock()
	l.done = ctx.Done()
	l.mu.Unlock()
}

func (l *lifetime) end() {
	l.mu.Lock()
	l.done = nil
	l.mu.Unlock()
}

// nanosleep is the guest's WASI sleep: it returns at the end of the time asked for or
// of the current call, whichever comes first. A guest woken early finds the call's
// context done at its next function call, where wazero ends it.
func (l *lifetime) nanosleep(ns int64) {
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

// CloseNotify implements wazero's experimental.CloseNotifier: it is called when the
// instance's module (or the Extism kernel beside it) is closed.
func (l *lifetime) CloseNotify(_ context.Context, exitCode uint32) {
	l.code.Store(exitCode)
	l.exited.Store(true)
}

// closed reports whether the module was closed, and its exit code.
func (l *lifetime) closed() (bool, uint32) { return l.exited.Load(), l.code.Load() }

// tailBuffer keeps the last max bytes written to it: the end of a guest's stderr,
// where a Go runtime panic prints its message before the trap.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if extra := t.buf.Len() - t.max; extra > 0 {
		t.buf.Next(extra)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Reset()
}
