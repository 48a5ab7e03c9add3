package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/host/internal/wasmtest"
)

// handOverInstance instantiates a hand-made module on the native engine.
func handOverInstance(t *testing.T, wasm []byte) *nativeInstance {
	t.Helper()
	return compileInstance(t, nativeEngine{}, wasm, engine.ModuleConfig{MemoryPages: 16})
}

// TestHandOverWritesWhereTheGuestSays: an input of handOverMin bytes or more is
// written into the guest's memory at the address its terrarium_input_buffer returns;
// a smaller one is not (the guest reads it through the kernel).
func TestHandOverWritesWhereTheGuestSays(t *testing.T) {
	const at = 1024
	inst := handOverInstance(t, wasmtest.InputBuffer(wasmtest.I32Const(at)...))
	ctx := context.Background()
	small := bytes.Repeat([]byte("s"), handOverMin-1)
	if _, err := inst.Call(ctx, plugin.ExportCallTool, small); err != nil {
		t.Fatal(err)
	}
	if got, _ := inst.guest.Memory().Read(at, 1); got[0] != 0 {
		t.Errorf("an input of %d bytes, under the threshold, was handed over", len(small))
	}
	large := bytes.Repeat([]byte("0123456789abcdef"), handOverMin/16)
	if _, err := inst.Call(ctx, plugin.ExportCallTool, large); err != nil {
		t.Fatal(err)
	}
	if got, _ := inst.guest.Memory().Read(at, uint32(len(large))); !bytes.Equal(got, large) {
		t.Errorf("the guest's memory at %d does not hold the input of %d bytes", at, len(large))
	}
}

// TestHandOverBeyondTheMemoryFails: an address whose input would not fit in the
// guest's memory is the plugin's fault, named, and nothing is written.
func TestHandOverBeyondTheMemoryFails(t *testing.T) {
	const at = 65536 - 10 // one page: the input's end is past it
	inst := handOverInstance(t, wasmtest.InputBuffer(wasmtest.I32Const(at)...))
	_, err := inst.Call(context.Background(), plugin.ExportCallTool, make([]byte, handOverMin))
	if err == nil || !strings.Contains(err.Error(), plugin.ExportInputBuffer) || !strings.Contains(err.Error(), "beyond") {
		t.Errorf("an address past the guest's memory: %v, want a fault naming %s", err, plugin.ExportInputBuffer)
	}
}

// TestHandOverIsStoppable: a guest looping in its terrarium_input_buffer is stopped as
// in any of its code, once the call's context has ended.
func TestHandOverIsStoppable(t *testing.T) {
	// loop, br 0, end, i32.const 0
	inst := handOverInstance(t, wasmtest.InputBuffer(0x03, 0x40, 0x0c, 0, 0x0b, 0x41, 0))
	ctx := &polledContext{Context: context.Background(), never: make(chan struct{})}
	ctx.polls.Store(100)
	_, err := inst.Call(ctx, plugin.ExportCallTool, make([]byte, handOverMin))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a guest looping in %s: %v, want it stopped with %v", plugin.ExportInputBuffer, err, context.Canceled)
	}
}

// echoCall is hostcheck's echo tool called with a JSON string of n bytes of c.
func echoCall(n int, c string) (input, want []byte) {
	s := strings.Repeat(c, n/len(c))
	input, _ = json.Marshal(plugin.ToolInput{Tool: "echo", Input: s})
	want, _ = json.Marshal(map[string]string{"output": s})
	return input, want
}

// TestSDKTakesTheHandedOverInputOnce: a guest built with the SDK reads the input
// handed over to it rather than the kernel's, and only in the call it was handed over
// for: a later call of the same length, not handed over, reads its own input.
func TestSDKTakesTheHandedOverInputOnce(t *testing.T) {
	inst, ctx := newNativeInstance(t, "testdata/hostcheck", false, nil)
	if inst.inputBuffer == nil {
		t.Fatalf("hostcheck does not export %s", plugin.ExportInputBuffer)
	}
	a, wantA := echoCall(2*handOverMin, "a")
	b, wantB := echoCall(2*handOverMin, "b")
	// The kernel holds b, the guest's buffer a: what the guest answers says which it read.
	if err := inst.kernel.begin(b); err != nil {
		t.Fatal(err)
	}
	if err := inst.handOver(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := inst.run(ctx, plugin.ExportCallTool); err != nil || got != 0 {
		t.Fatalf("the call: %d, %v", got, err)
	}
	if got, _ := inst.kernel.view(inst.kernel.output, inst.kernel.outputLen); !bytes.Equal(got, wantA) {
		t.Fatalf("with the input handed over, the guest answered %.40q..., want %.40q...", got, wantA)
	}
	inst.inputBuffer = nil // a host that does not hand the input over
	if got, err := inst.Call(ctx, plugin.ExportCallTool, b); err != nil || !bytes.Equal(got, wantB) {
		t.Errorf("the next call, not handed over: %.40q..., %v; want %.40q...", got, err, wantB)
	}
}

// BenchmarkHandOver measures a call of hostcheck's raw_length with inputs of a few
// sizes, read through the kernel or handed over whatever the size: where the two
// meet is where handOverMin belongs.
func BenchmarkHandOver(b *testing.B) {
	for _, size := range []int{1 << 10, 4 << 10, 16 << 10, 64 << 10} {
		input, _ := json.Marshal(plugin.ToolInput{Tool: "raw_length", Input: strings.Repeat("x", size)})
		for _, handOver := range []bool{false, true} {
			name := map[bool]string{false: "kernel", true: "handover"}[handOver]
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, name), func(b *testing.B) {
				inst, ctx := newInstanceOn(b, nativeEngine{}, "testdata/hostcheck", false, nil)
				b.SetBytes(int64(len(input)))
				for b.Loop() {
					if err := inst.kernel.begin(input); err != nil {
						b.Fatal(err)
					}
					if handOver {
						if err := inst.handOver(ctx, input); err != nil {
							b.Fatal(err)
						}
					}
					if rc, err := inst.run(ctx, plugin.ExportCallTool); err != nil || rc != 0 {
						b.Fatal(rc, err)
					}
				}
			})
		}
	}
}
