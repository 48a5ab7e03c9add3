// Package wasmtest writes tiny WebAssembly modules for tests: what a toolchain would
// make, shaped to show one mistake.
package wasmtest

import (
	"encoding/binary"
	"strings"
)

// Module returns a module importing the functions imports ("module.name") and
// exporting exports, every function of type () -> i32; each export is a function
// returning 0.
func Module(imports, exports []string) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = section(out, 1, []byte{1, 0x60, 0, 1, 0x7f}) // one type: () -> i32
	imp := binary.AppendUvarint(nil, uint64(len(imports)))
	for _, i := range imports {
		mod, fn, _ := strings.Cut(i, ".")
		imp = name(name(imp, mod), fn)
		imp = append(imp, 0, 0) // a function of type 0
	}
	out = section(out, 2, imp)
	fns := binary.AppendUvarint(nil, uint64(len(exports)))
	for range exports {
		fns = append(fns, 0)
	}
	out = section(out, 3, fns)
	exp := binary.AppendUvarint(nil, uint64(len(exports)))
	for i, e := range exports {
		exp = append(name(exp, e), 0)
		exp = binary.AppendUvarint(exp, uint64(len(imports)+i))
	}
	out = section(out, 7, exp)
	code := binary.AppendUvarint(nil, uint64(len(exports)))
	for range exports {
		code = append(code, 4, 0, 0x41, 0, 0x0b) // no locals; i32.const 0; end
	}
	return section(out, 10, code)
}

// Memory is what a module does about its linear memory.
type Memory int

// The memories a toolchain may give a module.
const (
	MemoryExported Memory = iota // defined and exported as "memory", as Go, Rust and clang do
	MemoryHidden                 // defined, not exported
	MemoryNone                   // no memory at all (a module keeping nothing but kernel blocks)
	MemoryImported               // imported from env.memory, as wasm-ld --import-memory links it
)

// Describer returns the smallest plugin there is: terrarium_describe copies descriptor
// into a kernel block a byte at a time, sets it as the output and returns 0. Its only
// imports are the kernel's alloc, store_u8 and output_set.
func Describer(descriptor string, mem Memory) []byte {
	types := []byte{4,
		0x60, 1, 0x7e, 1, 0x7e, // 0: alloc (i64) -> i64
		0x60, 2, 0x7e, 0x7f, 0, // 1: store_u8 (i64, i32)
		0x60, 2, 0x7e, 0x7e, 0, // 2: output_set (i64, i64)
		0x60, 0, 1, 0x7f, // 3: an export () -> i32
	}
	kernel := []string{"alloc", "store_u8", "output_set"}
	n := len(kernel)
	if mem == MemoryImported {
		n++
	}
	imports := binary.AppendUvarint(nil, uint64(n))
	for i, f := range kernel {
		imports = append(name(name(imports, "extism:host/env"), f), 0, byte(i))
	}
	if mem == MemoryImported {
		imports = append(name(name(imports, "env"), "memory"), 2, 0, 1) // at least one page
	}
	// One i64 local, the block: local.set 0 (alloc n); store_u8 each byte; output_set.
	body := sleb(append([]byte{1, 1, 0x7e}, 0x42), int64(len(descriptor)))
	body = append(body, 0x10, 0, 0x21, 0)
	for i, c := range []byte(descriptor) {
		body = sleb(append(body, 0x20, 0, 0x42), int64(i))
		body = sleb(append(body, 0x7c, 0x41), int64(c))
		body = append(body, 0x10, 1)
	}
	body = sleb(append(body, 0x20, 0, 0x42), int64(len(descriptor)))
	body = append(body, 0x10, 2, 0x41, 0, 0x0b)
	exports := append(name([]byte{1}, "terrarium_describe"), 0, 3)
	if mem == MemoryExported {
		exports = append(name([]byte{2}, "memory"), 2, 0)
		exports = append(name(exports, "terrarium_describe"), 0, 3)
	}

	out := []byte("\x00asm\x01\x00\x00\x00")
	out = section(out, 1, types)
	out = section(out, 2, imports)
	out = section(out, 3, []byte{1, 3})
	if mem == MemoryExported || mem == MemoryHidden {
		out = section(out, 5, []byte{1, 0, 1}) // one memory of at least one page
	}
	out = section(out, 7, exports)
	return section(out, 10, append(binary.AppendUvarint([]byte{1}, uint64(len(body))), body...))
}

func section(out []byte, id byte, body []byte) []byte {
	out = binary.AppendUvarint(append(out, id), uint64(len(body)))
	return append(out, body...)
}

func name(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// sleb appends v in signed LEB128, as i32.const and i64.const take it.
func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// InputBuffer returns a module of one page of memory (exported) whose
// terrarium_input_buffer, of type (i64) -> i32, runs body, which must leave an i32 on
// the stack, and whose terrarium_call_tool returns 0.
func InputBuffer(body ...byte) []byte {
	var exports []byte
	exports = name(append(exports, 3), "terrarium_input_buffer")
	exports = append(exports, 0, 0)
	exports = name(exports, "terrarium_call_tool")
	exports = append(exports, 0, 1)
	exports = name(exports, "memory")
	exports = append(exports, 2, 0)
	f0 := append(append([]byte{0}, body...), 0x0b) // no locals, body, end
	f1 := []byte{0, 0x41, 0, 0x0b}                 // i32.const 0, end
	code := append(binary.AppendUvarint([]byte{2}, uint64(len(f0))), f0...)
	code = append(binary.AppendUvarint(code, uint64(len(f1))), f1...)

	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	out = section(out, 1, []byte{2, 0x60, 1, 0x7e, 1, 0x7f, 0x60, 0, 1, 0x7f}) // (i64) -> i32, () -> i32
	out = section(out, 3, []byte{2, 0, 1})
	out = section(out, 5, []byte{1, 0, 1}) // one memory of at least one page
	out = section(out, 7, exports)
	return section(out, 10, code)
}

// I32Const is the instruction i32.const v.
func I32Const(v int32) []byte { return sleb([]byte{0x41}, int64(v)) }
