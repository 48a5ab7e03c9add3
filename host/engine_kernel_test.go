package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/host/internal/wasmtest"
)

// TestKernelInputLoadsStayInTheInput: input_load_* read the input's bytes and nothing
// past them, 0 instead (as Extism's kernel does), whatever the offset: within the
// input's block, in the next block, or so large that adding it to the input's offset
// wraps around. Freeing the input, or resetting the kernel, leaves no input.
func TestKernelInputLoadsStayInTheInput(t *testing.T) {
	inst := compileInstance(t, nativeEngine{}, wasmtest.Describer("{}", wasmtest.MemoryNone), engine.ModuleConfig{MemoryPages: 16})
	k := &inst.kernel
	ctx := context.Background()
	load := func(fn string, off ...uint64) uint64 {
		t.Helper()
		res, err := inst.kmod.ExportedFunction(fn).Call(ctx, off...)
		if err != nil {
			t.Fatalf("%s%v: %v", fn, off, err)
		}
		if fn == "input_load_u8" {
			return uint64(uint32(res[0])) // an i32: the upper half is not the result's
		}
		return res[0]
	}
	input := []byte("0123456789") // its block is 16 bytes: 6 of them past it
	begin := func() {
		t.Helper()
		if err := k.begin(input); err != nil {
			t.Fatal(err)
		}
		// What an earlier call could have left right after the input, in its block
		// and the next.
		if next, err := k.write([]byte("next block")); err != nil || next != uint64(k.input)+16 {
			t.Fatalf("the block after the input's at %d, %v", next, err)
		}
		k.mem.Write(k.input+uint32(len(input)), []byte("stale"))
	}
	begin()
	if n := load("input_length"); n != uint64(len(input)) {
		t.Errorf("input_length = %d, want %d", n, len(input))
	}
	n := uint64(len(input))
	for _, c := range []struct {
		fn   string
		off  uint64
		want uint64
	}{
		{"input_load_u8", 0, '0'},
		{"input_load_u8", n - 1, '9'},
		{"input_load_u8", n, 0},
		{"input_load_u8", 16, 0},
		{"input_load_u8", math.MaxUint64, 0},
		{"input_load_u8", math.MaxUint64 - uint64(k.input) + 1, 0}, // the input's offset plus this wraps to 0
		{"input_load_u64", 0, binary.LittleEndian.Uint64(input)},
		{"input_load_u64", n - 8, binary.LittleEndian.Uint64(input[n-8:])},
		{"input_load_u64", n - 7, 0},
		{"input_load_u64", n, 0},
		{"input_load_u64", 16, 0},
		{"input_load_u64", math.MaxUint64 - 7, 0},
		{"input_load_u64", math.MaxUint64, 0},
	} {
		if got := load(c.fn, c.off); got != c.want {
			t.Errorf("%s(%d) = %#x, want %#x", c.fn, c.off, got, c.want)
		}
	}

	k.free(k.input)
	if got, l := load("input_load_u8", 0), load("input_length"); got != 0 || l != 0 {
		t.Errorf("after the input was freed: input_load_u8(0) = %#x, input_length = %d; want 0, 0", got, l)
	}
	begin()
	k.reset()
	if got, l, o := load("input_load_u8", 0), load("input_length"), load("input_offset"); got != 0 || l != 0 || o != 0 {
		t.Errorf("after reset: input_load_u8(0) = %#x, input_length = %d, input_offset = %d; want 0, 0, 0", got, l, o)
	}
}

// TestKernelZeroesWhatCallsUsed: a call's begin zeroes every block the calls before it
// used, however they were made (the input, a host function's result, the guest's
// own), so that no new block holds an earlier call's bytes, whatever the new input's
// length, and leaves the rest of the memory as it was: what the guest stored past its
// blocks is its own, as its own memory is.
func TestKernelZeroesWhatCallsUsed(t *testing.T) {
	inst := compileInstance(t, nativeEngine{}, wasmtest.Describer("{}", wasmtest.MemoryNone), engine.ModuleConfig{MemoryPages: 16})
	k := &inst.kernel
	for _, input := range [][]byte{nil, []byte("a shorter input")} {
		if err := k.begin(make([]byte, 3000)); err != nil {
			t.Fatal(err)
		}
		result := []byte("a host function's result")
		off, err := k.write(result)
		if err != nil {
			t.Fatal(err)
		}
		// The end of the blocks used, the last being the result's.
		end := off + uint64(len(result))
		// As a guest may, mid-call: the blocks after it start from the beginning again.
		k.reset()
		for range 3 {
			k.alloc(100)
		}
		used := memoryOf(k.mem)[:end]
		for i := range used {
			used[i] = 0xaa // what the blocks held
		}
		beyond := k.mem.Size() - 8
		k.mem.WriteUint64Le(beyond, 0x5eed) // the guest stores anywhere; past its blocks, it is its own
		if err := k.begin(input); err != nil {
			t.Fatal(err)
		}
		if got, _ := k.view(k.input, uint32(len(input))); !bytes.Equal(got, input) {
			t.Errorf("the input after begin: %q, want %q", got, input)
		}
		for i, b := range used[kernelReserved+len(input):] {
			if b != 0 {
				t.Fatalf("input %q: byte %d of the memory, used by the call before, is %#x after begin", input, kernelReserved+len(input)+i, b)
			}
		}
		if v, _ := k.mem.ReadUint64Le(beyond); v != 0x5eed {
			t.Errorf("begin zeroed past the blocks used: %#x", v)
		}
	}
}

// BenchmarkKernelBegin measures what zeroing the blocks of the call before costs a
// call's start, for inputs of 1 KiB and 1 MiB: begin after a call that wrote a block
// as long as its input besides it (its output, say), against begin after one that
// wrote none (begin as it was before it zeroed anything), the two taking turns. It
// reports each one's time and the zeroing's share.
func BenchmarkKernelBegin(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			inst := compileInstance(b, nativeEngine{}, wasmtest.Describer("{}", wasmtest.MemoryNone), engine.ModuleConfig{MemoryPages: 64})
			k := &inst.kernel
			input := bytes.Repeat([]byte("x"), size)
			if err := k.begin(input); err != nil {
				b.Fatal(err)
			}
			if _, err := k.write(input); err != nil {
				b.Fatal(err)
			}
			dirty := k.dirty
			spent := takeTurns(b, 2, func(v int) time.Duration {
				k.dirty = []uint32{kernelReserved, dirty}[v]
				start := time.Now()
				if err := k.begin(input); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			})
			n := float64(b.N)
			b.ReportMetric(float64(spent[0].Nanoseconds())/n, "ns/unzeroed")
			b.ReportMetric(float64(spent[1].Nanoseconds())/n, "ns/zeroed")
			b.ReportMetric(float64(spent[1]-spent[0])/float64(spent[1]), "zeroing-share")
		})
	}
}
