package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sync/errgroup"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/host/internal/instrument"
)

// nativeEngine runs plugins on wazero with the Extism kernel ABI implemented here
// (engine_kernel.go) rather than by Extism's go-sdk: kernel calls cost a function call
// instead of a trip through Go, host functions allocate nothing of their own, and a
// plugin's error is a value, not a string to compare.
//
// A guest is stopped at its deadline through the countdown the instrument package
// compiles into every function entry and loop header: every thousand passes the guest
// calls yield, which looks at the call's context, and then reads its stop global. When
// that context has ended, yield sets the global and the guest traps. Nothing is
// armed per call: no context.AfterFunc, no goroutine. wazero's own
// close-on-context-done checks, an exit to Go at each of those places and a goroutine
// per call, are off. The yield is needed anyway: wazero's compiled code cannot be
// preempted by Go's scheduler, and that call is where a garbage collection's
// stop-the-world gets its turn.
//
// An instance's linear memories are reserved as address space, off the Go heap
// (linearmem_unix.go), where the system allows, and the module's data is mapped into
// them copy-on-write, shared by its instances (linearmem_data.go).
type nativeEngine struct {
	goHeapMemory bool // the linear memories are wazero's own, on the Go heap
	copyData     bool // the module's data is copied into each instance, not mapped
	// uninstrumented compiles the module as it is, without the countdown and stop
	// checks: its calls cannot be stopped. It is the bare wazero the benchmarks compare
	// the host with, and nothing else.
	uninstrumented bool
}

func (nativeEngine) Name() string { return "native" }

// preparedFile is the instrumented module's file in the module's cache directory,
// named for the rewrite's version so that a rewrite of another is not reused.
const preparedFile = "native-" + instrument.Version + ".wasm"

// dataFile is the module's data (instrument.Data), which the rewrite in preparedFile
// no longer carries, kept beside it: zero-padded to whole WebAssembly pages, which
// every system's page size divides and the memory's initial size is a multiple of, so
// that instances map it as it is. It is trusted as wazero's compiled code beside it is:
// the cache directory is the user's own.
const dataFile = "native-" + instrument.Version + ".data"

// dataPad is what dataFile's size is a multiple of: a WebAssembly page.
const dataPad = 64 << 10

func (e nativeEngine) Compile(ctx context.Context, wasm []byte, cfg engine.ModuleConfig) (engine.Module, error) {
	prepared := &preparedModule{Result: &instrument.Result{Wasm: wasm}}
	if !e.uninstrumented {
		var err error
		if prepared, err = prepare(wasm, cfg.CacheDir); err != nil {
			return nil, err
		}
		defer prepared.close()
	}
	rc := wazero.NewRuntimeConfig().WithMemoryLimitPages(cfg.MemoryPages)
	if cfg.Cache != nil {
		rc = rc.WithCompilationCache(cfg.Cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	m := &nativeModule{rt: rt, resettable: cfg.Resettable, goHeapMemory: e.goHeapMemory, env: cfg.Env, live: map[*nativeInstance]struct{}{}}
	// wazero compiles on the goroutine calling it, hundreds of milliseconds for a Go
	// guest even from its cache: the rest of the runtime is set up meanwhile, on
	// another core if there is one.
	var g errgroup.Group
	g.Go(func() error {
		var err error
		share := !e.copyData && !e.goHeapMemory
		if f := prepared.dataFile; f != nil {
			prepared.dataFile = nil // the image's now
			m.data, err = openDataImage(f, share)
		} else {
			m.data = newDataImage(prepared.Data, share)
		}
		return errors.Join(err, setUpRuntime(ctx, rt, m, cfg.HostFuncs))
	})
	var err error
	m.guest, err = rt.CompileModule(ctx, prepared.Wasm)
	if err = errors.Join(err, g.Wait()); err == nil {
		err = checkImports(m.guest, cfg.HostFuncs)
	}
	if err != nil {
		m.data.close()
		rt.Close(context.Background())
		return nil, err
	}
	m.globals = prepared.GlobalExports
	return m, nil
}

// setUpRuntime instantiates in rt what a guest imports, and compiles m's kernel.
func setUpRuntime(ctx context.Context, rt wazero.Runtime, m *nativeModule, funcs []engine.HostFunc) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return err
	}
	if err := instantiateKernelGo(ctx, rt); err != nil {
		return err
	}
	if err := instantiateHostFuncs(ctx, rt, funcs); err != nil {
		return err
	}
	if err := instantiateYield(ctx, rt); err != nil {
		return err
	}
	var err error
	m.kernel, err = rt.CompileModule(ctx, kernelWasm())
	return err
}

// preparedModule is a module as the native engine compiles it.
type preparedModule struct {
	*instrument.Result
	// dataFile holds the module's data (the cache's dataFile), or is nil if Data
	// does (or there is none). Opened as the module is prepared, it cannot be evicted
	// from under the compilation.
	dataFile *os.File
	// wasmFile is the file Wasm is a mapping of, or nil: Wasm lasts until it is
	// closed and unreachable.
	wasmFile *os.File
}

// close closes the files.
func (p *preparedModule) close() {
	for _, f := range []*os.File{p.dataFile, p.wasmFile} {
		if f != nil {
			f.Close()
		}
	}
}

// prepare instruments a module (package instrument), or reads the instrumented module
// an earlier run kept in dir, mapped where the system allows: its pages are the page
// cache's, neither allocated nor copied. The module's data is kept in dir too.
func prepare(wasm []byte, dir string) (*preparedModule, error) {
	if dir != "" {
		if b, f, err := mapOrRead(filepath.Join(dir, preparedFile)); err == nil {
			p := &preparedModule{wasmFile: f}
			if p.Result, err = instrument.Describe(b); err == nil {
				if p.dataFile = openKeptData(dir); p.dataFile != nil {
					return p, nil
				}
				// Kept by a host from before the data was, or the module has none (the
				// rewrite left its data segments as they were).
				if p.Data, err = instrument.Data(wasm); err == nil {
					p.dataFile = keepData(dir, p.Result)
					return p, nil
				}
			}
			p.close()
		}
	}
	res, err := instrument.Rewrite(wasm)
	if err != nil {
		return nil, err
	}
	p := &preparedModule{Result: res}
	if dir != "" {
		keep(dir, preparedFile, res.Wasm)
		p.dataFile = keepData(dir, res)
	}
	return p, nil
}

// keepData keeps res's data in dir's dataFile and returns the file opened, taking the
// data out of res; it returns nil if res has none or the file could not be written.
func keepData(dir string, res *instrument.Result) *os.File {
	if res.Data == nil {
		return nil
	}
	padded := make([]byte, (len(res.Data)+dataPad-1)/dataPad*dataPad)
	copy(padded, res.Data)
	if !keep(dir, dataFile, padded) {
		return nil
	}
	f := openKeptData(dir)
	if f != nil {
		res.Data = nil
	}
	return f
}

// openKeptData opens dir's dataFile, or returns nil if there is none of a size it
// could have been written with (whole WebAssembly pages).
func openKeptData(dir string) *os.File {
	f, err := os.Open(filepath.Join(dir, dataFile))
	if err != nil {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Size() == 0 || st.Size()%dataPad != 0 {
		f.Close()
		return nil
	}
	return f
}

// keep writes b to dir's file name, whole or not at all: another process may be
// reading it. It reports whether it did; the cache only saves time, so a failure
// costs the next load the work again and nothing else.
func keep(dir, name string, b []byte) bool {
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return false
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), filepath.Join(dir, name)) != nil {
		os.Remove(tmp.Name())
		return false
	}
	return true
}

// checkImports refuses a module importing what the engine does not provide, naming
// it (wazero would only say that a module is missing, at instantiation).
func checkImports(compiled wazero.CompiledModule, funcs []engine.HostFunc) error {
	kernel := map[string]bool{}
	for _, f := range kernelGoFuncs {
		kernel[f.name] = true
	}
	for _, f := range kernelWasmFuncs {
		kernel[f.name] = true
	}
	host := map[string]bool{}
	for _, f := range funcs {
		host[f.Name] = true
	}
	for _, def := range compiled.ImportedFunctions() {
		module, name, _ := def.Import()
		switch {
		case module == wasi_snapshot_preview1.ModuleName:
		case module == kernelModule && kernel[name], module == engine.HostModule && host[name],
			module == instrument.YieldModule && name == instrument.YieldName:
		case module == kernelModule:
			return fmt.Errorf("it imports %s %s, which is not part of the kernel ABI (abi/ABI.md, section 1)", module, name)
		case module == engine.HostModule:
			return fmt.Errorf("it imports %s %s, which this host does not provide", module, name)
		default:
			return fmt.Errorf("it imports %s from module %s, which the host does not provide", name, module)
		}
	}
	if len(compiled.ImportedMemories()) > 0 {
		return errors.New("it imports a memory; a plugin defines its own")
	}
	return nil
}

// instantiateHostFuncs registers the host functions in rt. Each runs on the kernel of
// the instance calling it (instanceOf), and hands back its result in a new block.
func instantiateHostFuncs(ctx context.Context, rt wazero.Runtime, funcs []engine.HostFunc) error {
	b := rt.NewHostModuleBuilder(engine.HostModule)
	for _, hf := range funcs {
		params := make([]api.ValueType, hf.Params)
		for i := range params {
			params[i] = api.ValueTypeI64
		}
		fn, n, name := hf.Fn, hf.Params, hf.Name
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
			k := &instanceOf(ctx).kernel
			off, err := k.write(fn(ctx, k, stack[:n]))
			if err != nil {
				// Nothing can be handed back: the guest's blocks fill its memory.
				panic(fmt.Errorf("host function %s: writing the result: %w", name, err))
			}
			stack[0] = off
		}), params, []api.ValueType{api.ValueTypeI64}).Export(hf.Name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// instantiateYield registers the function the instrumented guest calls every
// instrument.YieldEvery loop passes and function calls: there, a call whose context
// ended is stopped (the guest reads its stop global next). Entering Go is itself of
// use: the way there runs through Go functions whose prologues honour a preemption
// request, a collection's or the scheduler's. A runtime.Gosched here doubled the time
// of a tool call (BENCHMARKS.md).
func instantiateYield(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(instrument.YieldModule).NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, _ []uint64) {
			if ctx.Err() != nil {
				instanceOf(ctx).interrupt()
			}
		}), nil, nil).
		Export(instrument.YieldName).
		Instantiate(ctx)
	return err
}

type instanceKey struct{}

// instanceOf returns the instance whose call ctx is the context of.
func instanceOf(ctx context.Context) *nativeInstance {
	return ctx.Value(instanceKey{}).(*nativeInstance)
}

// callContext is the context of a call of an instance's: the caller's, and the
// instance for instanceOf. Each instance has one, set for each call, where
// context.WithValue would make one a call.
type callContext struct {
	context.Context
	i *nativeInstance
}

// Value returns the instance for instanceKey, the caller's value for any other key.
func (c *callContext) Value(key any) any {
	if key == (instanceKey{}) {
		return c.i
	}
	return c.Context.Value(key)
}

type nativeModule struct {
	rt           wazero.Runtime
	guest        wazero.CompiledModule
	kernel       wazero.CompiledModule
	globals      []string   // the exports of the guest's mutable globals
	data         *dataImage // the guest's initial memory, or nil if its data segments hold it
	resettable   bool
	goHeapMemory bool
	env          []string // the guest's environment, "KEY=value"

	mu     sync.Mutex
	live   map[*nativeInstance]struct{}
	closed bool
}

func (m *nativeModule) HasExport(name string) bool {
	_, ok := m.guest.ExportedFunctions()[name]
	return ok
}

// Close stops the instances still running and closes the runtime, and with it every
// instance.
func (m *nativeModule) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	for i := range m.live {
		i.halt()
	}
	m.mu.Unlock()
	return errors.Join(m.rt.Close(ctx), m.data.close())
}

func (m *nativeModule) Instantiate(ctx context.Context) (engine.Instance, error) {
	i := &nativeInstance{module: m, stderr: &engine.TailBuffer{Max: 4096}, life: &engine.Lifetime{}}
	if !m.goHeapMemory {
		i.memory = newArena()
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("the plugin is unloaded")
	}
	m.live[i] = struct{}{}
	m.mu.Unlock()
	i.memory.enter()
	defer i.memory.leave()
	if err := i.instantiate(ctx); err != nil {
		i.Close(context.Background())
		return nil, err
	}
	return i, nil
}

// nativeInstance is an instance of a guest and its kernel.
type nativeInstance struct {
	module *nativeModule
	guest  api.Module
	kmod   api.Module
	kernel kernel
	stderr *engine.TailBuffer
	life   *engine.Lifetime
	memory *arena // nil: the memories are on the Go heap

	exports map[string]api.Function
	stack   [1]uint64 // the exports' parameter and result: at most one of each
	call    callContext
	// inputBuffer is the guest's terrarium_input_buffer, nil if it has none (or one of
	// another type): where Call writes a large input for the guest (handOver).
	inputBuffer api.Function

	// stop is the guest's stop global (package instrument): yield sets it when the
	// context of the current call has ended (interrupted then says so), halt when the
	// module is closed.
	stop        api.MutableGlobal
	mu          sync.Mutex
	interrupted bool

	calls    int
	snapshot *snapshot // taken after the first call if the module is resettable
}

func (i *nativeInstance) instantiate(ctx context.Context) error {
	m := i.module
	var err error
	kctx := experimental.WithMemoryAllocator(ctx, i.memory.allocator(nil))
	if i.kmod, err = m.rt.InstantiateModule(kctx, m.kernel, wazero.NewModuleConfig().WithName("")); err != nil {
		return fmt.Errorf("instantiating the kernel: %w", err)
	}
	i.kernel = newKernel(i.kmod)
	// wazero's defaults are a fake clock and a fixed random source: a Go guest's
	// garbage collector and timers stall under the first, and its crypto/rand repeats
	// under the second. Guests get real ones, and nothing else: no filesystem, no
	// arguments, only the environment the manifest sets. Sleeping ends with the call
	// (every blocking WASI function of wazero's waits in nanosleep: poll_oneoff's
	// clocks; stdin is empty).
	mc := engine.WithEnv(wazero.NewModuleConfig(), m.env).
		WithName("").
		WithStartFunctions(). // the start function runs below, stoppable
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(i.life.Nanosleep).
		WithRandSource(rand.Reader).
		WithStderr(i.stderr).
		WithStdout(io.Discard)
	ictx := experimental.WithMemoryAllocator(ctx, i.memory.allocator(m.data))
	ictx = experimental.WithImportResolver(ictx, func(name string) api.Module {
		if name == kernelModule {
			return i.kmod
		}
		return nil
	})
	ictx = experimental.WithCloseNotifier(ictx, i.life)
	if i.guest, err = m.rt.InstantiateModule(ictx, m.guest, mc); err != nil {
		return err
	}
	if m.data != nil && i.memory == nil {
		// wazero made the memory, without the data (the arena's memories have it).
		if err := m.data.fill(memoryOf(i.guest.Memory())); err != nil {
			return err
		}
	}
	i.stop, _ = i.guest.ExportedGlobal(instrument.StopExport).(api.MutableGlobal) // none if uninstrumented
	i.exports = map[string]api.Function{}
	if fn := i.guest.ExportedFunction(plugin.ExportInputBuffer); fn != nil &&
		slices.Equal(fn.Definition().ParamTypes(), []api.ValueType{api.ValueTypeI64}) &&
		slices.Equal(fn.Definition().ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
		i.inputBuffer = fn
	}
	// The start function, then WASI's initialization: a reactor's _initialize (Go's
	// runtime and package initialization), or a command's constructors.
	for _, name := range []string{instrument.StartExport, "_initialize", "__wasm_call_ctors"} {
		if !m.HasExport(name) {
			continue
		}
		if _, err := i.run(ctx, name); err != nil {
			return fmt.Errorf("%s: %w", strings.TrimPrefix(name, "terrarium:"), err)
		}
		if name == "_initialize" {
			break
		}
	}
	return nil
}

// run calls an export of the guest under ctx, stoppable, and returns its result.
func (i *nativeInstance) run(ctx context.Context, export string) (uint32, error) {
	fn := i.exports[export]
	if fn == nil {
		if fn = i.guest.ExportedFunction(export); fn == nil {
			return 0, fmt.Errorf("the plugin has no export %s", export)
		}
		if len(fn.Definition().ParamTypes()) > 0 || len(fn.Definition().ResultTypes()) > 1 {
			return 0, fmt.Errorf("export %s: want a function () -> i32", export)
		}
		i.exports[export] = fn
	}
	return i.invoke(ctx, fn, 0)
}

// invoke calls fn, of at most one parameter and one result, under ctx, stoppable, and
// returns its result.
func (i *nativeInstance) invoke(ctx context.Context, fn api.Function, param uint64) (uint32, error) {
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	i.life.Begin(ctx)
	i.stack[0] = param
	i.call = callContext{ctx, i}
	err := fn.CallWithStack(&i.call, i.stack[:])
	// An idle instance holds nothing of its last call's (a session, through its
	// binding).
	i.call.Context = context.Background()
	i.life.End()
	if err == nil && ctx.Err() != nil {
		// The guest returned after its context ended, before its next yield (woken
		// from a sleep by that end, say): as late as a guest stopped, and failed as
		// one. The instance is discarded, its stop global set or not.
		return 0, i.failure(ctx, err, true)
	}
	if err != nil {
		return 0, i.failure(ctx, err, i.interrupted)
	}
	if closed, code := i.life.Closed(); closed {
		return 0, fmt.Errorf("the plugin exited with code %d", code)
	}
	return uint32(i.stack[0]), nil
}

// failure describes why a call failed.
func (i *nativeInstance) failure(ctx context.Context, err error, stopped bool) error {
	if stopped {
		return fmt.Errorf("stopped: %w", context.Cause(ctx))
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("the plugin exited with code %d", exit.ExitCode())
	}
	if tail := strings.TrimSpace(i.stderr.String()); tail != "" {
		err = fmt.Errorf("%w (stderr: %s)", err, tail)
	}
	return err
}

// interrupt stops the call under way, whose context ended: the guest traps once yield
// returns. It runs on the call's goroutine, within yield.
func (i *nativeInstance) interrupt() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.stop.Set(1)
	i.interrupted = true
}

// halt stops the guest for good, running or not (the module is being closed).
func (i *nativeInstance) halt() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stop != nil {
		i.stop.Set(1)
	}
}

func (i *nativeInstance) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	i.memory.enter()
	defer i.memory.leave()
	if err := i.kernel.begin(input); err != nil {
		return nil, err
	}
	i.stderr.Reset()
	if i.inputBuffer != nil && len(input) >= handOverMin {
		if err := i.handOver(ctx, input); err != nil {
			return nil, err
		}
	}
	rc, err := i.run(ctx, export)
	if err != nil {
		return nil, err
	}
	k := &i.kernel
	var out []byte
	var msg []byte
	if k.errSet {
		msg, _ = k.view(k.err, k.blocks[k.err])
	}
	switch {
	case len(msg) > 0:
		// An error set wins over the return code: a plugin's error is never dropped.
		return nil, &engine.PluginError{Msg: string(msg)}
	case rc != 0:
		return nil, engine.ReturnedWithoutError(export, rc)
	case k.outputSet:
		view, ok := k.view(k.output, k.outputLen)
		if !ok {
			return nil, fmt.Errorf("%s set an output beyond the kernel's memory", export)
		}
		out = append([]byte(nil), view...)
	}
	i.calls++
	if i.calls == 1 && i.module.resettable {
		i.snapshot = i.take()
	}
	return out, nil
}

// handOverMin is the smallest input handed over to a guest's terrarium_input_buffer:
// the extra export call costs a Go guest about what reading 1 KiB through the kernel,
// eight bytes a call, does; from 4 KiB the hand-over is clearly faster (BENCHMARKS.md,
// "Plugins: the input in one copy").
const handOverMin = 4 << 10

// handOver writes input into the guest's own memory, at the address its
// terrarium_input_buffer gives for it (ABI.md, section 2), under the call's context as
// any of the guest's code runs. The kernel holds the input too: a guest declining (0)
// reads it there. The address is the guest's word, checked: input must lie within the
// guest's memory.
func (i *nativeInstance) handOver(ctx context.Context, input []byte) error {
	addr, err := i.invoke(ctx, i.inputBuffer, uint64(len(input)))
	if err != nil {
		return fmt.Errorf("%s: %w", plugin.ExportInputBuffer, err)
	}
	if addr == 0 {
		return nil
	}
	if mem := i.guest.Memory(); mem == nil || !mem.Write(addr, input) {
		return fmt.Errorf("%s returned address %d for an input of %d bytes, beyond the plugin's memory", plugin.ExportInputBuffer, addr, len(input))
	}
	return nil
}

func (i *nativeInstance) Close(ctx context.Context) error {
	m := i.module
	m.mu.Lock()
	delete(m.live, i)
	m.mu.Unlock()
	var errs []error
	if i.guest != nil {
		errs = append(errs, i.guest.Close(ctx))
	}
	if i.kmod != nil {
		errs = append(errs, i.kmod.Close(ctx))
	}
	return errors.Join(errs...)
}
