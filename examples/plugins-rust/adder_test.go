package adder_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/examples/internal/langtest"
)

// hasWasmStd reports whether the rustc at path has the standard library for
// wasm32-unknown-unknown (rustup's may not; Debian's libstd-rust-dev-wasm32 adds it to
// Debian's).
func hasWasmStd(path string) bool {
	out, err := exec.Command(path, "--print", "sysroot").Output()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib", "wasm32-unknown-unknown"))
	return err == nil
}

// TestRustPlugin builds lib.rs with rustc, no crates, runs the conformance suite on it
// and has an agent call it.
func TestRustPlugin(t *testing.T) {
	rustc := langtest.Need(t, "rustc with the wasm32-unknown-unknown standard library", hasWasmStd, "rustc", "/usr/bin/rustc")
	out := filepath.Join(t.TempDir(), "adder.wasm")
	langtest.Run(t, rustc, "--edition", "2021", "--target", "wasm32-unknown-unknown", "--crate-type", "cdylib", "-O", "-C", "strip=symbols", "-o", out, "lib.rs")
	langtest.Check(t, out, "adder-rust/add", `{"a": 2, "b": 40}`, `{"sum":42}`)
}
