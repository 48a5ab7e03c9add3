package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// kernelModule is the import module of the Extism kernel.
const kernelModule = "extism:host/env"

// kernelFuncs are the Extism kernel functions a plugin may import (ABI.md, section 1).
// The kernel has more (http_request, config_get, var_get, log_info...): Terrarium
// serves those needs through terrarium:host/v1, under the manifest's grants, and
// refuses a module importing them rather than let them fail or answer nothing at run
// time.
var kernelFuncs = []string{
	"input_length", "input_load_u8", "input_load_u64", "alloc", "free", "length",
	"length_unsafe", "load_u8", "load_u64", "store_u8", "store_u64", "output_set",
	"error_set",
}

// ErrNotAPlugin is wrapped by the error of a module that cannot be a Terrarium
// plugin whatever it says: a command module, one importing kernel functions the host
// refuses, one not exporting terrarium_describe. CheckModule says which.
var ErrNotAPlugin = errors.New("not a Terrarium plugin")

// CheckModule checks a module's interface, from its binary and without running it:
// it must be a reactor (no _start: a command module runs its main and exits when
// instantiated), export terrarium_describe, and import no Extism kernel function
// outside ABI.md's list. It is what Load checks first and `terrarium plugin build`
// checks after building; its error says how to fix what is wrong.
func CheckModule(wasm []byte) error {
	imports, exports, err := moduleInterface(wasm)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotAPlugin, err)
	}
	var problems []string
	if slices.Contains(exports, "_start") {
		problems = append(problems, "it is a command module (it exports _start), which runs its main and exits when instantiated: "+
			"build a reactor (Go: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared, as terrarium plugin build does; "+
			"Rust: --crate-type cdylib; C: -Wl,--no-entry without a main)")
	}
	if !slices.Contains(exports, plugin.ExportDescribe) {
		problems = append(problems, "it does not export "+plugin.ExportDescribe)
	}
	var refused []string
	for _, imp := range imports {
		if name, ok := strings.CutPrefix(imp, kernelModule+"."); ok && !slices.Contains(kernelFuncs, name) {
			refused = append(refused, name)
		}
	}
	if len(refused) > 0 {
		problems = append(problems, fmt.Sprintf("it imports Extism kernel functions Terrarium does not provide (%s): "+
			"use terrarium:host/v1 instead (http_request, config_get, log; ABI.md, section 3)", strings.Join(refused, ", ")))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrNotAPlugin, strings.Join(problems, "; "))
	}
	return nil
}

// moduleInterface reads the functions a WebAssembly module imports ("module.name")
// and the names it exports, from its import and export sections alone: cheaper than
// compiling, which Load does after the checks pass.
func moduleInterface(wasm []byte) (imports, exports []string, err error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, nil, errors.New("not a WebAssembly module (version 1)")
	}
	r := &wasmReader{b: wasm[8:]}
	for len(r.b) > 0 {
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)) {
			return nil, nil, errors.New("a section runs past the end of the module")
		}
		sec := &wasmReader{b: r.b[:size]}
		r.b = r.b[size:]
		switch id {
		case 2: // imports
			for n := sec.u32(); n > 0 && sec.err == nil; n-- {
				mod, name, kind := sec.name(), sec.name(), sec.byte()
				switch kind {
				case 0: // a function: its type index
					sec.u32()
					imports = append(imports, mod+"."+name)
				case 1: // a table: its element type, then limits
					sec.byte()
					sec.limits()
				case 2: // a memory
					sec.limits()
				case 3: // a global: its type and mutability
					sec.byte()
					sec.byte()
				case 4: // a tag (exception handling): attribute and type index
					sec.byte()
					sec.u32()
				default:
					return nil, nil, fmt.Errorf("unknown import kind %d", kind)
				}
			}
		case 7: // exports
			for n := sec.u32(); n > 0 && sec.err == nil; n-- {
				name := sec.name()
				sec.byte()
				sec.u32()
				exports = append(exports, name)
			}
		}
		if sec.err != nil {
			return nil, nil, fmt.Errorf("section %d: %w", id, sec.err)
		}
	}
	return imports, exports, r.err
}

// wasmReader reads the binary format's values; the first error sticks.
type wasmReader struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

func (r *wasmReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errTruncated
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// u64 reads an unsigned LEB128 number.
func (r *wasmReader) u64() uint64 {
	v, n := binary.Uvarint(r.b)
	if r.err != nil || n <= 0 {
		r.err = errTruncated
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wasmReader) u32() uint32 {
	v := r.u64()
	if v > 1<<32-1 {
		r.err = errors.New("a 32-bit number out of range")
	}
	return uint32(v)
}

func (r *wasmReader) name() string {
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.err = errTruncated
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// limits reads a table's or a memory's limits: flags (bit 0: a maximum follows), then
// the minimum and the maximum.
func (r *wasmReader) limits() {
	flags := r.byte()
	r.u64()
	if flags&1 != 0 {
		r.u64()
	}
}
