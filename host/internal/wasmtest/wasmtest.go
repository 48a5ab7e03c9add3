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
	section := func(id byte, body []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	name := func(b []byte, s string) []byte {
		return append(binary.AppendUvarint(b, uint64(len(s))), s...)
	}
	section(1, []byte{1, 0x60, 0, 1, 0x7f}) // one type: () -> i32
	imp := binary.AppendUvarint(nil, uint64(len(imports)))
	for _, i := range imports {
		mod, fn, _ := strings.Cut(i, ".")
		imp = name(name(imp, mod), fn)
		imp = append(imp, 0, 0) // a function of type 0
	}
	section(2, imp)
	fns := binary.AppendUvarint(nil, uint64(len(exports)))
	for range exports {
		fns = append(fns, 0)
	}
	section(3, fns)
	exp := binary.AppendUvarint(nil, uint64(len(exports)))
	for i, e := range exports {
		exp = append(name(exp, e), 0)
		exp = binary.AppendUvarint(exp, uint64(len(imports)+i))
	}
	section(7, exp)
	code := binary.AppendUvarint(nil, uint64(len(exports)))
	for range exports {
		code = append(code, 4, 0, 0x41, 0, 0x0b) // no locals; i32.const 0; end
	}
	section(10, code)
	return out
}
