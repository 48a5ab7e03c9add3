//go:build linux || darwin

package host

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
)

// growerWasm is a module of one page of memory, exported, and of grow (i32) -> i32,
// the guest's memory.grow: the number of pages before, or -1.
var growerWasm = []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
	1, 6, 1, 0x60, 1, 0x7f, 1, 0x7f, // type 0: (i32) -> i32
	3, 2, 1, 0, // function 0 of type 0
	5, 3, 1, 0, 1, // memory: at least one page, no maximum
	7, 17, 2, 4, 'g', 'r', 'o', 'w', 0, 0, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0,
	10, 8, 1, 6, 0, 0x20, 0, 0x40, 0, 0x0b, // local.get 0; memory.grow; end
}

// grower instantiates growerWasm under a memory limit of limit pages, its memory
// made by a.
func grower(t *testing.T, a *arena, limit uint32) (api.Module, func(pages uint32) int32) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(limit))
	t.Cleanup(func() { rt.Close(ctx) })
	mod, err := rt.Instantiate(experimental.WithMemoryAllocator(ctx, a.allocator(nil)), growerWasm)
	if err != nil {
		t.Fatal(err)
	}
	grow := mod.ExportedFunction("grow")
	return mod, func(pages uint32) int32 {
		res, err := grow.Call(ctx, uint64(pages))
		if err != nil {
			t.Fatal(err)
		}
		return int32(res[0])
	}
}

// TestReservedMemoryGrowsInPlace: the guest's memory.grow keeps the memory where it
// is, with what it holds, up to the limit, and fails beyond it as the guest expects
// (-1), leaving the memory as it was.
func TestReservedMemoryGrowsInPlace(t *testing.T) {
	const limit = 64
	mod, grow := grower(t, newArena(), limit)
	mem := mod.Memory()
	canary := []byte("canary-at-the-end-of-page-one")
	at := mem.Size() - uint32(len(canary))
	mem.Write(at, canary)
	start := unsafe.SliceData(memoryOf(mem))
	if before := grow(1); before != 1 {
		t.Fatalf("grow(1) = %d, want 1", before)
	}
	if before := grow(limit - 2); before != 2 {
		t.Fatalf("grow to the limit = %d, want 2", before)
	}
	if got := unsafe.SliceData(memoryOf(mem)); got != start {
		t.Error("the memory moved as it grew")
	}
	if got, _ := mem.Read(at, uint32(len(canary))); !bytes.Equal(got, canary) {
		t.Errorf("after growing, the memory holds %q where it held %q", got, canary)
	}
	// The pages grown into are zero and writable up to the last byte.
	if !mem.WriteByte(limit*65536-1, 7) {
		t.Error("the last byte of the limit is not writable")
	}
	if got := grow(1); got != -1 {
		t.Errorf("grow past the limit = %d, want -1", got)
	}
	if mem.Size() != limit*65536 {
		t.Errorf("after a refused grow the memory has %d bytes, want %d", mem.Size(), limit*65536)
	}
}

// TestMappingRefusesPastItsRegion: the allocator itself makes no memory bigger than
// it reserved, whatever wazero asks.
func TestMappingRefusesPastItsRegion(t *testing.T) {
	m := newArena().allocate(nil, 2<<16)
	defer m.Free()
	if b := m.Reallocate(2 << 16); len(b) != 2<<16 {
		t.Fatalf("Reallocate(the reservation) gave %d bytes", len(b))
	}
	if b := m.Reallocate(3 << 16); b != nil {
		t.Errorf("Reallocate past the reservation gave %d bytes, want nil", len(b))
	}
}

// TestReservationRefusedFallsBackToTheHeap: a memory whose reservation the system
// refuses (more address space than there is) is a Go slice, which still grows.
func TestReservationRefusedFallsBackToTheHeap(t *testing.T) {
	before := liveMappings.Load()
	m := newArena().allocate(nil, 1<<62)
	defer m.Free()
	if _, ok := m.(*heapMemory); !ok || liveMappings.Load() != before {
		t.Fatalf("a reservation of 4 EiB gave a %T", m)
	}
	if b := m.Reallocate(1 << 16); len(b) != 1<<16 {
		t.Errorf("the fallback memory gave %d bytes, want %d", len(b), 1<<16)
	}
}

// TestClosedInstancesUnmapTheirMemories: closing instances gives their memories back,
// whether their last call succeeded or trapped.
func TestClosedInstancesUnmapTheirMemories(t *testing.T) {
	inst, ctx := newNativeInstance(t, "testdata/misbehave", false, nil)
	before := liveMappings.Load()
	for n := range 20 {
		i, err := inst.module.Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := liveMappings.Load(); got != before+2 {
			t.Fatalf("an instance holds %d mappings, want 2 (its guest's memory, its kernel's)", got-before)
		}
		tool := []byte(`{"tool":"ok","input":{}}`)
		if n%2 == 1 {
			tool = []byte(`{"tool":"panic","input":{}}`) // traps mid-call; the host discards it
		}
		if _, err := i.Call(ctx, plugin.ExportCallTool, tool); (err != nil) != (n%2 == 1) {
			t.Fatalf("call %s: %v", tool, err)
		}
		i.Close(ctx)
		if got := liveMappings.Load(); got != before {
			t.Fatalf("after closing instance %d, %d mappings are left of it", n, got-before)
		}
	}
}

// TestUnloadingDuringACallUnmapsAfterIt: the memories of an instance whose plugin is
// closed while it runs stay mapped until its call ends (the guest runs on to its next
// yield), and are unmapped then.
func TestUnloadingDuringACallUnmapsAfterIt(t *testing.T) {
	// misbehave's sleep tool logs first: the log waits until the plugin is closed.
	entered, release := make(chan struct{}), make(chan struct{})
	inst, ctx := newNativeInstance(t, "testdata/misbehave", false, func(funcs []engine.HostFunc) {
		for j, f := range funcs {
			if f.Name == plugin.FnLog {
				funcs[j].Fn = func(context.Context, engine.HostCall, []uint64) []byte {
					close(entered)
					<-release
					return ok(nil)
				}
			}
		}
	})
	before := liveMappings.Load()
	done := make(chan error, 1)
	go func() {
		_, err := inst.Call(ctx, plugin.ExportCallTool, []byte(`{"tool":"sleep","input":{"ms":1}}`))
		done <- err
	}()
	<-entered
	if err := inst.module.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := liveMappings.Load(); got != before {
		t.Errorf("closing the plugin during a call unmapped %d of its memories", before-got)
	}
	close(release) // the guest runs on, in its memory, until it is stopped
	if err := <-done; err == nil {
		t.Error("the call of the closed plugin succeeded")
	}
	if got := liveMappings.Load(); got != before-2 {
		t.Errorf("after the call ended, %d of its 2 memories are still mapped", got-(before-2))
	}
}

// TestConcurrentInstancesOwnTheirMemories runs instances of one plugin on several
// goroutines at once (go test -race), each made, called and closed many times.
func TestConcurrentInstancesOwnTheirMemories(t *testing.T) {
	inst, ctx := resettableCalculator(t)
	before := liveMappings.Load()
	input := []byte(`{"tool":"calc","input":{"expression":"6 * 7"}}`)
	want, err := inst.Call(ctx, plugin.ExportCallTool, input)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 3 {
				i, err := inst.module.Instantiate(ctx)
				if err != nil {
					errs <- err
					return
				}
				for range 5 {
					got, err := i.Call(ctx, plugin.ExportCallTool, input)
					if err == nil && !bytes.Equal(got, want) {
						err = errors.New("answered " + string(got))
					}
					if err != nil {
						errs <- err
						break
					}
				}
				i.Close(ctx)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := liveMappings.Load(); got != before {
		t.Errorf("%d mappings left by the closed instances", got-before)
	}
}
