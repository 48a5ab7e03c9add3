// Package langtest builds and checks plugins written in other languages than Go (the
// examples, and what `terrarium plugin new --lang c|rust` writes): each must conform and
// be called by an agent, as a Go plugin is. The toolchains are Debian's: clang and lld
// for C, rustc and libstd-rust-dev-wasm32 for Rust. Without them a test skips, except
// in CI (CI set), where .ci/run installs them and a missing one fails.
package langtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/conformance"
	"github.com/terrarium-ai/terrarium/host/conformance/conformancetest"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

const install = "apt-get install clang lld rustc libstd-rust-dev-wasm32"

// need returns the first of candidates found on PATH (or as a path) for which ok
// holds, or skips the test (fails it in CI).
func need(t testing.TB, what string, ok func(path string) bool, candidates ...string) string {
	t.Helper()
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil && ok(p) {
			return p
		}
	}
	testenv.Need(t, what+" ("+install+")", fmt.Errorf("none of %v is usable", candidates))
	return ""
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// BuildC compiles a C plugin for freestanding wasm32, as a reactor, into a .wasm file
// in a temporary directory, and returns its path.
func BuildC(t testing.TB, src string) string {
	t.Helper()
	clang := need(t, "clang with wasm-ld", func(string) bool {
		_, err := exec.LookPath("wasm-ld")
		return err == nil
	}, "clang")
	out := filepath.Join(t.TempDir(), "plugin.wasm")
	run(t, clang, "--target=wasm32", "-O2", "-nostdlib", "-Wl,--no-entry", "-Wl,--export-dynamic", "-Wall", "-Werror", "-o", out, src)
	return out
}

// BuildRust compiles a Rust plugin (one file, no crates) for wasm32-unknown-unknown
// into a .wasm file in a temporary directory, and returns its path.
func BuildRust(t testing.TB, src string) string {
	t.Helper()
	// rustup's rustc, first on PATH, may lack the wasm32 standard library that
	// Debian's has.
	rustc := need(t, "rustc with the wasm32-unknown-unknown standard library", hasWasmStd, "rustc", "/usr/bin/rustc")
	out := filepath.Join(t.TempDir(), "plugin.wasm")
	run(t, rustc, "--edition", "2021", "--target", "wasm32-unknown-unknown", "--crate-type", "cdylib", "-O", "-C", "strip=symbols", "-o", out, src)
	return out
}

// hasWasmStd reports whether the rustc at path has the standard library for
// wasm32-unknown-unknown.
func hasWasmStd(path string) bool {
	out, err := exec.Command(path, "--print", "sysroot").Output()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib", "wasm32-unknown-unknown"))
	return err == nil
}

// Check requires the plugin in file to conform, then has an agent (the offline model,
// told "/call <tool> <input>") call its tool and requires the answer to hold want.
// offline is the directory of the offline plugin, relative to the test.
func Check(t *testing.T, file, offline, tool, input, want string) {
	t.Helper()
	module, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	conformancetest.Require(t, module, conformance.Options{})

	model, err := os.ReadFile(pluginbuild.ForTest(t, offline))
	if err != nil {
		t.Fatal(err)
	}
	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	for _, m := range [][]byte{model, module} {
		if _, err := h.Load(t.Context(), m, host.Manifest{}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := agent.Generate(t.Context(), r, agent.WithModelName("offline/echo"),
		agent.WithPrompt("/call "+tool+" "+input), agent.WithToolNames(tool))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Text(), want) {
		t.Errorf("the agent's answer %q lacks %q", resp.Text(), want)
	}
}
