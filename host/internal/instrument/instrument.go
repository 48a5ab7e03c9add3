// Package instrument rewrites a WebAssembly module so that the host can stop it and
// restore it cheaply, without wazero's close-on-context-done checks (an exit to Go at
// every loop header and call, which doubles a guest's time).
//
// The rewritten module has:
//
//   - a countdown, a new mutable i32 global, decremented at the header of every loop
//     and at the start of every function that may call another before its first loop
//     header (a load, a subtraction, a store and a branch, compiled inline): every
//     YieldEvery passes it calls the function it imports as YieldModule.YieldName,
//     which the host implements in Go. wazero's compiled code cannot be preempted by
//     Go's scheduler, so without these calls a guest looping without calling the host
//     would hold its thread from every garbage collection's stop-the-world, and the
//     whole process with it;
//   - a stop global, another new one, exported as StopExport and read after each call
//     of yield: when the host has set it to a non-zero value, the guest traps
//     (unreachable), at most YieldEvery checks (loop iterations, function calls) after
//     it was set. Reading it at every pass instead costs a load and a branch more
//     there; BENCHMARKS.md has the difference;
//   - no start section: the start function is exported as StartExport instead, so the
//     host runs it after instantiation, when the stop global can already be set (a
//     start function that loops would otherwise hold the instantiation);
//   - every mutable global it defines exported (GlobalExports), so that its state can
//     be saved and restored along with its memory;
//   - where it can (see Data), empty data segments: the memory's initial contents are
//     handed back apart (Result.Data), for the host to share between instances.
//
// The new import comes after the module's own, so the module's functions are numbered
// one higher (calls, references, elements, exports and names follow); global and type
// indices stay as they were (the new ones come after the module's own), custom
// sections are kept.
package instrument

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Export names the rewritten module adds. A colon keeps them out of any language's
// identifiers, so no toolchain exports them of its own accord.
const (
	// StopExport is the stop global.
	StopExport = "terrarium:stop"
	// StartExport is the former start function.
	StartExport = "terrarium:start"
	// GlobalPrefix begins the export names of the module's mutable globals, followed
	// by the global's index.
	GlobalPrefix = "terrarium:global:"
)

// The function the rewritten module imports, of type () -> (), and how often it calls
// it: once every YieldEvery checks (loop headers, and the function entries that need
// one). A call costs an exit to Go (tens of nanoseconds); a pass between two checks is
// at least a few instructions, so the guest loses well under a tenth of its time, and a
// collection waits for it a few microseconds.
const (
	YieldModule = "terrarium"
	YieldName   = "yield"
	YieldEvery  = 1000
)

// Version names what Rewrite writes; it changes whenever that does, so that rewrites
// kept on disk by an earlier version are not taken for this one's.
const Version = "7"

// ErrInvalid is wrapped by the errors of modules the rewriter cannot read: not
// WebAssembly, truncated, or using an instruction or type outside what the host
// supports (WebAssembly 2.0: MVP, bulk memory, reference types, multi-value, SIMD,
// sign extension, non-trapping conversions).
var ErrInvalid = errors.New("invalid or unsupported WebAssembly module")

// Result is a rewritten module.
type Result struct {
	// Wasm is the rewritten module.
	Wasm []byte
	// HasStart reports whether the module had a start function, now exported as
	// StartExport.
	HasStart bool
	// GlobalExports names the exports of the module's own mutable globals, in index
	// order.
	GlobalExports []string
	// Data is what Data returns for the module: the initial contents of its memory,
	// which its rewritten data segments no longer carry, or nil if they still do. The
	// host must write it to every instance's memory before the instance runs.
	Data []byte
}

// Section ids (WebAssembly core specification, 5.5.2).
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secMemory   = 5
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElement  = 9
	secCode     = 10
	secData     = 11
	externGlob  = 3
	externFunc  = 0
	opEnd       = 0x0b
	opI32Const  = 0x41
	opLoop      = 0x03
	opCall      = 0x10
	opRefFunc   = 0xd2
	opGlobalGet = 0x23
	opGlobalSet = 0x24
)

// Rewrite instruments a module. It reads only what it must (types, imports, globals,
// exports, start, elements, code, names) and copies every other section as it is;
// wazero validates the result when it compiles it.
func Rewrite(wasm []byte) (*Result, error) {
	sections, err := readSections(wasm)
	if err != nil {
		return nil, err
	}
	data, err := image(sections)
	if err != nil {
		return nil, err
	}

	var types, importedFuncs, importedGlobals, definedGlobals uint32
	var mutable []uint32 // indices of the module's own mutable globals
	var exportNames []string
	var start = -1
	for _, s := range sections {
		var err error
		switch s.id {
		case secType:
			r := reader{b: s.body}
			types = r.u32()
			err = r.err
		case secImport:
			importedFuncs, importedGlobals, err = countImports(s.body)
		case secGlobal:
			definedGlobals, mutable, err = readGlobals(s.body)
		case secExport:
			exportNames, err = readExportNames(s.body)
		case secStart:
			r := reader{b: s.body}
			start = int(r.u32())
			err = r.err
		}
		if err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", ErrInvalid, s.id, err)
		}
	}
	stop := importedGlobals + definedGlobals
	countdown := stop + 1
	for i := range mutable {
		mutable[i] += importedGlobals
	}
	fn := renumber(importedFuncs) // yield takes the index after the imported functions

	res := &Result{HasStart: start >= 0, Data: data}
	var exports []byte // the entries to add to the export section
	addExport := func(name string, kind byte, index uint32) error {
		if slices.Contains(exportNames, name) {
			return fmt.Errorf("%w: the module already exports %q", ErrInvalid, name)
		}
		exports = appendName(exports, name)
		exports = append(exports, kind)
		exports = binary.AppendUvarint(exports, uint64(index))
		return nil
	}
	added := uint32(1)
	if err := addExport(StopExport, externGlob, stop); err != nil {
		return nil, err
	}
	if start >= 0 {
		added++
		if err := addExport(StartExport, externFunc, fn.at(uint32(start))); err != nil {
			return nil, err
		}
	}
	for _, g := range mutable {
		name := fmt.Sprintf("%s%d", GlobalPrefix, g)
		res.GlobalExports = append(res.GlobalExports, name)
		added++
		if err := addExport(name, externGlob, g); err != nil {
			return nil, err
		}
	}
	check := checks(stop, countdown, importedFuncs)

	// The new type () -> (), the import of yield, and the new globals: the stop
	// global, (mut i32) 0, and the countdown, (mut i32) YieldEvery.
	newType := []byte{0x60, 0, 0}
	newImport := appendName(appendName(nil, YieldModule), YieldName)
	newImport = binary.AppendUvarint(append(newImport, externFunc), uint64(types))
	newGlobals := append([]byte{0x7f, 0x01, 0x41, 0x00, opEnd, 0x7f, 0x01, 0x41}, sleb(YieldEvery)...)
	newGlobals = append(newGlobals, opEnd)

	out := make([]byte, 0, len(wasm)+len(wasm)/16)
	out = append(out, wasm[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	// The sections the rewrite adds to, and what each is if the module lacks it.
	missing := []section{
		{secType, appendVec(nil, 1, newType)},
		{secImport, appendVec(nil, 1, newImport)},
		{secGlobal, appendVec(nil, 2, newGlobals)},
		{secExport, appendVec(nil, added, exports)},
	}
	wrote := func(id byte) {
		missing = slices.DeleteFunc(missing, func(s section) bool { return s.id == id })
	}
	for _, s := range sections {
		// A section the module lacks is written where it would have come: before the
		// first section that follows it in the specification's order.
		if s.id != secCustom {
			for len(missing) > 0 && sectionOrder[s.id] > sectionOrder[missing[0].id] {
				emit(missing[0].id, missing[0].body)
				missing = missing[1:]
			}
		}
		var body []byte
		var err error
		switch s.id {
		case secType:
			body, err = extendVec(s.body, 1, newType)
		case secImport:
			body, err = extendVec(s.body, 1, newImport)
		case secGlobal:
			body, err = rewriteGlobals(s.body, fn, newGlobals)
		case secExport:
			if body, err = rewriteExports(s.body, fn); err == nil {
				body, err = extendVec(body, added, exports)
			}
		case secStart:
			continue // exported instead (StartExport)
		case secElement:
			body, err = rewriteElements(s.body, fn)
		case secData:
			if body = s.body; data != nil {
				body, err = emptySegments(s.body)
			}
		case secCode:
			out = append(out, secCode)
			if out, err = sized(out, func(out []byte) ([]byte, error) { return rewriteCode(out, s.body, check, fn) }); err != nil {
				return nil, fmt.Errorf("%w: code: %w", ErrInvalid, err)
			}
			continue
		case secCustom:
			if body = rewriteCustom(s.body, fn); body == nil {
				continue
			}
		default:
			body = s.body
		}
		if err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", ErrInvalid, s.id, err)
		}
		emit(s.id, body)
		wrote(s.id)
	}
	for _, s := range missing {
		emit(s.id, s.body)
	}
	res.Wasm = out
	return res, nil
}

// section is one section of a module, its id and its content.
type section struct {
	id   byte
	body []byte
}

// readSections splits a module into its sections.
func readSections(wasm []byte) ([]section, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:8], []byte{0, 'a', 's', 'm', 1, 0, 0, 0}) {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0 binary", ErrInvalid)
	}
	var sections []section
	for r := (reader{b: wasm, pos: 8}); r.pos < len(r.b); {
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", ErrInvalid, id, r.err)
		}
		sections = append(sections, section{id, body})
	}
	return sections, nil
}

// Data returns the initial contents of a module's memory, from address 0 to the end of
// its last data segment, if Rewrite takes them out of the module's data segments: when
// the module defines its memory (rather than importing it) and its every data segment
// is active, at a constant offset, and within the memory's initial size. Otherwise, or
// for a module without data, it returns nil. A Go module's data (read-only mostly:
// strings, type data, function tables) is megabytes, which wazero would copy into the
// memory of every instance; the host maps it instead, shared until written.
//
// Rewrite keeps the segments, each empty, at offset 0: their number and indices stay
// valid, and an empty active segment behaves as any active segment does once the
// module is instantiated, as one dropped.
func Data(wasm []byte) ([]byte, error) {
	sections, err := readSections(wasm)
	if err != nil {
		return nil, err
	}
	return image(sections)
}

// segment is an active data segment at a constant offset.
type segment struct {
	offset uint32
	init   []byte
}

// image lays out the data segments of a module as Data describes, or returns nil.
func image(sections []section) ([]byte, error) {
	var memorySize uint64
	var segments []segment
	for _, s := range sections {
		var err error
		switch s.id {
		case secMemory:
			r := reader{b: s.body}
			if r.u32() == 1 {
				r.byte()
				memorySize = uint64(r.u32()) * 65536
			}
			err = r.err
		case secData:
			var ok bool
			if segments, ok, err = readSegments(s.body); !ok {
				return nil, err
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", ErrInvalid, s.id, err)
		}
	}
	var end uint64
	for _, seg := range segments {
		end = max(end, uint64(seg.offset)+uint64(len(seg.init)))
	}
	// An imported memory is not the module's to fill.
	if end == 0 || end > memorySize || importsMemory(sections) {
		return nil, nil
	}
	data := make([]byte, end)
	for _, seg := range segments {
		copy(data[seg.offset:], seg.init)
	}
	return data, nil
}

// importsMemory reports whether a module imports a memory.
func importsMemory(sections []section) bool {
	imports := false
	for _, s := range sections {
		if s.id == secImport {
			// A malformed import section fails the rewrite elsewhere.
			_ = importKinds(s.body, func(_, _ string, kind byte) { imports = imports || kind == 0x02 })
		}
	}
	return imports
}

// readSegments reads the data section. It returns false, and no error, if a segment
// is passive, or active at an offset other than a constant: such a module keeps its
// segments.
func readSegments(body []byte) ([]segment, bool, error) {
	r := reader{b: body}
	n := r.u32()
	segments := make([]segment, 0, min(n, uint32(len(body))))
	for ; n > 0 && r.err == nil; n-- {
		switch flags := r.u32(); {
		case flags == 2 && r.u32() == 0: // active, memory 0, spelled out
		case flags != 0:
			return nil, false, r.err
		}
		if r.byte() != opI32Const {
			return nil, false, r.err
		}
		offset := r.s32()
		if r.byte() != opEnd {
			return nil, false, r.err
		}
		init := r.bytes(int(r.u32()))
		segments = append(segments, segment{uint32(offset), init})
	}
	return segments, r.err == nil, r.err
}

// emptySegments returns a data section of as many segments as body has, each active,
// at offset 0, and empty.
func emptySegments(body []byte) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	empty := []byte{0, opI32Const, 0, opEnd, 0} // flags 0, i32.const 0, end, no bytes
	return appendVec(nil, n, bytes.Repeat(empty, int(n))), nil
}

// Describe reads back the Result of a module Rewrite returned earlier (kept on disk, say),
// from its exports.
func Describe(wasm []byte) (*Result, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:8], []byte{0, 'a', 's', 'm', 1, 0, 0, 0}) {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0 binary", ErrInvalid)
	}
	res := &Result{Wasm: wasm}
	stopped, yields := false, false
	for r := (reader{b: wasm, pos: 8}); r.pos < len(r.b); {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", ErrInvalid, id, r.err)
		}
		if id == secImport {
			err := importKinds(body, func(module, name string, kind byte) {
				yields = yields || kind == externFunc && module == YieldModule && name == YieldName
			})
			if err != nil {
				return nil, fmt.Errorf("%w: imports: %w", ErrInvalid, err)
			}
		}
		if id != secExport {
			continue
		}
		names, err := readExportNames(body)
		if err != nil {
			return nil, fmt.Errorf("%w: exports: %w", ErrInvalid, err)
		}
		for _, name := range names {
			switch {
			case name == StopExport:
				stopped = true
			case name == StartExport:
				res.HasStart = true
			case strings.HasPrefix(name, GlobalPrefix):
				res.GlobalExports = append(res.GlobalExports, name)
			}
		}
	}
	if !stopped || !yields {
		// A module rewritten before yield existed is refused too.
		return nil, fmt.Errorf("%w: not a module Rewrite returned (no %s, or no import of %s.%s)", ErrInvalid, StopExport, YieldModule, YieldName)
	}
	return res, nil
}

// An Import is one import of a module: what it names and what kind of thing it is.
type Import struct {
	Module, Name string
	Kind         Kind
}

// String returns the import as "module.name".
func (i Import) String() string { return i.Module + "." + i.Name }

// Kind is the kind of an import (WebAssembly core specification, 5.5.5).
type Kind byte

// The kinds of import a module can declare.
const (
	KindFunc   Kind = externFunc
	KindTable  Kind = 1
	KindMemory Kind = 2
	KindGlobal Kind = externGlob
)

// String names the kind as the specification does.
func (k Kind) String() string {
	switch k {
	case KindFunc:
		return "function"
	case KindTable:
		return "table"
	case KindMemory:
		return "memory"
	case KindGlobal:
		return "global"
	}
	return fmt.Sprintf("kind %#x", byte(k))
}

// Interface lists what a module imports, of every kind, and the functions it
// exports, in the order it declares them. It reads those two sections only: a module
// it accepts may still fail to compile.
func Interface(wasm []byte) (imports []Import, exports []string, err error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:8], []byte{0, 'a', 's', 'm', 1, 0, 0, 0}) {
		return nil, nil, fmt.Errorf("%w: not a WebAssembly 1.0 binary", ErrInvalid)
	}
	for r := (reader{b: wasm, pos: 8}); r.pos < len(r.b); {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, nil, fmt.Errorf("%w: section %d: %w", ErrInvalid, id, r.err)
		}
		switch id {
		case secImport:
			err = importKinds(body, func(module, name string, kind byte) {
				imports = append(imports, Import{module, name, Kind(kind)})
			})
		case secExport:
			exports, err = readExports(body, externFunc, exports)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: section %d: %w", ErrInvalid, id, err)
		}
	}
	return imports, exports, nil
}

// sectionOrder is the place of each known section in a module: type, import, function,
// table, memory, tag, global, export, start, element, data count, code, data.
var sectionOrder = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// checks is the code run at every loop header and at the function entries that need
// one: count down, and at zero start again, call yield and, if the stop global is set,
// trap. Checking the stop global only there, rather than at every check, leaves each
// check a load, a subtraction, a store and a branch; a guest runs at most YieldEvery
// checks past its stop.
func checks(stop, countdown, yield uint32) []byte {
	get := func(b []byte, g uint32) []byte { return binary.AppendUvarint(append(b, opGlobalGet), uint64(g)) }
	set := func(b []byte, g uint32) []byte { return binary.AppendUvarint(append(b, opGlobalSet), uint64(g)) }
	b := get(nil, countdown)
	b = append(b, 0x04, 0x40) // if (empty): countdown - 1
	b = get(b, countdown)
	b = append(b, 0x41, 0x01, 0x6b) // i32.const 1, i32.sub
	b = set(b, countdown)
	b = append(b, 0x05, 0x41) // else: YieldEvery, yield, and the stop check
	b = append(b, sleb(YieldEvery)...)
	b = set(b, countdown)
	b = binary.AppendUvarint(append(b, opCall), uint64(yield))
	b = get(b, stop)
	b = append(b, 0x04, 0x40, 0x00, opEnd) // if (empty) unreachable end
	return append(b, opEnd)
}

// sleb encodes a positive int32 in signed LEB128, as i32.const takes it.
func sleb(v int32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// renumber maps the module's function indices to the rewritten module's: those of
// its own functions, after the imported ones, move up one for the new import.
type renumber uint32

func (imported renumber) at(i uint32) uint32 {
	if i >= uint32(imported) {
		return i + 1
	}
	return i
}

func appendName(b []byte, name string) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	return append(b, name...)
}

// appendVec appends a vector of n entries already encoded in entries.
func appendVec(b []byte, n uint32, entries []byte) []byte {
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, entries...)
}

// extendVec adds n encoded entries at the end of the vector vec.
func extendVec(vec []byte, n uint32, entries []byte) ([]byte, error) {
	r := reader{b: vec}
	count := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out := appendVec(make([]byte, 0, len(vec)+len(entries)+5), count+n, vec[r.pos:])
	return append(out, entries...), nil
}

// importKinds reads the import section, calling each for every import.
func importKinds(body []byte, each func(module, name string, kind byte)) error {
	r := reader{b: body}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		module, name := r.name(), r.name()
		kind := r.byte()
		switch kind {
		case 0x00: // function: type index
			r.u32()
		case 0x01: // table: reference type, limits
			r.byte()
			r.limits()
		case 0x02: // memory: limits
			r.limits()
		case 0x03: // global: value type, mutability
			r.valType()
			r.byte()
		default:
			return fmt.Errorf("import kind %#x", kind)
		}
		if r.err == nil {
			each(module, name, kind)
		}
	}
	return r.err
}

func countImports(body []byte) (funcs, globals uint32, err error) {
	err = importKinds(body, func(_, _ string, kind byte) {
		switch kind {
		case externFunc:
			funcs++
		case externGlob:
			globals++
		}
	})
	return funcs, globals, err
}

// readGlobals returns how many globals the section defines, and which of them (by
// their index among the defined ones) are mutable.
func readGlobals(body []byte) (uint32, []uint32, error) {
	r := reader{b: body}
	n := r.u32()
	var mutable []uint32
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.valType()
		if r.byte() == 1 {
			mutable = append(mutable, i)
		}
		r.constExpr()
	}
	return n, mutable, r.err
}

// readExportNames lists the names of every export.
func readExportNames(body []byte) ([]string, error) { return readExports(body, 0xff, nil) }

// readExports appends the names of the exports of a kind (0xff: every kind).
func readExports(body []byte, kind byte, names []string) ([]string, error) {
	r := reader{b: body}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		name := r.name()
		if k := r.byte(); kind == 0xff || k == kind {
			names = append(names, name)
		}
		r.u32()
	}
	return names, r.err
}

// sized appends what write appends, preceded by its length. The length is written in
// five bytes whatever its value (LEB128 allows padding), so that the content is
// written once, in place, rather than built apart and copied.
func sized(out []byte, write func([]byte) ([]byte, error)) ([]byte, error) {
	at := len(out)
	out = append(out, 0x80, 0x80, 0x80, 0x80, 0)
	out, err := write(out)
	if err != nil {
		return nil, err
	}
	n := len(out) - at - 5
	if n >= 1<<32 {
		return nil, errors.New("too large")
	}
	for i := range 4 {
		out[at+i] = byte(n>>(7*i))&0x7f | 0x80
	}
	out[at+4] = byte(n >> 28)
	return out, nil
}

// rewriteGlobals returns the global section with its initializers renumbered (fn) and
// the encoded globals added.
func rewriteGlobals(body []byte, fn renumber, added []byte) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(added)+5), uint64(n+2))
	for ; n > 0 && r.err == nil; n-- {
		at := r.pos
		r.valType()
		r.byte()
		out = append(out, body[at:r.pos]...)
		out = copyConstExpr(out, &r, fn)
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(out, added...), nil
}

// rewriteExports returns the export section with its functions renumbered.
func rewriteExports(body []byte, fn renumber) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(body)+5), uint64(n))
	for ; n > 0 && r.err == nil; n-- {
		at := r.pos
		r.name()
		kind := r.byte()
		out = append(out, body[at:r.pos]...)
		index := r.u32()
		if kind == externFunc {
			index = fn.at(index)
		}
		out = binary.AppendUvarint(out, uint64(index))
	}
	return out, r.err
}

// rewriteElements returns the element section with its functions renumbered.
func rewriteElements(body []byte, fn renumber) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(body)/8+5), uint64(n))
	for ; n > 0 && r.err == nil; n-- {
		// The flags' bits: 0, passive or declarative (no offset); 1, with a table
		// index (active) or declarative; 2, elements given as expressions.
		flags := r.u32()
		if flags > 7 {
			return nil, fmt.Errorf("element segment flags %#x", flags)
		}
		out = binary.AppendUvarint(out, uint64(flags))
		if flags&3 == 2 {
			out = binary.AppendUvarint(out, uint64(r.u32()))
		}
		if flags&1 == 0 {
			out = copyConstExpr(out, &r, fn)
		}
		if flags&3 != 0 {
			out = append(out, r.byte()) // element kind or reference type
		}
		count := r.u32()
		out = binary.AppendUvarint(out, uint64(count))
		for ; count > 0 && r.err == nil; count-- {
			if flags&4 != 0 {
				out = copyConstExpr(out, &r, fn)
			} else {
				out = binary.AppendUvarint(out, uint64(fn.at(r.u32())))
			}
		}
	}
	if r.err == nil && r.pos != len(body) {
		return nil, errors.New("bytes after the last element segment")
	}
	return out, r.err
}

// copyConstExpr appends the constant expression at r, up to its end, with its
// functions renumbered.
func copyConstExpr(out []byte, r *reader, fn renumber) []byte {
	for r.err == nil {
		at := r.pos
		op := r.byte()
		if op == opRefFunc {
			out = binary.AppendUvarint(append(out, op), uint64(fn.at(r.u32())))
			continue
		}
		r.immediates(op)
		out = append(out, r.b[at:r.pos]...)
		if op == opEnd {
			break
		}
	}
	return out
}

// rewriteCustom returns a custom section, the name section with its functions
// renumbered. A name section it cannot read is dropped, as wazero ignores one: names
// only label stack traces.
func rewriteCustom(body []byte, fn renumber) []byte {
	r := reader{b: body}
	if r.name() != "name" || r.err != nil {
		return body
	}
	out := append([]byte(nil), body[:r.pos]...)
	for r.pos < len(body) && r.err == nil {
		id := r.byte()
		sub := reader{b: r.bytes(int(r.u32()))}
		out = append(out, id)
		switch id {
		case 1, 2, 3: // function names, local names, label names: by function index
			out, _ = sized(out, func(out []byte) ([]byte, error) {
				n := sub.u32()
				out = binary.AppendUvarint(out, uint64(n))
				for ; n > 0 && sub.err == nil; n-- {
					out = binary.AppendUvarint(out, uint64(fn.at(sub.u32())))
					at := sub.pos
					if id == 1 {
						sub.name()
					} else {
						for m := sub.u32(); m > 0 && sub.err == nil; m-- {
							sub.u32()
							sub.name()
						}
					}
					out = append(out, sub.b[at:sub.pos]...)
				}
				return out, nil
			})
		default:
			out = binary.AppendUvarint(out, uint64(len(sub.b)))
			out = append(out, sub.b...)
		}
		if sub.err != nil {
			r.err = sub.err
		}
	}
	if r.err != nil {
		return nil
	}
	return out
}

// rewriteCode appends the code section body with the checks inserted after every loop
// instruction and at the start of the function bodies that need one
// (entryCheckNeeded), and its functions renumbered.
func rewriteCode(out, body, check []byte, fn renumber) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out = binary.AppendUvarint(out, uint64(n))
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		code := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, r.err)
		}
		var err error
		out, err = sized(out, func(out []byte) ([]byte, error) { return rewriteFunc(out, code, check, fn) })
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
	}
	if r.pos != len(body) {
		return nil, errors.New("bytes after the last function")
	}
	return out, nil
}

func rewriteFunc(out, code, check []byte, fn renumber) ([]byte, error) {
	r := reader{b: code}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.u32()
		r.valType()
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %w", r.err)
	}
	out = append(out, code[:r.pos]...)
	needed, err := entryCheckNeeded(r)
	if err != nil {
		return nil, err
	}
	if needed {
		out = append(out, check...)
	}
	last := r.pos // code up to here is in out
	for r.pos < len(code) {
		op := r.byte()
		if op == opCall || op == opRefFunc {
			out = append(out, code[last:r.pos]...)
			out = binary.AppendUvarint(out, uint64(fn.at(r.u32())))
			last = r.pos
			continue
		}
		r.immediates(op)
		if r.err != nil {
			return nil, r.err
		}
		if op == opLoop {
			out = append(out, code[last:r.pos]...)
			out = append(out, check...)
			last = r.pos
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(out, code[last:]...), nil
}

// Instructions entryCheckNeeded looks for, besides opLoop and opCall.
const (
	opIf           = 0x04
	opBr           = 0x0c
	opBrIf         = 0x0d
	opBrTable      = 0x0e
	opReturn       = 0x0f
	opCallIndirect = 0x11
)

// entryCheckNeeded reports whether a function, whose body r is at, needs a check at
// its entry. The entry's check is there to break recursion, a cycle through calls
// without loops. A function needs none when it reaches a loop header before any branch
// or call, as then every entry passes that loop's check first, or when it calls
// nothing, so that it cannot recurse and runs a bounded stretch of code (forward
// branches, and loops with their own checks) before it returns. Either way every
// cycle a guest can run still passes a check, so a stop is still seen within
// YieldEvery checks. Go's compiler opens every function that calls another with a few
// moves and then blocks and a loop (its resumption points): a Go guest passes one
// check per call instead of two, and none in a leaf.
func entryCheckNeeded(r reader) (bool, error) {
	straight := true // no branch yet: every entry reaches the instruction read
	for r.pos < len(r.b) && r.err == nil {
		op := r.byte()
		switch op {
		case opCall, opCallIndirect:
			return true, nil
		case opLoop:
			if straight {
				return false, nil
			}
		case opIf, opBr, opBrIf, opBrTable, opReturn:
			straight = false
		}
		r.immediates(op)
	}
	return false, r.err
}

// reader decodes the binary format. The first error sticks: later reads return
// zero values, and callers check err once after a sequence of reads.
type reader struct {
	b   []byte
	pos int
	err error
}

var errTruncated = errors.New("truncated")

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.pos = len(r.b)
}

func (r *reader) byte() byte {
	if r.pos >= len(r.b) {
		r.fail(errTruncated)
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.pos {
		r.fail(errTruncated)
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

// leb reads an LEB128 number of at most maxBytes bytes, returning its raw bits.
func (r *reader) leb(maxBytes int) uint64 {
	var v uint64
	for i := range maxBytes {
		c := r.byte()
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("LEB128 number too long"))
	return 0
}

func (r *reader) u32() uint32 { return uint32(r.leb(5)) }

// s32 reads a signed LEB128 number of 32 bits, as i32.const holds it.
func (r *reader) s32() int32 {
	var v int32
	for i := range 5 {
		c := r.byte()
		v |= int32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if shift := 7 * (i + 1); shift < 32 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
	r.fail(errors.New("LEB128 number too long"))
	return 0
}

func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

func (r *reader) limits() {
	flags := r.byte()
	if flags > 3 { // 64-bit memories are not supported
		r.fail(fmt.Errorf("limits flags %#x", flags))
		return
	}
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// valType reads a value type: a number, vector or reference type.
func (r *reader) valType() {
	switch t := r.byte(); t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
	default:
		r.fail(fmt.Errorf("value type %#x", t))
	}
}

// constExpr reads a constant expression up to its end.
func (r *reader) constExpr() {
	for r.err == nil {
		op := r.byte()
		if op == opEnd {
			return
		}
		r.immediates(op)
	}
}

// immediates skips the immediate operands of the instruction op.
func (r *reader) immediates(op byte) {
	switch {
	case op <= 0x01, op == 0x05, op == opEnd, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
		op >= 0x45 && op <= 0xc4:
		// unreachable, nop, else, end, return, drop, select, ref.is_null, numeric
	case op >= 0x02 && op <= 0x04: // block, loop, if
		r.blockType()
	case op == 0x0c, op == 0x0d, op == 0x10, op == 0xd2,
		op >= 0x20 && op <= 0x26, op == 0x3f, op == 0x40:
		// br, br_if, call, ref.func, local.*, global.*, table.get/set, memory.size/grow
		r.u32()
	case op == 0x0e: // br_table
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x11: // call_indirect: type, table
		r.u32()
		r.u32()
	case op == 0x1c: // select with types
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.valType()
		}
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memArg()
	case op == 0x41:
		r.leb(5)
	case op == 0x42:
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null
		r.byte()
	case op == 0xfc:
		r.miscImmediates(r.u32())
	case op == 0xfd:
		r.simdImmediates(r.u32())
	default:
		r.fail(fmt.Errorf("unsupported instruction %#x", op))
	}
}

func (r *reader) blockType() {
	if r.pos >= len(r.b) {
		r.fail(errTruncated)
		return
	}
	switch r.b[r.pos] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.pos++
	default: // a type index, as a signed 33-bit number
		r.leb(5)
	}
}

func (r *reader) memArg() {
	align := r.u32()
	if align&0x40 != 0 { // multiple memories: a memory index follows
		r.u32()
	}
	r.u32()
}

// miscImmediates skips the immediates of the 0xfc-prefixed instructions.
func (r *reader) miscImmediates(sub uint32) {
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	case sub <= 17: // data.drop, memory.fill, elem.drop, table.grow, table.size, table.fill
		r.u32()
	default:
		r.fail(fmt.Errorf("unsupported instruction 0xfc %d", sub))
	}
}

// simdImmediates skips the immediates of the 0xfd-prefixed (vector) instructions.
func (r *reader) simdImmediates(sub uint32) {
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads and stores
		r.memArg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.memArg()
		r.byte()
	case sub <= 255:
	default:
		r.fail(fmt.Errorf("unsupported instruction 0xfd %d", sub))
	}
}
