package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The Extism kernel (ABI.md, section 1) of the native engine. Each instance has a
// kernel of its own: a small WebAssembly module whose memory holds the instance's
// blocks. What a guest calls for every eight bytes it copies (load_u64, store_u64,
// input_load_u64 and their one-byte forms) is WebAssembly in that module, which the
// guest calls directly, at the cost of a function call, as are the input's offset and
// length; what it calls a few times per call (alloc, free, length, output_set,
// error_set) is Go, and allocates in that memory from the host's side. The host reads
// and writes blocks through api.Memory, in one copy each.
//
// A call reads nothing of an earlier call's: input_load_* read within the input only
// (0 past it, as Extism's kernel does), and what earlier calls' blocks held is zeroed
// before the next call begins (kernel.begin), so a new block reads as zeros.

// kernelGoModule is the module the kernel imports its Go functions from.
const kernelGoModule = "terrarium:kernel"

// kernelGoFuncs are the Go functions of the kernel, each re-exported by the kernel
// module under the same name. Their types index kernelTypes.
var kernelGoFuncs = []struct {
	name string
	typ  byte
	fn   func(k *kernel, stack []uint64)
}{
	{"alloc", typeI64toI64, func(k *kernel, s []uint64) { s[0] = uint64(k.alloc(uint32Of(s[0]))) }},
	{"free", typeI64, func(k *kernel, s []uint64) { k.free(uint32Of(s[0])) }},
	{"length", typeI64toI64, func(k *kernel, s []uint64) { s[0] = uint64(k.blocks[uint32Of(s[0])]) }},
	{"length_unsafe", typeI64toI64, func(k *kernel, s []uint64) { s[0] = uint64(k.blocks[uint32Of(s[0])]) }},
	{"output_set", typeI64I64, func(k *kernel, s []uint64) { k.output, k.outputLen, k.outputSet = uint32Of(s[0]), uint32Of(s[1]), true }},
	{"error_set", typeI64, func(k *kernel, s []uint64) { k.err, k.errSet = uint32Of(s[0]), true }},
	{"reset", typeNone, func(k *kernel, s []uint64) { k.reset() }},
}

// kernelWasmFuncs are the kernel's own functions, in WebAssembly: the loads and stores.
var kernelWasmFuncs = []struct {
	name string
	typ  byte
	code []byte
}{
	// local.get 0, i32.wrap_i64, then the access.
	{"load_u8", typeI64toI32, []byte{0x20, 0, 0xa7, 0x2d, 0, 0}},
	{"load_u64", typeI64toI64, []byte{0x20, 0, 0xa7, 0x29, 3, 0}},
	{"store_u8", typeI64I32, []byte{0x20, 0, 0xa7, 0x20, 1, 0x3a, 0, 0}},
	{"store_u64", typeI64I64, []byte{0x20, 0, 0xa7, 0x20, 1, 0x37, 3, 0}},
	// global.get: the input's offset (global 0), its length (global 1).
	{"input_offset", typeToI64, []byte{0x23, 0}},
	{"input_length", typeToI64, []byte{0x23, 1}},
	// block; 0 unless offset < length (and, for eight bytes, offset+8 <= length,
	// which cannot overflow once offset < length < 4 GiB); else the access at the
	// input's offset plus offset, and return. end; i32.const 0 or i64.const 0.
	{"input_load_u8", typeI64toI32, []byte{0x02, 0x40,
		0x20, 0, 0x23, 1, 0x5a, 0x0d, 0, // local.get 0, global.get 1, i64.ge_u, br_if 0
		0x23, 0, 0x20, 0, 0x7c, 0xa7, 0x2d, 0, 0, 0x0f, // global.get 0, local.get 0, i64.add, i32.wrap_i64, i32.load8_u, return
		0x0b, 0x41, 0}},
	{"input_load_u64", typeI64toI64, []byte{0x02, 0x40,
		0x20, 0, 0x23, 1, 0x5a, 0x0d, 0, // local.get 0, global.get 1, i64.ge_u, br_if 0
		0x20, 0, 0x42, 8, 0x7c, 0x23, 1, 0x56, 0x0d, 0, // local.get 0, i64.const 8, i64.add, global.get 1, i64.gt_u, br_if 0
		0x23, 0, 0x20, 0, 0x7c, 0xa7, 0x29, 3, 0, 0x0f, // global.get 0, local.get 0, i64.add, i32.wrap_i64, i64.load, return
		0x0b, 0x42, 0}},
}

// The function types of the kernel.
const (
	typeI64toI64 = iota // (i64) -> i64
	typeI64             // (i64) -> ()
	typeToI64           // () -> i64
	typeI64I64          // (i64, i64) -> ()
	typeNone            // () -> ()
	typeI64toI32        // (i64) -> i32
	typeI64I32          // (i64, i32) -> ()
)

var kernelTypes = [][]byte{
	{0x60, 1, 0x7e, 1, 0x7e},
	{0x60, 1, 0x7e, 0},
	{0x60, 0, 1, 0x7e},
	{0x60, 2, 0x7e, 0x7e, 0},
	{0x60, 0, 0},
	{0x60, 1, 0x7e, 1, 0x7f},
	{0x60, 2, 0x7e, 0x7f, 0},
}

// The kernel's exported globals: the input block's offset and the input's length.
const (
	kernelInputBase   = "input_base"
	kernelInputLength = "input_size"
)

// kernelWasm assembles the kernel module: it imports the Go functions, re-exports
// them, defines the loads and stores, a memory of one page to start with (growing up
// to the plugin's limit) and the input's offset and length.
func kernelWasm() []byte {
	name := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	section := func(out []byte, id byte, n int, entries []byte) []byte {
		body := append(binary.AppendUvarint(nil, uint64(n)), entries...)
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		return append(out, body...)
	}
	var types, imports, funcs, exports, code []byte
	for _, t := range kernelTypes {
		types = append(types, t...)
	}
	for i, f := range kernelGoFuncs {
		imports = name(imports, kernelGoModule)
		imports = name(imports, f.name)
		imports = append(imports, 0, f.typ)
		exports = name(exports, f.name)
		exports = append(exports, 0, byte(i))
	}
	for i, f := range kernelWasmFuncs {
		funcs = append(funcs, f.typ)
		exports = name(exports, f.name)
		exports = append(exports, 0, byte(len(kernelGoFuncs)+i))
		body := append(append([]byte{0}, f.code...), 0x0b) // no locals, code, end
		code = append(binary.AppendUvarint(code, uint64(len(body))), body...)
	}
	exports = name(exports, "memory")
	exports = append(exports, 2, 0)
	exports = name(exports, kernelInputBase)
	exports = append(exports, 3, 0)
	exports = name(exports, kernelInputLength)
	exports = append(exports, 3, 1)
	nExports := len(kernelGoFuncs) + len(kernelWasmFuncs) + 3

	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	out = section(out, 1, len(kernelTypes), types)
	out = section(out, 2, len(kernelGoFuncs), imports)
	out = section(out, 3, len(kernelWasmFuncs), funcs)
	out = section(out, 5, 1, []byte{0, 1}) // memory: at least one page
	// globals: the input's offset and length, each a mut i64 = 0
	out = section(out, 6, 2, []byte{0x7e, 1, 0x42, 0, 0x0b, 0x7e, 1, 0x42, 0, 0x0b})
	out = section(out, 7, nExports, exports)
	return section(out, 10, len(kernelWasmFuncs), code)
}

// instantiateKernelGo registers the kernel's Go functions in rt. Each finds its
// instance's kernel in the context of the call (instanceOf).
func instantiateKernelGo(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(kernelGoModule)
	for _, f := range kernelGoFuncs {
		t := kernelTypes[f.typ]
		var params, results []api.ValueType
		for _, v := range t[2 : 2+t[1]] {
			params = append(params, api.ValueType(v))
		}
		for _, v := range t[3+t[1]:] {
			results = append(results, api.ValueType(v))
		}
		fn := f.fn
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
			fn(&instanceOf(ctx).kernel, stack)
		}), params, results).Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// uint32Of narrows an offset or a length from the ABI's i64 to the kernel memory's
// 32 bits, saturating: a value beyond 4 GiB is beyond any block and fails as such.
func uint32Of(v uint64) uint32 {
	if v > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(v)
}

// kernelReserved is the start of the kernel memory that no block uses: a block's
// offset is never 0, which hosts and guests take for "no block".
const kernelReserved = 16

// minClass is the smallest block's size class: blocks are rounded up to a power of
// two, at least 1<<minClass bytes, so that a freed block serves any later one of its
// class.
const minClass = 4

// errBlocksExhausted is the error of an allocation the plugin's memory cannot hold.
var errBlocksExhausted = errors.New("the plugin's blocks exceed its memory")

// kernel is an instance's Extism kernel state: its blocks (all freed when a call
// begins), the call's input, output and error. It is used by one call at a time.
type kernel struct {
	mem         api.Memory
	inputBase   api.MutableGlobal
	inputLength api.MutableGlobal

	blocks map[uint32]uint32       // offset -> length of the live blocks
	freed  [33 - minClass][]uint32 // offsets of freed blocks, by size class
	top    uint32                  // where the next new block goes
	// dirty is the end of the blocks allocated since the memory was last zeroed: the
	// next call's begin zeroes what of [kernelReserved, dirty) its input does not
	// overwrite, whatever the calls since wrote in their blocks, and no more (the
	// memory may be far larger, a large block's size class twice its length).
	dirty uint32

	input             uint32
	output, outputLen uint32
	outputSet         bool
	err               uint32
	errSet            bool
}

func newKernel(mod api.Module) kernel {
	return kernel{
		mem:         mod.Memory(),
		inputBase:   mod.ExportedGlobal(kernelInputBase).(api.MutableGlobal),
		inputLength: mod.ExportedGlobal(kernelInputLength).(api.MutableGlobal),
		blocks:      map[uint32]uint32{},
		top:         kernelReserved,
		dirty:       kernelReserved,
	}
}

func classOf(n uint32) int {
	if n <= 1<<minClass {
		return 0
	}
	return bits.Len32(n-1) - minClass
}

// alloc returns the offset of a new block of n bytes, or 0 for n == 0. A block the
// memory cannot hold, even grown to the plugin's limit, traps the guest.
func (k *kernel) alloc(n uint32) uint32 {
	off, err := k.allocate(n)
	if err != nil {
		panic(err) // a trap: the guest cannot go on without its block
	}
	return off
}

func (k *kernel) allocate(n uint32) (uint32, error) {
	if n == 0 {
		return 0, nil
	}
	c := classOf(n)
	var off uint32
	if freed := k.freed[c]; len(freed) > 0 {
		off = freed[len(freed)-1]
		k.freed[c] = freed[:len(freed)-1]
	} else {
		size := uint64(1) << (c + minClass)
		end := uint64(k.top) + size
		if have := uint64(k.mem.Size()); end > have {
			pages := (end - have + 65535) / 65536
			if end > 1<<32 || pages > 1<<16 {
				return 0, fmt.Errorf("%w: a block of %d bytes", errBlocksExhausted, n)
			}
			if _, ok := k.mem.Grow(uint32(pages)); !ok {
				return 0, fmt.Errorf("%w: a block of %d bytes", errBlocksExhausted, n)
			}
		}
		off = k.top
		k.top = uint32(end)
	}
	k.blocks[off] = n
	k.dirty = max(k.dirty, off+n)
	return off, nil
}

// free releases a block; an offset that is not a live block is ignored, as Extism's
// kernel does. Freeing the input leaves an input of no bytes, as there too: its block
// may go to another allocation.
func (k *kernel) free(off uint32) {
	n, ok := k.blocks[off]
	if !ok {
		return
	}
	if off == k.input {
		k.inputLength.Set(0)
	}
	delete(k.blocks, off)
	c := classOf(n)
	k.freed[c] = append(k.freed[c], off)
}

// reset frees every block, the input's included, as Extism's reset does.
func (k *kernel) reset() {
	clear(k.blocks)
	for c := range k.freed {
		k.freed[c] = k.freed[c][:0]
	}
	k.top = kernelReserved
	k.input = 0
	k.inputBase.Set(0)
	k.inputLength.Set(0)
}

// begin prepares a call: every block freed and what they held zeroed, the input in a
// block of its own.
func (k *kernel) begin(input []byte) error {
	k.reset()
	k.outputSet, k.errSet = false, false
	used := k.dirty
	n := uint32Of(uint64(len(input)))
	off, err := k.allocate(n)
	if err != nil {
		return fmt.Errorf("the input of %d bytes: %w", len(input), err)
	}
	k.mem.Write(off, input)
	// Zero what the calls before wrote in their blocks, but what the input has just
	// overwritten: the first block after reset, it is at kernelReserved.
	from := max(off+n, kernelReserved)
	if used > from {
		b, _ := k.mem.Read(from, used-from) // within the memory: blocks were there
		clear(b)
	}
	k.dirty = from
	k.input = off
	k.inputBase.Set(uint64(off))
	k.inputLength.Set(uint64(len(input)))
	return nil
}

// Read implements engine.HostCall: a copy of the block at off.
func (k *kernel) Read(off uint64) ([]byte, error) {
	n, ok := k.blocks[uint32Of(off)]
	if !ok {
		return nil, fmt.Errorf("no block at offset %d", off)
	}
	b, _ := k.mem.Read(uint32(off), n) // a live block is within the memory
	return append([]byte(nil), b...), nil
}

// write puts data in a new block and returns its offset (0 for no data).
func (k *kernel) write(data []byte) (uint64, error) {
	off, err := k.allocate(uint32Of(uint64(len(data))))
	if err != nil {
		return 0, err
	}
	k.mem.Write(off, data)
	return uint64(off), nil
}

// view returns the bytes of [off, off+n) of the kernel memory, or false if they are
// beyond it. The slice is the memory's own: copy what must outlive the call.
func (k *kernel) view(off, n uint32) ([]byte, bool) { return k.mem.Read(off, n) }

// scrub zeroes the kernel's memory, so that nothing of a call survives in it (an
// instance reset between sessions). All of it, not only the blocks: the guest's
// stores reach any offset.
func (k *kernel) scrub() {
	zeroPages(memoryOf(k.mem))
	k.dirty = kernelReserved
}

// memoryOf returns the whole of a memory, as the memory's own bytes.
func memoryOf(m api.Memory) []byte {
	b, _ := m.Read(0, m.Size())
	return b
}
