package adder_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/terrarium-ai/terrarium/examples/internal/langtest"
)

// TestCPlugin builds adder/adder.c with clang for freestanding wasm32, runs the conformance
// suite on it and has an agent call it.
func TestCPlugin(t *testing.T) {
	clang := langtest.Need(t, "clang with wasm-ld", func(string) bool {
		_, err := exec.LookPath("wasm-ld")
		return err == nil
	}, "clang")
	out := filepath.Join(t.TempDir(), "adder.wasm")
	langtest.Run(t, clang, "--target=wasm32", "-O2", "-nostdlib", "-Wl,--no-entry", "-Wl,--export-dynamic", "-Wall", "-Werror", "-o", out, "adder/adder.c")
	langtest.Check(t, out, "adder-c/add", `{"a": 2, "b": 40}`, `{"sum":42}`)
}
