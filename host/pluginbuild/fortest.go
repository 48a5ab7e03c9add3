package pluginbuild

import (
	"context"
	"os"
)

// TB is the part of testing.TB that ForTest uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Context() context.Context
}

// ForTest builds the plugin in dir (see Build) and returns the path of its .wasm file,
// failing the test if the build fails. Within a test binary each plugin is built once.
func ForTest(t TB, dir string, opts ...Option) string {
	t.Helper()
	path, err := Build(t.Context(), dir, opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return path
}

// WasmForTest builds the plugin in dir as ForTest does and returns its module's bytes,
// failing the test if the build or the read fails.
func WasmForTest(t TB, dir string, opts ...Option) []byte {
	t.Helper()
	path := ForTest(t, dir, opts...)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the plugin built from %s: %v", dir, err)
	}
	return b
}
