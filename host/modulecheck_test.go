package host_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/internal/wasmtest"
)

func TestCheckModule(t *testing.T) {
	for _, tc := range []struct {
		name             string
		imports, exports []string
		says             []string // empty: the module passes
	}{
		{"reactor", []string{"extism:host/env.alloc", "terrarium:host/v1.log"}, []string{"terrarium_describe", "terrarium_call_tool"}, nil},
		{"command", nil, []string{"_start", "terrarium_describe"}, []string{"command module (it exports _start)", "-buildmode=c-shared"}},
		{"refused kernel functions", []string{"extism:host/env.alloc", "extism:host/env.http_request", "extism:host/env.config_get", "extism:host/env.log_info"},
			[]string{"terrarium_describe"}, []string{"Extism kernel functions Terrarium does not provide (http_request, config_get, log_info)", "terrarium:host/v1"}},
		{"foreign imports", []string{"env.printf", "terrarium:host/v1.log", "wasi_snapshot_preview1.fd_write"}, []string{"terrarium_describe"},
			[]string{"imports functions from modules no host provides (env.printf)", "define it"}},
		{"no describe", nil, []string{"terrarium_call_tool"}, []string{"does not export terrarium_describe"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := host.CheckModule(wasmtest.Module(tc.imports, tc.exports))
			if len(tc.says) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, host.ErrNotAPlugin) {
				t.Fatalf("err = %v, want ErrNotAPlugin", err)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err = %v, want it to say %q", err, s)
				}
			}
			// Load refuses it before running anything.
			h, _ := newHost(t)
			if _, err := h.Load(context.Background(), wasmtest.Module(tc.imports, tc.exports), host.Manifest{}); !errors.Is(err, host.ErrLoad) || !errors.Is(err, host.ErrNotAPlugin) {
				t.Errorf("Load: %v", err)
			}
		})
	}
	// Every first-party build passes.
	for _, dir := range []string{"../plugins/calculator", "testdata/misbehave", "testdata/hostcheck"} {
		if err := host.CheckModule(wasm(t, dir)); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
	good := wasmtest.Module(nil, []string{"terrarium_describe"})
	for _, bad := range [][]byte{nil, []byte("MZ\x90\x00"), good[:len(good)-3], append([]byte("\x00asm\x02\x00\x00\x00"), good[8:]...),
		append(append([]byte{}, good[:8]...), 2, 0x80, 0x80, 0x80, 0x80, 0x10)} {
		if err := host.CheckModule(bad); !errors.Is(err, host.ErrNotAPlugin) {
			t.Errorf("CheckModule(%q) = %v, want ErrNotAPlugin", bad, err)
		}
	}
}

// A module importing a table or a global, which no host provides, is refused at load
// naming the import, where an engine would fail it only when instantiating it.
func TestCheckModuleRefusesOtherImports(t *testing.T) {
	good := wasmtest.Module(nil, []string{"terrarium_describe"})
	noImports := []byte{0x7f, 2, 1, 0} // the type section's end, then the import section: one byte, no import
	if bytes.Count(good, noImports) != 1 {
		t.Fatalf("the module's import section is not where the test expects it: % x", good)
	}
	for _, c := range []struct {
		kind  string
		entry []byte // the import's kind and type
		says  string
	}{
		{"table", []byte{1, 0x70, 0, 0}, "a table (env.t)"},
		{"global", []byte{3, 0x7f, 0}, "a global (env.t)"},
	} {
		entry := append([]byte{1, 3, 'e', 'n', 'v', 1, 't'}, c.entry...)
		section := append([]byte{0x7f, 2, byte(len(entry))}, entry...)
		err := host.CheckModule(bytes.Replace(good, noImports, section, 1))
		if !errors.Is(err, host.ErrNotAPlugin) || !strings.Contains(err.Error(), "it imports "+c.says+", which no host provides") {
			t.Errorf("a module importing a %s: %v, want ErrNotAPlugin naming it", c.kind, err)
		}
	}
}

// FuzzCheckModule feeds the module reader bytes it did not expect: it must answer,
// never panic or loop.
func FuzzCheckModule(f *testing.F) {
	f.Add(wasmtest.Module([]string{"extism:host/env.alloc"}, []string{"terrarium_describe"}))
	f.Add(wasmtest.Module(nil, []string{"_start"}))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x05\x01\x00\x00\x01\x70"))
	f.Add(wasmtest.Describer(`{"abi":1,"name":"m"}`, wasmtest.MemoryImported))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		host.CheckModule(wasm)
	})
}
