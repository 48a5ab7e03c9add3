package host_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
)

// tinyModule is a module of one function that does nothing: it compiles, but is no
// plugin. Modules of different names differ in their hash.
func tinyModule(name string) []byte {
	wasm := []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type section: func () -> ()
		0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // code: end
	}
	custom := append([]byte{byte(len(name))}, name...)
	return append(append(wasm, 0x00, byte(len(custom))), custom...) // a custom section
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
