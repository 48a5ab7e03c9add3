package host_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
)

// tinyModule is a module whose terrarium_describe does nothing: it compiles, but is no
// plugin. Modules of different names differ in their hash.
func tinyModule(name string) []byte {
	return describer(nil, name)
}

// describer is a module importing one function of type () -> () from module.name (none
// when module is nil), exporting a terrarium_describe that does nothing, and holding a
// custom section named custom.
func describer(imports []byte, custom string) []byte {
	section := func(id byte, body []byte) []byte { return append([]byte{id, byte(len(body))}, body...) }
	export := append([]byte{1, byte(len("terrarium_describe"))}, "terrarium_describe"...)
	funcIndex := byte(0)
	if imports != nil {
		funcIndex = 1
	}
	wasm := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00} // magic, version
	wasm = append(wasm, section(1, []byte{1, 0x60, 0, 0})...)      // types: () -> ()
	if imports != nil {
		wasm = append(wasm, section(2, imports)...)
	}
	wasm = append(wasm, section(3, []byte{1, 0})...)                                            // one function of type 0
	wasm = append(wasm, section(7, append(export, 0x00, funcIndex))...)                         // its export
	wasm = append(wasm, section(10, []byte{1, 2, 0, 0x0b})...)                                  // its code: end
	return append(wasm, section(0, append(append([]byte{byte(len(custom))}, custom...), 1))...) // a custom section
}

// cached lists the modules in a compilation cache directory.
func cached(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestCompilationCacheIsCapped: a cache over its limit loses the modules loaded least
// recently, and keeps the one just loaded.
func TestCompilationCacheIsCapped(t *testing.T) {
	dir := t.TempDir()
	h, _ := newHost(t, host.WithCompilationCache(dir), host.WithCompilationCacheLimit(1))
	compile := func(name string) {
		t.Helper()
		_, err := h.Load(context.Background(), tinyModule(name), host.Manifest{})
		if !errors.Is(err, host.ErrLoad) {
			t.Fatalf("loading a module that is no plugin: %v, want ErrLoad", err)
		}
	}
	compile("first")
	first := cached(t, dir)
	if len(first) != 1 {
		t.Fatalf("after one module the cache holds %v", first)
	}
	compile("second")
	if second := cached(t, dir); len(second) != 1 || second[0] == first[0] {
		t.Errorf("after a second module over the limit, the cache holds %v (the first was %s)", second, first[0])
	}
}
