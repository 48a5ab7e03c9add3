//go:build wasip1

package sdk

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// The Extism kernel (ABI.md, section 1). Offsets and lengths are i64; bytes are i32.

//go:wasmimport extism:host/env input_length
func extismInputLength() uint64

//go:wasmimport extism:host/env input_load_u8
func extismInputLoadU8(offset uint64) uint32

//go:wasmimport extism:host/env input_load_u64
func extismInputLoadU64(offset uint64) uint64

//go:wasmimport extism:host/env alloc
func extismAlloc(length uint64) uint64

//go:wasmimport extism:host/env free
func extismFree(offset uint64)

//go:wasmimport extism:host/env length
func extismLength(offset uint64) uint64

//go:wasmimport extism:host/env load_u8
func extismLoadU8(offset uint64) uint32

//go:wasmimport extism:host/env load_u64
func extismLoadU64(offset uint64) uint64

//go:wasmimport extism:host/env store_u8
func extismStoreU8(offset uint64, v uint32)

//go:wasmimport extism:host/env store_u64
func extismStoreU64(offset uint64, v uint64)

//go:wasmimport extism:host/env output_set
func extismOutputSet(offset, length uint64)

//go:wasmimport extism:host/env error_set
func extismErrorSet(offset uint64)

// Terrarium's host functions (ABI.md, section 3): every parameter is an i64, every
// result the offset of a result block.

//go:wasmimport terrarium:host/v1 session_id
func hostSessionID() uint64

//go:wasmimport terrarium:host/v1 state_get
func hostStateGet() uint64

//go:wasmimport terrarium:host/v1 state_set
func hostStateSet(state uint64) uint64

//go:wasmimport terrarium:host/v1 messages_get
func hostMessagesGet() uint64

//go:wasmimport terrarium:host/v1 messages_append
func hostMessagesAppend(msgs uint64) uint64

//go:wasmimport terrarium:host/v1 messages_set
func hostMessagesSet(msgs uint64) uint64

//go:wasmimport terrarium:host/v1 artifact_add
func hostArtifactAdd(artifact uint64) uint64

//go:wasmimport terrarium:host/v1 stream
func hostStream(chunk uint64) uint64

//go:wasmimport terrarium:host/v1 config_get
func hostConfigGet(key uint64) uint64

//go:wasmimport terrarium:host/v1 secret_get
func hostSecretGet(name uint64) uint64

//go:wasmimport terrarium:host/v1 http_request
func hostHTTPRequest(req, body uint64) uint64

//go:wasmimport terrarium:host/v1 http_read
func hostHTTPRead(handle, max int64) uint64

//go:wasmimport terrarium:host/v1 http_close
func hostHTTPClose(handle int64) uint64

//go:wasmimport terrarium:host/v1 log
func hostLog(level int64, msg uint64) uint64

// The exports (plugin.ExportDescribe, ...). The names must be literals here; a test checks
// them against the abi constants.

//go:wasmexport terrarium_describe
func exportDescribe() int32 { return serveExport(plugin.ExportDescribe) }

//go:wasmexport terrarium_generate
func exportGenerate() int32 { return serveExport(plugin.ExportGenerate) }

//go:wasmexport terrarium_call_tool
func exportCallTool() int32 { return serveExport(plugin.ExportCallTool) }

//go:wasmexport terrarium_handle
func exportHandle() int32 { return serveExport(plugin.ExportHandle) }

// serveExport serves an export. An input handed over for it (exportInputBuffer) is
// for it alone: one it did not read is dropped, so no later call reads it.
func serveExport(export string) int32 {
	defer func() { handedOver = -1 }()
	return serve(wasmKernel{}, std, export)
}

// exportInputBuffer hands the host inputBuffer, grown to length bytes, to write the
// next export's input into in one copy rather than have the guest read it eight
// bytes per kernel call (ABI.md, section 2). A length beyond a 32-bit memory is
// declined (0): the input is then read through the kernel, as under hosts that never
// call this.
//
//go:wasmexport terrarium_input_buffer
func exportInputBuffer(length int64) int32 {
	handedOver = -1
	if length <= 0 || length > math.MaxInt32 {
		return 0
	}
	growInputBuffer(uint64(length))
	handedOver = length
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(inputBuffer))))
}

// mainMain is the plugin's main function. A -buildmode=c-shared module is a WASI
// reactor: its _initialize runs package initialization but not main, so the SDK runs
// main itself, once, before serving the first call.
//
//go:linkname mainMain main.main
func mainMain()

var mainOnce sync.Once

func init() {
	runMain = func() {
		mainOnce.Do(func() {
			defer func() {
				if p := recover(); p != nil {
					std.fail(fmt.Errorf("main panicked: %v", p))
				}
			}()
			mainMain()
		})
	}
}

func defaultHost() hostCaller { return wasmHost{} }

// wasmKernel is the kernel interface over the Extism kernel's imports.
type wasmKernel struct{}

// inputBuffer is the buffer input reuses from call to call, grown to the largest input
// yet. Keeping it costs no memory a call would not keep anyway: a wasm memory never
// shrinks, and reading into a fresh buffer each call makes the Go runtime allocate,
// clear and collect it. What a call decodes from its input is a copy (strings,
// json.RawMessage), so nothing outlives the call in it.
var inputBuffer []byte

// handedOver is the length of the input the host was handed inputBuffer for
// (exportInputBuffer) and wrote there before the export now running, or -1 if none.
// The export's input takes it, once.
var handedOver int64 = -1

func growInputBuffer(n uint64) {
	if n > uint64(cap(inputBuffer)) {
		inputBuffer = make([]byte, n)
	}
}

func (wasmKernel) input() []byte {
	n := extismInputLength()
	filled := handedOver
	handedOver = -1
	if filled >= 0 && uint64(filled) == n {
		return inputBuffer[:n]
	}
	growInputBuffer(n)
	b := inputBuffer[:n]
	var i uint64
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], extismInputLoadU64(i))
	}
	for ; i < n; i++ {
		b[i] = byte(extismInputLoadU8(i))
	}
	return b
}

func (wasmKernel) setOutput(b []byte) {
	extismOutputSet(writeBlock(b), uint64(len(b)))
}

func (wasmKernel) setError(b []byte) {
	extismErrorSet(writeBlock(b))
}

// writeBlock allocates a block holding b and returns its offset.
func writeBlock(b []byte) uint64 {
	n := uint64(len(b))
	off := extismAlloc(n)
	var i uint64
	for ; i+8 <= n; i += 8 {
		extismStoreU64(off+i, binary.LittleEndian.Uint64(b[i:]))
	}
	for ; i < n; i++ {
		extismStoreU8(off+i, uint32(b[i]))
	}
	return off
}

// readBlock returns a copy of the block at off; offset 0 is no block.
func readBlock(off uint64) []byte {
	if off == 0 {
		return nil
	}
	n := extismLength(off)
	b := make([]byte, n)
	var i uint64
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], extismLoadU64(off+i))
	}
	for ; i < n; i++ {
		b[i] = byte(extismLoadU8(off + i))
	}
	return b
}

// wasmHost calls the imported host functions.
type wasmHost struct{}

func (wasmHost) call(fn string, a hostArgs) []byte {
	// p and blocks are arrays, not slices made per call: an allocation each.
	var p, blocks [len(a.args)]uint64
	for i, arg := range a.args[:a.n] {
		switch {
		case arg.isNum:
			p[i] = uint64(arg.num)
		case len(arg.data) > 0:
			p[i] = writeBlock(arg.data)
			blocks[i] = p[i]
		}
	}
	var res uint64
	switch fn {
	case plugin.FnSessionID:
		res = hostSessionID()
	case plugin.FnStateGet:
		res = hostStateGet()
	case plugin.FnStateSet:
		res = hostStateSet(p[0])
	case plugin.FnMessagesGet:
		res = hostMessagesGet()
	case plugin.FnMessagesAppend:
		res = hostMessagesAppend(p[0])
	case plugin.FnMessagesSet:
		res = hostMessagesSet(p[0])
	case plugin.FnArtifactAdd:
		res = hostArtifactAdd(p[0])
	case plugin.FnStream:
		res = hostStream(p[0])
	case plugin.FnConfigGet:
		res = hostConfigGet(p[0])
	case plugin.FnSecretGet:
		res = hostSecretGet(p[0])
	case plugin.FnHTTPRequest:
		res = hostHTTPRequest(p[0], p[1])
	case plugin.FnHTTPRead:
		res = hostHTTPRead(int64(p[0]), int64(p[1]))
	case plugin.FnHTTPClose:
		res = hostHTTPClose(int64(p[0]))
	case plugin.FnLog:
		res = hostLog(int64(p[0]), p[1])
	default:
		panic("sdk: unknown host function " + fn)
	}
	out := readBlock(res)
	// The result block first: if the host freed an argument block and reused its
	// memory for the result, freeing the argument afterwards frees nothing live.
	if res != 0 {
		extismFree(res)
	}
	for _, b := range blocks {
		if b != 0 {
			extismFree(b)
		}
	}
	return out
}
