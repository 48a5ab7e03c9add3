package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/conformance"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/internal/langtest"
)

// TestPluginNewBuildsConformsAndCalls scaffolds each kind of plugin, builds it, runs
// the conformance suite on it, and calls it with plugin call.
func TestPluginNewBuildsConformsAndCalls(t *testing.T) {
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind, name, input string
		m                 host.Manifest
		flags             []string
		says              string // plugin call's output holds this
	}{
		{"tool", "hello", `{"name": "Ada"}`, host.Manifest{}, nil, `"greeting": "Hello, Ada!"`},
		{"model", "echo", `"hi there"`, host.Manifest{}, nil, `"text": "You said: hi there"`},
		{"handler", "count", `{"point": "turnStart"}`, host.Manifest{State: plugin.StateWrite},
			[]string{"--state", "write", "--session-state", `{"turns": 41}`, "--json"}, `"turns": 42`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "my-"+tc.kind)
			code, stdout, stderr := terrarium(t, "plugin", "new", "my-"+tc.kind, "--"+tc.kind, "--dir", dir, "--replace", checkout)
			if code != exitOK || strings.TrimSpace(stdout) != dir {
				t.Fatalf("plugin new: exit %d\n%s%s", code, stdout, stderr)
			}
			wasmFile := pluginbuild.ForTest(t, dir)
			module, err := os.ReadFile(wasmFile)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := conformance.Run(t.Context(), module, conformance.Options{Manifest: tc.m})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed {
				var table strings.Builder
				rep.WriteTable(&table)
				t.Fatalf("the scaffolded %s plugin does not conform:\n%s", tc.kind, table.String())
			}
			args := append([]string{"plugin", "call", wasmFile, tc.name, tc.input}, tc.flags...)
			code, stdout, stderr = terrarium(t, args...)
			if code != exitOK || !strings.Contains(stdout, tc.says) {
				t.Errorf("plugin call: exit %d, want %q in\n%s%s", code, tc.says, stdout, stderr)
			}
		})
	}
}

func TestPluginNewRefuses(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"Bad Name", "--replace", "../.."}, exitUsage, "plugin name"},
		{[]string{"x", "--lang", "cobol", "--replace", "../.."}, exitUsage, `--lang "cobol": want go, c or rust`},
		{[]string{"x", "--model", "--handler", "--replace", "../.."}, exitUsage, "one of"},
		{[]string{"x", "--replace", t.TempDir()}, exitUsage, "not a Terrarium checkout"},
		{[]string{"x", "--dir", full, "--replace", "../.."}, exitFailed, "is not empty"},
	} {
		code, _, stderr := terrarium(t, append([]string{"plugin", "new"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.says) {
			t.Errorf("plugin new %v: exit %d, want %d saying %q:\n%s", tc.args, code, tc.code, tc.says, stderr)
		}
	}
}

func TestPluginCallErrors(t *testing.T) {
	calc := pluginbuild.ForTest(t, "../../plugins/calculator")
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{calc, "calc", `{"expression": "6*7"}`}, exitOK, "42"},
		{[]string{calc, "calc", `{"expr": "6*7"}`}, exitFailed, "does not match the tool's input schema"},
		{[]string{calc, "calc", `{"expression": "1/0"}`}, exitFailed, "division by zero"},
		{[]string{calc, "nope", `{}`}, exitFailed, "no tool, model or handler of that name"},
		{[]string{calc, "calc", `{not json`}, exitUsage, "not JSON"},
		{[]string{calc, "calc"}, exitUsage, "want 3 arguments"},
		{[]string{calc, "calc", `{}`, "--session-state", "[]"}, exitUsage, "--session-state"},
	} {
		code, stdout, stderr := terrarium(t, append([]string{"plugin", "call"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stdout+stderr, tc.says) {
			t.Errorf("plugin call %v: exit %d, want %d saying %q:\n%s%s", tc.args[1:], code, tc.code, tc.says, stdout, stderr)
		}
	}
	// --json holds the output and the state.
	code, stdout, _ := terrarium(t, "plugin", "call", calc, "calc", `{"expression": "1+1"}`, "--json")
	var res struct {
		Output struct{ Value float64 }
		State  map[string]any
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK || res.Output.Value != 2 || res.State == nil {
		t.Errorf("--json: exit %d, %v, %s", code, err, stdout)
	}
}

// TestScaffoldCopiesAreTheExamples: the C and Rust scaffolds are copies of the example
// plugins (go generate ./cmd/terrarium makes them).
func TestScaffoldCopiesAreTheExamples(t *testing.T) {
	for copy, example := range map[string]string{
		"scaffold/c/plugin.c":  "../../examples/plugins-c/adder/plugin.c",
		"scaffold/rust/lib.rs": "../../examples/plugins-rust/lib.rs",
	} {
		a, errA := os.ReadFile(copy)
		b, errB := os.ReadFile(example)
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("%s is not a copy of %s (%v, %v): run go generate ./cmd/terrarium", copy, example, errA, errB)
		}
	}
}

// TestPluginNewInCAndRust scaffolds a plugin in each language, builds it with the
// language's toolchain, runs the conformance suite and has an agent call it.
func TestPluginNewInCAndRust(t *testing.T) {
	for _, tc := range []struct {
		lang, file string
		build      func(testing.TB, string) string
	}{
		{"c", "plugin.c", langtest.BuildC},
		{"rust", "lib.rs", langtest.BuildRust},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sums")
			name := "sums-" + tc.lang
			code, _, stderr := terrarium(t, "plugin", "new", name, "--lang", tc.lang, "--dir", dir)
			if code != exitOK {
				t.Fatalf("plugin new: exit %d\n%s", code, stderr)
			}
			src := filepath.Join(dir, tc.file)
			if b, err := os.ReadFile(src); err != nil || !strings.Contains(string(b), `"name":"`+name+`"`) && !strings.Contains(string(b), `\"name\":\"`+name+`\"`) {
				t.Fatalf("%s does not name the plugin %s: %v", src, name, err)
			}
			langtest.Check(t, tc.build(t, src), "../../plugins/offline", name+"/add", `{"a": 2, "b": 40}`, `{"sum":42}`)
		})
	}
	if code, _, stderr := terrarium(t, "plugin", "new", "x", "--lang", "rust", "--model", "--dir", t.TempDir()); code != exitUsage || !strings.Contains(stderr, "tool plugin only") {
		t.Errorf("--lang rust --model: exit %d, %s", code, stderr)
	}
}
