package instrument_test

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/terrarium-ai/terrarium/host/internal/instrument"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// A small assembler for test modules.

func vec(entries ...[]byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(entries)))
	for _, e := range entries {
		b = append(b, e...)
	}
	return b
}

func name(s string) []byte { return append(binary.AppendUvarint(nil, uint64(len(s))), s...) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func section(id byte, body []byte) []byte {
	return cat([]byte{id}, binary.AppendUvarint(nil, uint64(len(body))), body)
}

func module(sections ...[]byte) []byte {
	return cat(append([][]byte{{0, 'a', 's', 'm', 1, 0, 0, 0}}, sections...)...)
}

// body is a function body without locals.
func body(code ...byte) []byte {
	b := append([]byte{0}, code...)
	return append(binary.AppendUvarint(nil, uint64(len(b))), b...)
}

// spinner imports env.started, and exports spin, which calls it and then loops
// forever; deep, which recurses without loops for a very long time (2^40 calls);
// counter, a mutable global the start function sets to 42; and the memory.
var spinner = module(
	section(1, vec([]byte{0x60, 0, 0}, []byte{0x60, 1, 0x7e, 0})),                   // types: () -> (), (i64) -> ()
	section(2, vec(cat(name("env"), name("started"), []byte{0, 0}))),                // import func 0: env.started
	section(3, vec([]byte{0}, []byte{1}, []byte{0})),                                // funcs 1 (spin), 2 (deep), 3 (start)
	section(5, vec([]byte{0, 1})),                                                   // memory: 1 page
	section(6, vec([]byte{0x7f, 1, 0x41, 0, 0x0b}, []byte{0x7f, 0, 0x41, 7, 0x0b})), // globals 0 (mut), 1 (const)
	section(7, vec(cat(name("spin"), []byte{0, 1}), cat(name("deep"), []byte{0, 2}), cat(name("counter"), []byte{3, 0}), cat(name("memory"), []byte{2, 0}))),
	section(8, []byte{3}), // start: func 3
	section(10, vec(
		body(0x10, 0, 0x03, 0x40, 0x0c, 0, 0x0b, 0x0b), // spin: call started; loop br 0 end
		body(0x20, 0, 0x50, 0x04, 0x40, 0x0f, 0x0b, 0x20, 0, 0x42, 1, 0x7d, 0x10, 2, 0x20, 0, 0x42, 1, 0x7d, 0x10, 2, 0x0b), // deep(n): if n == 0 return; deep(n-1); deep(n-1)
		body(0x41, 42, 0x24, 0, 0x0b), // start: counter = 42
	)),
	section(0, cat(name("custom"), []byte("kept"))),
)

// hangGuard turns a guest that does not stop into a failure instead of a stuck test.
const hangGuard = 30 * time.Second

type instance struct {
	mod  api.Module
	stop api.MutableGlobal
}

func instantiate(t *testing.T, wasm []byte, started func()) instance {
	t.Helper()
	return instantiateYielding(t, wasm, started, func() {})
}

// instantiateYielding instantiates the rewrite of wasm with yield as the function it
// calls every YieldEvery checks.
func instantiateYielding(t *testing.T, wasm []byte, started, yield func()) instance {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx) // no close-on-context-done checks
	t.Cleanup(func() { rt.Close(ctx) })
	_, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(context.Context) { started() }).Export("started").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.NewHostModuleBuilder(instrument.YieldModule).NewFunctionBuilder().
		WithFunc(func(context.Context) { yield() }).Export(instrument.YieldName).Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := instrument.Rewrite(wasm)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, res.Wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return instance{mod: mod, stop: mod.ExportedGlobal(instrument.StopExport).(api.MutableGlobal)}
}

func TestStopEndsALoop(t *testing.T) {
	started := make(chan struct{})
	inst := instantiate(t, spinner, func() { close(started) })
	done := make(chan error, 1)
	go func() {
		_, err := inst.mod.ExportedFunction("spin").Call(context.Background())
		done <- err
	}()
	<-started // in the loop, or about to be
	inst.stop.Set(1)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("spin: %v, want a trap", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("spin still running %v after the stop global was set", hangGuard)
	}
}

func TestStopEndsRecursionWithoutLoops(t *testing.T) {
	inst := instantiate(t, spinner, func() {})
	inst.stop.Set(1)
	if _, err := inst.mod.ExportedFunction("deep").Call(context.Background(), 40); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("deep: %v, want a trap", err)
	}
	inst.stop.Set(0)
	if _, err := inst.mod.ExportedFunction("deep").Call(context.Background(), 3); err != nil {
		t.Errorf("deep(3) with the stop global clear: %v", err)
	}
}

// TestLoopsAndCallsYield: a guest looping without calls, or recursing without loops,
// calls yield every YieldEvery passes; here yield stops it on its third call (a guest
// that never yields would keep the test running until hangGuard).
func TestLoopsAndCallsYield(t *testing.T) {
	for _, tc := range []struct {
		export string
		arg    uint64
	}{{"spin", 0}, {"deep", 40}} {
		t.Run(tc.export, func(t *testing.T) {
			var inst instance
			yields := 0
			inst = instantiateYielding(t, spinner, func() {}, func() {
				if yields++; yields == 3 {
					inst.stop.Set(1)
				}
			})
			done := make(chan error, 1)
			go func() {
				var args []uint64
				if tc.export == "deep" {
					args = append(args, tc.arg)
				}
				_, err := inst.mod.ExportedFunction(tc.export).Call(context.Background(), args...)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "unreachable") {
					t.Errorf("%s: %v, want a trap", tc.export, err)
				}
				if yields != 3 {
					t.Errorf("%d yields, want 3", yields)
				}
			case <-time.After(hangGuard):
				t.Fatalf("%s still running after %v: it does not yield", tc.export, hangGuard)
			}
		})
	}
}

// TestFunctionsAreRenumbered: the import of yield moves the module's own functions up
// one; every reference to them follows (calls, tables filled by element segments of
// each form, ref.func in code and globals, exports, names).
func TestFunctionsAreRenumbered(t *testing.T) {
	functionNames := vec(cat([]byte{1}, name("seven")))
	wasm := module(
		section(1, vec([]byte{0x60, 0, 1, 0x7f}, []byte{0x60, 0, 0})),    // types: () -> i32, () -> ()
		section(2, vec(cat(name("env"), name("started"), []byte{0, 1}))), // import func 0
		section(3, vec([]byte{0}, []byte{0}, []byte{0}, []byte{0}, []byte{0})),
		section(4, vec([]byte{0x70, 0, 4})),             // table: 4 funcrefs
		section(6, vec([]byte{0x70, 0, 0xd2, 1, 0x0b})), // global 0: ref.func seven
		section(7, vec(cat(name("seven"), []byte{0, 1}), cat(name("viaCall"), []byte{0, 2}), cat(name("viaTable"), []byte{0, 3}), cat(name("viaRef"), []byte{0, 4}), cat(name("viaGlobal"), []byte{0, 5}))),
		section(9, vec(
			[]byte{0, 0x41, 0, 0x0b, 1, 1},             // table[0] = seven, by index
			[]byte{4, 0x41, 3, 0x0b, 1, 0xd2, 1, 0x0b}, // table[3] = seven, by expression
			[]byte{3, 0, 1, 1},                         // seven declared, for ref.func in code
		)),
		section(10, vec(
			body(0x41, 7, 0x0b), // seven
			body(0x10, 1, 0x0b), // viaCall: seven()
			body(0x41, 0, 0x11, 0, 0, 0x41, 3, 0x11, 0, 0, 0x6a, 0x0b), // viaTable: table[0]() + table[3]()
			body(0x41, 1, 0xd2, 1, 0x26, 0, 0x41, 1, 0x11, 0, 0, 0x0b), // viaRef: table[1] = ref.func seven; table[1]()
			body(0x41, 2, 0x23, 0, 0x26, 0, 0x41, 2, 0x11, 0, 0, 0x0b), // viaGlobal: table[2] = global 0; table[2]()
		)),
		section(0, cat(name("name"), []byte{1}, name(string(functionNames)))), // subsection 1
	)
	inst := instantiate(t, wasm, func() {})
	for export, want := range map[string]uint64{"seven": 7, "viaCall": 7, "viaTable": 14, "viaRef": 7, "viaGlobal": 7} {
		fn := inst.mod.ExportedFunction(export)
		got, err := fn.Call(context.Background())
		if err != nil || got[0] != want {
			t.Errorf("%s() = %v, %v; want %d", export, got, err, want)
		}
	}
	if got := inst.mod.ExportedFunction("seven").Definition().Name(); got != "seven" {
		t.Errorf("function seven is named %q, want seven", got)
	}
}

func TestStartFunctionIsExported(t *testing.T) {
	inst := instantiate(t, spinner, func() {})
	counter := inst.mod.ExportedGlobal("counter")
	if got := counter.Get(); got != 0 {
		t.Fatalf("the start function ran at instantiation: counter = %d", got)
	}
	if _, err := inst.mod.ExportedFunction(instrument.StartExport).Call(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := counter.Get(); got != 42 {
		t.Errorf("counter = %d after the start function, want 42", got)
	}
}

func TestMutableGlobalsAreExported(t *testing.T) {
	res, err := instrument.Rewrite(spinner)
	if err != nil {
		t.Fatal(err)
	}
	if !res.HasStart || len(res.GlobalExports) != 1 {
		t.Fatalf("result = %+v, want a start function and one mutable global", res)
	}
	inst := instantiate(t, spinner, func() {})
	g := inst.mod.ExportedGlobal(res.GlobalExports[0]).(api.MutableGlobal)
	g.Set(5)
	if got := inst.mod.ExportedGlobal("counter").Get(); got != 5 {
		t.Errorf("counter = %d through its new export, want 5", got)
	}
}

// TestModulesWithoutSections: a module with none of the sections the rewrite adds to
// (types, imports, globals, exports) gets them.
func TestModulesWithoutSections(t *testing.T) {
	for what, wasm := range map[string][]byte{
		"no imports, globals or exports": module(section(1, vec([]byte{0x60, 0, 0})), section(3, vec([]byte{0})), section(10, vec(body(0x0b)))),
		"nothing at all":                 module(),
	} {
		inst := instantiate(t, wasm, func() {})
		if inst.stop == nil {
			t.Errorf("%s: no stop global exported", what)
		}
	}
}

// TestDescribeReadsBackARewrite: what Rewrite returns can be read back from the
// rewritten module alone, as a cache of rewritten modules needs; an unrewritten module
// is refused.
func TestDescribeReadsBackARewrite(t *testing.T) {
	res, err := instrument.Rewrite(spinner)
	if err != nil {
		t.Fatal(err)
	}
	back, err := instrument.Describe(res.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	if back.HasStart != res.HasStart || !slices.Equal(back.GlobalExports, res.GlobalExports) {
		t.Errorf("Describe = %+v, want %+v", back, res)
	}
	if _, err := instrument.Describe(spinner); !errors.Is(err, instrument.ErrInvalid) {
		t.Errorf("Describe of a module not rewritten: %v, want ErrInvalid", err)
	}
}

// dataSection returns the body of a module's data section.
func dataSection(t *testing.T, wasm []byte) []byte {
	t.Helper()
	for at := 8; at < len(wasm); {
		id := wasm[at]
		n, k := binary.Uvarint(wasm[at+1:])
		body := wasm[at+1+k : at+1+k+int(n)]
		if id == 11 {
			return body
		}
		at += 1 + k + int(n)
	}
	t.Fatal("no data section")
	return nil
}

// TestDataIsTakenOut: the data of a module whose segments are all active, at constant
// offsets, within its memory's initial size, is handed back as an image; the module
// keeps as many segments, empty, and still compiles (its data count included).
func TestDataIsTakenOut(t *testing.T) {
	wasm := module(
		section(5, vec([]byte{0, 1})), // memory: one page
		section(12, []byte{2}),        // data count
		section(11, vec(
			cat([]byte{0, 0x41, 10, 0x0b}, name("ab")),   // offset 10: "ab"
			cat([]byte{2, 0, 0x41, 4, 0x0b}, name("xy")), // memory 0, offset 4: "xy"
		)),
	)
	res, err := instrument.Rewrite(wasm)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("\x00\x00\x00\x00xy\x00\x00\x00\x00ab")
	if string(res.Data) != string(want) {
		t.Errorf("Data = %q, want %q", res.Data, want)
	}
	if data, err := instrument.Data(wasm); err != nil || string(data) != string(want) {
		t.Errorf("Data(the module) = %q, %v; want %q", data, err, want)
	}
	if got, empty := dataSection(t, res.Wasm), vec([]byte{0, 0x41, 0, 0x0b, 0}, []byte{0, 0x41, 0, 0x0b, 0}); string(got) != string(empty) {
		t.Errorf("the rewritten data section is % x, want two empty segments, % x", got, empty)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, res.Wasm); err != nil {
		t.Errorf("the rewritten module does not compile: %v", err)
	}
}

// TestDataIsLeftIn: a module whose data the host could not lay out alone keeps it.
func TestDataIsLeftIn(t *testing.T) {
	memory := section(5, vec([]byte{0, 1}))
	active := cat([]byte{0, 0x41, 4, 0x0b}, name("x"))
	for what, wasm := range map[string][]byte{
		"a passive segment": module(memory, section(11, vec(active, cat([]byte{1}, name("p"))))),
		"an offset read from a global": module(
			section(2, vec(cat(name("env"), name("g"), []byte{3, 0x7f, 0}))),
			memory,
			section(11, vec(cat([]byte{0, 0x23, 0, 0x0b}, name("x")))),
		),
		"a negative offset":             module(memory, section(11, vec(cat([]byte{0, 0x41, 0x7f, 0x0b}, name("x"))))),
		"data past the initial size":    module(memory, section(11, vec(cat([]byte{0, 0x41, 0x80, 0x80, 0x04, 0x0b}, name("x"))))),
		"an imported memory":            module(section(2, vec(cat(name("env"), name("mem"), []byte{2, 0, 1}))), section(11, vec(active))),
		"an active segment on memory 1": module(memory, section(11, vec(cat([]byte{2, 1, 0x41, 4, 0x0b}, name("x"))))),
	} {
		res, err := instrument.Rewrite(wasm)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Data != nil {
			t.Errorf("%s: Data = %q, want nil", what, res.Data)
		}
		if got, want := dataSection(t, res.Wasm), dataSection(t, wasm); string(got) != string(want) {
			t.Errorf("%s: the data section became % x, want % x", what, got, want)
		}
	}
}

func TestInterface(t *testing.T) {
	imports, exports, err := instrument.Interface(spinner)
	if err != nil {
		t.Fatal(err)
	}
	if want := []instrument.Import{{"env", "started", instrument.KindFunc}}; !slices.Equal(imports, want) {
		t.Errorf("imports = %v, want %v", imports, want)
	}
	if want := []string{"spin", "deep"}; !slices.Equal(exports, want) {
		t.Errorf("exports = %v, want %v (no global, no memory)", exports, want)
	}
	if _, _, err := instrument.Interface([]byte("MZ")); !errors.Is(err, instrument.ErrInvalid) {
		t.Errorf("Interface of a non-module: %v, want ErrInvalid", err)
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		what string
		wasm []byte
		says string
	}{
		{"not wasm", []byte("MZ\x90\x00"), "not a WebAssembly"},
		{"truncated", spinner[:len(spinner)-20], "truncated"},
		{"exceptions", module(section(1, vec([]byte{0x60, 0, 0})), section(3, vec([]byte{0})), section(10, vec(body(0x08, 0, 0x0b)))), "unsupported instruction 0x8"},
		{"an export of the same name", module(section(6, vec([]byte{0x7f, 1, 0x41, 0, 0x0b})), section(7, vec(cat(name(instrument.StopExport), []byte{3, 0})))), "already exports"},
	} {
		_, err := instrument.Rewrite(tc.wasm)
		if !errors.Is(err, instrument.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", tc.what, err, tc.says)
		}
	}
}

// TestGoPluginCompiles rewrites a real Go plugin and compiles it.
func TestGoPluginCompiles(t *testing.T) {
	wasm := pluginbuild.WasmForTest(t, "../../../plugins/calculator")
	res, err := instrument.Rewrite(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if res.HasStart || len(res.GlobalExports) == 0 {
		t.Errorf("a Go reactor has no start section and some mutable globals: %+v", res.GlobalExports)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter()) // compiles fast
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, res.Wasm); err != nil {
		t.Fatal(err)
	}
}

// FuzzRewrite: whatever the input, Rewrite returns an error or a module; if wazero
// accepts the input, it accepts the output too, with the same exports and more.
func FuzzRewrite(f *testing.F) {
	f.Add(spinner)
	f.Add(module(section(1, vec([]byte{0x60, 0, 0})), section(3, vec([]byte{0})), section(10, vec(body(0x0b)))))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		res, err := instrument.Rewrite(wasm)
		if err != nil {
			return
		}
		ctx := context.Background()
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
		defer rt.Close(ctx)
		orig, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			return
		}
		out, err := rt.CompileModule(ctx, res.Wasm)
		if err != nil {
			t.Fatalf("the input compiles, its rewrite does not: %v", err)
		}
		for name := range orig.ExportedFunctions() {
			if out.ExportedFunctions()[name] == nil {
				t.Errorf("export %s lost", name)
			}
		}
	})
}

// BenchmarkRewrite measures rewriting a Go plugin (the calculator, about 5 MB).
func BenchmarkRewrite(b *testing.B) {
	wasm := calculator(b)
	b.SetBytes(int64(len(wasm)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := instrument.Rewrite(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkData: what a module loaded from the cache of rewrites costs to get its data
// back from the original.
func BenchmarkData(b *testing.B) {
	wasm := calculator(b)
	b.SetBytes(int64(len(wasm)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := instrument.Data(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

// calculator returns the calculator plugin, built.
func calculator(b *testing.B) []byte {
	return pluginbuild.WasmForTest(b, "../../../plugins/calculator")
}

// recursers exports three functions of (i64) -> () that recurse 2^n calls deep and
// wide without a loop on their way, and two of () -> (): looprec opens with a move and
// a loop and recurses inside it (the shape of a Go function), its loop header's check
// being the only one it needs; callfirst recurses before its loop and skipfirst
// branches over its loop before recursing, so both need a check at their entry; once
// runs a loop's header once, and leaf does nothing.
var recursers = module(
	section(1, vec([]byte{0x60, 0, 0}, []byte{0x60, 1, 0x7e, 0})),    // types: () -> (), (i64) -> ()
	section(2, vec(cat(name("env"), name("started"), []byte{0, 0}))), // import func 0: env.started
	section(3, vec([]byte{1}, []byte{1}, []byte{1}, []byte{0}, []byte{0})),
	section(7, vec(
		cat(name("looprec"), []byte{0, 1}), cat(name("callfirst"), []byte{0, 2}), cat(name("skipfirst"), []byte{0, 3}),
		cat(name("once"), []byte{0, 4}), cat(name("leaf"), []byte{0, 5}),
	)),
	section(10, vec(
		body(cat([]byte{0x20, 0, 0x1a, 0x02, 0x40, 0x03, 0x40}, recurse(1), []byte{0x0b, 0x0b, 0x0b})...), // looprec: local.get 0 drop block loop (recurse) end end
		body(cat(recurse(2), []byte{0x03, 0x40, 0x0b, 0x0b})...),                                          // callfirst: (recurse) loop end
		body(cat([]byte{0x02, 0x40, 0x0c, 0, 0x03, 0x40, 0x0b, 0x0b}, recurse(3), []byte{0x0b})...),       // skipfirst: block br 0 loop end end (recurse)
		body(0x41, 1, 0x1a, 0x03, 0x40, 0x0b, 0x0b),                                                       // once: i32.const 1 drop loop end
		body(0x01, 0x0b), // leaf: nop
	)),
)

// recurse is the code of f(n): if n == 0 return; f(n-1); f(n-1).
func recurse(f byte) []byte {
	return []byte{0x20, 0, 0x50, 0x04, 0x40, 0x0f, 0x0b, 0x20, 0, 0x42, 1, 0x7d, 0x10, f, 0x20, 0, 0x42, 1, 0x7d, 0x10, f}
}

// TestStopEndsRecursionPastSkippedEntryChecks: a function that needs no check at its
// entry is still stopped when it recurses, and one that calls before its first loop
// header (or may skip it) keeps its entry's check.
func TestStopEndsRecursionPastSkippedEntryChecks(t *testing.T) {
	for _, export := range []string{"looprec", "callfirst", "skipfirst"} {
		t.Run(export, func(t *testing.T) {
			inst := instantiate(t, recursers, func() {})
			inst.stop.Set(1)
			done := make(chan error, 1)
			go func() {
				_, err := inst.mod.ExportedFunction(export).Call(context.Background(), 40)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "unreachable") {
					t.Errorf("%s: %v, want a trap", export, err)
				}
			case <-time.After(hangGuard):
				t.Fatalf("%s still running %v after the stop global was set", export, hangGuard)
			}
		})
	}
}

// TestEntryChecksOnlyWhereNeeded: a function opening with a loop passes one check per
// call, not two, and one calling nothing passes none; counted by the yields of 1,500
// calls, one every YieldEvery checks.
func TestEntryChecksOnlyWhereNeeded(t *testing.T) {
	for _, tc := range []struct {
		export string
		yields int
	}{{"once", 1}, {"leaf", 0}} {
		t.Run(tc.export, func(t *testing.T) {
			yields := 0
			inst := instantiateYielding(t, recursers, func() {}, func() { yields++ })
			fn := inst.mod.ExportedFunction(tc.export)
			for range 1500 {
				if _, err := fn.Call(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if yields != tc.yields {
				t.Errorf("%d yields in 1,500 calls, want %d", yields, tc.yields)
			}
		})
	}
}
