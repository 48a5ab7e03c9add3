package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/host/internal/instrument"
)

// dataAt is where dataWasm's active segment puts its data.
const dataAt = 70000 // in the memory's second page

// dataWasm returns a module of two pages of memory whose active data segment puts
// "hello" at dataAt, followed by extra (encoded data segments), and which exports
// bump, () -> i32, adding one to the byte at dataAt and returning 0.
func dataWasm(extra ...[]byte) []byte {
	section := func(out []byte, id byte, body []byte) []byte {
		out = binary.AppendUvarint(append(out, id), uint64(len(body)))
		return append(out, body...)
	}
	at := []byte{0x41, 0xf0, 0xa2, 0x04} // i32.const dataAt
	code := append([]byte{0}, at...)     // no locals
	code = append(code, at...)
	code = append(code, 0x2d, 0, 0, 0x41, 1, 0x6a, 0x3a, 0, 0, 0x41, 0, 0x0b) // load8_u, +1, store8; 0
	data := append(append([]byte{0}, at...), 0x0b, 5, 'h', 'e', 'l', 'l', 'o')
	for _, seg := range extra {
		data = append(data, seg...)
	}
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = section(m, 1, []byte{1, 0x60, 0, 1, 0x7f})
	m = section(m, 3, []byte{1, 0})
	m = section(m, 5, []byte{1, 0, 2})
	m = section(m, 7, []byte{1, 4, 'b', 'u', 'm', 'p', 0, 0})
	m = section(m, 10, append([]byte{1, byte(len(code))}, code...))
	return section(m, 11, append([]byte{byte(1 + len(extra))}, data...))
}

// dataEngines are the ways the native engine puts a module's data in its instances'
// memories: mapped from a file shared by them (linux), copied into the reserved memory,
// and copied into wazero's own.
var dataEngines = []struct {
	name string
	eng  nativeEngine
}{
	{"mapped", nativeEngine{}},
	{"copied", nativeEngine{copyData: true}},
	{"goheap", nativeEngine{goHeapMemory: true}},
}

// compileData compiles wasm on eng, resettable or not.
func compileData(t *testing.T, eng nativeEngine, wasm []byte, resettable bool) *nativeModule {
	t.Helper()
	ctx := context.Background()
	mod, err := eng.Compile(ctx, wasm, engine.ModuleConfig{MemoryPages: 16, Resettable: resettable, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(ctx) })
	return mod.(*nativeModule)
}

// bytesAt returns the guest's memory at dataAt.
func bytesAt(t *testing.T, inst *nativeInstance, n int) string {
	t.Helper()
	b, ok := inst.guest.Memory().Read(dataAt, uint32(n))
	if !ok {
		t.Fatal("dataAt is beyond the guest's memory")
	}
	return string(b)
}

// TestModuleDataIsEachInstances: each instance starts with the module's data, however
// it got there (from the module without a cache, the module rewritten into a cache, or
// the data file a cache kept), and writes to it are its own.
func TestModuleDataIsEachInstances(t *testing.T) {
	ctx := context.Background()
	cached := t.TempDir()
	compileData(t, nativeEngine{}, dataWasm(), false) // fills it
	for _, v := range dataEngines {
		for _, c := range []struct{ name, dir string }{{"uncached", ""}, {"rewritten", t.TempDir()}, {"cached", cached}} {
			dir := c.dir
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				mod, err := v.eng.Compile(ctx, dataWasm(), engine.ModuleConfig{MemoryPages: 16, CacheDir: dir})
				if err != nil {
					t.Fatal(err)
				}
				defer mod.Close(ctx)
				m := mod.(*nativeModule)
				if m.data == nil {
					t.Fatal("the module's data was left in its segments")
				}
				// A file of the cache maps where memories are reserved; a memory file
				// only on linux.
				wantMapped := v.name == "mapped" && (runtime.GOOS == "linux" || dir != "" && runtime.GOOS == "darwin")
				if mapped := m.data.file != nil; mapped != wantMapped {
					t.Errorf("the data is in a file to map: %v", mapped)
				}
				var insts [2]*nativeInstance
				for i := range insts {
					inst, err := m.Instantiate(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer inst.Close(ctx)
					insts[i] = inst.(*nativeInstance)
				}
				if _, err := insts[0].Call(ctx, "bump", nil); err != nil {
					t.Fatal(err)
				}
				if got := bytesAt(t, insts[0], 5); got != "iello" {
					t.Errorf("the instance that wrote its data reads %q, want %q", got, "iello")
				}
				if got := bytesAt(t, insts[1], 5); got != "hello" {
					t.Errorf("the other instance reads %q, want %q", got, "hello")
				}
			})
		}
	}
}

// TestResetRestoresModuleData: a reset puts back the data pages as they were after
// the first call, not as the module's data has them.
func TestResetRestoresModuleData(t *testing.T) {
	ctx := context.Background()
	for _, v := range dataEngines {
		t.Run(v.name, func(t *testing.T) {
			inst, err := compileData(t, v.eng, dataWasm(), true).Instantiate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Close(ctx)
			for range 3 {
				if _, err := inst.Call(ctx, "bump", nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := inst.Reset(ctx); err != nil {
				t.Fatal(err)
			}
			if got := bytesAt(t, inst.(*nativeInstance), 5); got != "iello" {
				t.Errorf("after a reset, the data reads %q, want %q (as after the first call)", got, "iello")
			}
		})
	}
}

// TestModuleWithPassiveDataIsLeftAsItIs: a module with a passive segment keeps its
// segments, which wazero copies as ever.
func TestModuleWithPassiveDataIsLeftAsItIs(t *testing.T) {
	ctx := context.Background()
	passive := []byte{1, 3, 'a', 'b', 'c'}
	m := compileData(t, nativeEngine{}, dataWasm(passive), false)
	if m.data != nil {
		t.Error("the data of a module with a passive segment was taken out")
	}
	inst, err := m.Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close(ctx)
	if got := bytesAt(t, inst.(*nativeInstance), 5); got != "hello" {
		t.Errorf("the data reads %q, want %q", got, "hello")
	}
}

// TestPreparedModuleFromCacheHasItsData: the rewrite kept on disk comes with the
// module's data beside it, padded to whole WebAssembly pages; a data file that is not
// (cut short, say) is not used but written again.
func TestPreparedModuleFromCacheHasItsData(t *testing.T) {
	dir := t.TempDir()
	wasm := dataWasm()
	want, err := instrument.Data(wasm)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		p, err := prepare(wasm, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		if p.Data != nil || p.dataFile == nil || p.dataFile.Name() != filepath.Join(dir, dataFile) {
			t.Fatalf("%s: the data is %d bytes in the result and in file %v, want it in %s", what, len(p.Data), p.dataFile, dataFile)
		}
		got, err := io.ReadAll(p.dataFile)
		if err != nil {
			t.Fatal(err)
		}
		if len(got)%dataPad != 0 || !bytes.Equal(got[:len(want)], want) || bytes.Count(got[len(want):], []byte{0}) != len(got)-len(want) {
			t.Errorf("%s: the data file holds %d bytes, want the %d of the data padded with zeros to a multiple of %d", what, len(got), len(want), dataPad)
		}
	}
	check("rewritten")
	check("from the cache")
	if err := os.WriteFile(filepath.Join(dir, dataFile), want, 0o600); err != nil {
		t.Fatal(err)
	}
	check("the data file cut short")
}
