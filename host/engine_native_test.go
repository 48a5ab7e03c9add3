package host

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// nativeInstance compiles the Go plugin of dir on the native engine, its host
// functions the host's changed by edit (nil: none changed), and returns an instance
// that has served its first call (describe, as the host's instances do), with the
// context its calls need.
func newNativeInstance(t *testing.T, dir string, resettable bool, edit func([]engine.HostFunc)) (*nativeInstance, context.Context) {
	t.Helper()
	return newInstanceOn(t, nativeEngine{}, dir, resettable, edit)
}

// compileInstance compiles wasm on eng with cfg, its module closed when the test ends,
// and returns a new instance of it.
func compileInstance(t testing.TB, eng nativeEngine, wasm []byte, cfg engine.ModuleConfig) *nativeInstance {
	t.Helper()
	ctx := context.Background()
	mod, err := eng.Compile(ctx, wasm, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(ctx) })
	inst, err := mod.Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return inst.(*nativeInstance)
}

// newInstanceOn is newNativeInstance on the native engine eng.
func newInstanceOn(t testing.TB, eng nativeEngine, dir string, resettable bool, edit func([]engine.HostFunc)) (*nativeInstance, context.Context) {
	t.Helper()
	data := pluginbuild.WasmForTest(t, dir)
	h, err := New(agent.NewRegistry(), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { h.Close(ctx) })
	cfg := engine.ModuleConfig{MemoryPages: 1024, HostFuncs: h.hostFuncs(), Resettable: resettable}
	if edit != nil {
		edit(cfg.HostFuncs)
	}
	if cfg.Cache, cfg.CacheDir, err = h.cache.forModule(eng.Name(), sha256Hex(data)); err != nil {
		t.Fatal(err)
	}
	inst := compileInstance(t, eng, data, cfg)
	ctx = context.WithValue(ctx, bindingKey{}, &binding{plugin: &Plugin{}}) // no grants
	if _, err := inst.Call(ctx, plugin.ExportDescribe, nil); err != nil {
		t.Fatal(err)
	}
	return inst, ctx
}

// resettableCalculator is a resettable instance of the calculator plugin.
func resettableCalculator(t *testing.T) (*nativeInstance, context.Context) {
	t.Helper()
	return newNativeInstance(t, "../plugins/calculator", true, nil)
}

// holds reports whether the guest's memory or its kernel's holds b.
func (i *nativeInstance) holds(b []byte) bool {
	for _, mem := range [][]byte{memoryOf(i.guest.Memory()), memoryOf(i.kernel.mem)} {
		if bytes.Contains(mem, b) {
			return true
		}
	}
	return false
}

// TestResetForgetsTheCalls: after Reset, nothing of the calls since the first is left
// in the instance's memories (the guest's, the kernel's), and the instance still
// answers as before.
func TestResetForgetsTheCalls(t *testing.T) {
	inst, ctx := resettableCalculator(t)
	canary := []byte("canary-2f9c61d0a4")
	input := []byte(`{"tool":"calc","input":{"expression":"6 * 7"}}`)
	// The envelope's unknown field is ignored, but the guest reads it in.
	want, err := inst.Call(ctx, plugin.ExportCallTool, append(input[:len(input)-1:len(input)-1], `,"note":"`+string(canary)+`"}`...))
	if err != nil {
		t.Fatal(err)
	}
	if !inst.holds(canary) {
		t.Fatal("the canary is not in the instance's memory after the call: the test proves nothing")
	}
	// A guest can store anywhere in its kernel's memory, not only in its blocks.
	stash := uint64(inst.kernel.mem.Size() - 8)
	if _, err := inst.kmod.ExportedFunction("store_u64").Call(ctx, stash, 0x5eed5eed5eed5eed); err != nil {
		t.Fatal(err)
	}
	if err := inst.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := inst.kernel.mem.ReadUint64Le(uint32(stash)); v != 0 {
		t.Errorf("a value the guest stored past its blocks survives Reset: %#x", v)
	}
	if inst.holds(canary) {
		t.Error("the canary of the call before Reset is still in the instance's memory")
	}
	if got, err := inst.Call(ctx, plugin.ExportCallTool, input); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the same call after Reset: %s, %v; want %s", got, err, want)
	}
}

// TestResetRefusesAGrownMemory: a guest whose memory grew since its snapshot is not
// reset (its allocator, put back, would grow the memory again), and says so.
func TestResetRefusesAGrownMemory(t *testing.T) {
	inst, ctx := resettableCalculator(t)
	if _, ok := inst.guest.Memory().Grow(1); !ok {
		t.Fatal("the memory does not grow")
	}
	if err := inst.Reset(ctx); !errors.Is(err, engine.ErrNoReset) {
		t.Errorf("Reset after the memory grew: %v, want ErrNoReset", err)
	}
}

// BenchmarkReset measures putting a warm calculator instance back to its snapshot,
// after one tool call: the price of a fresh instance per session without a new one.
func BenchmarkReset(b *testing.B) {
	inst, ctx := newInstanceOn(b, nativeEngine{}, "../plugins/calculator", true, nil)
	input := []byte(`{"tool":"calc","input":{"expression":"6 * 7"}}`)
	for b.Loop() {
		if _, err := inst.Call(ctx, plugin.ExportCallTool, input); err != nil {
			b.Fatal(err)
		}
		if err := inst.Reset(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(inst.snapshot.size)/(1<<20), "MiB/snapshot")
}

// TestYieldStopsALoopingGuest: a guest that never calls the host but through yield is
// stopped once its call's context has ended, seen by asking at a yield: nothing is
// told of that end (its Done never closes), so without the yield's check the call
// never returns.
func TestYieldStopsALoopingGuest(t *testing.T) {
	inst, bound := newNativeInstance(t, "testdata/misbehave", false, nil)
	ctx := &polledContext{Context: bound, never: make(chan struct{})}
	ctx.polls.Store(100)
	_, err := inst.Call(ctx, plugin.ExportCallTool, []byte(`{"tool":"loop","input":{}}`))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a looping guest whose context ended: %v, want it stopped with %v", err, context.Canceled)
	}
}

// polledContext ends once its Err has been asked polls times, and tells no one: only
// who asks sees the end.
type polledContext struct {
	context.Context
	polls atomic.Int64
	never chan struct{}
}

func (c *polledContext) Done() <-chan struct{} { return c.never }

func (c *polledContext) Err() error {
	if c.polls.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestCallEndingAfterItsContextFails: a guest that returns after its call's context
// ended, before a yield stopped it (woken from a wait by that end, say), fails as a
// stopped guest does: the caller is not handed an answer past its deadline.
func TestCallEndingAfterItsContextFails(t *testing.T) {
	// misbehave's poll tool logs, then waits an hour in one poll_oneoff and returns.
	logged := make(chan struct{}, 1)
	inst, bound := newNativeInstance(t, "testdata/misbehave", false, func(funcs []engine.HostFunc) {
		for j, f := range funcs {
			if f.Name == plugin.FnLog {
				funcs[j].Fn = func(context.Context, engine.HostCall, []uint64) []byte {
					logged <- struct{}{}
					return ok(nil)
				}
			}
		}
	})
	ctx, cancel := context.WithCancelCause(bound)
	go func() {
		<-logged
		cancel(errTimedOut) // the wait ends with it
	}()
	_, err := inst.Call(ctx, plugin.ExportCallTool, []byte(`{"tool":"poll","input":{}}`))
	if !errors.Is(err, errTimedOut) {
		t.Errorf("a guest returning after its context ended: %v, want %v", err, errTimedOut)
	}
}

// TestUninstrumentedEngineIsTheSameModule: the bare wazero the benchmarks compare the
// host with runs the module as it is (no stop global, so no countdown) and answers a
// call as the instrumented module does.
func TestUninstrumentedEngineIsTheSameModule(t *testing.T) {
	input := []byte(`{"tool":"calc","input":{"expression":"(1.5 + 2) * -3 / 7"}}`)
	var outs [2][]byte
	for v, eng := range []nativeEngine{{}, {uninstrumented: true}} {
		inst, ctx := newInstanceOn(t, eng, "../plugins/calculator", false, nil)
		if instrumented := inst.stop != nil; instrumented == eng.uninstrumented {
			t.Errorf("uninstrumented %v: the module has a stop global: %v", eng.uninstrumented, instrumented)
		}
		out, err := inst.Call(ctx, plugin.ExportCallTool, input)
		if err != nil {
			t.Fatalf("uninstrumented %v: %v", eng.uninstrumented, err)
		}
		outs[v] = out
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Errorf("uninstrumented %s, instrumented %s", outs[1], outs[0])
	}
}
