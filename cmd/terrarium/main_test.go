package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

func terrarium(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPluginBuild(t *testing.T) {
	out := filepath.Join(t.TempDir(), "calc.wasm")
	code, stdout, stderr := terrarium(t, "plugin", "build", "../../plugins/calculator", "-o", out)
	if code != exitOK || strings.TrimSpace(stdout) != out || !strings.Contains(stderr, "built in") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if data, err := os.ReadFile(out); err != nil || !bytes.HasPrefix(data, []byte("\x00asm")) {
		t.Errorf("%s is not a wasm module: %v", out, err)
	}
	code, _, stderr = terrarium(t, "plugin", "build", "testdata/badplugin")
	if code != exitFailed || !strings.Contains(stderr, "undefinedThing") {
		t.Errorf("broken build: exit %d, %s", code, stderr)
	}
	code, _, stderr = terrarium(t, "plugin", "build", "testdata/notaplugin")
	if code != exitFailed || !strings.Contains(stderr, "does not export terrarium_describe") {
		t.Errorf("a build that is no plugin: exit %d, %s", code, stderr)
	}
}

func TestPluginInspect(t *testing.T) {
	calc := pluginbuild.ForTest(t, "../../plugins/calculator")
	code, stdout, _ := terrarium(t, "plugin", "inspect", calc)
	for _, want := range []string{"plugin       calculator 1.0.0 (ABI 1)", "tool         /tool/calculator/calc", "sha256", "terrarium:host/v1: ", "exports      _initialize, terrarium_call_tool"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, stdout)
		}
	}
	if code != exitOK {
		t.Errorf("exit %d", code)
	}
	code, stdout, _ = terrarium(t, "plugin", "inspect", "--json", calc)
	var got struct {
		SHA256     string
		Size       int
		Descriptor struct{ Name string }
		Imports    []string
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK || got.Descriptor.Name != "calculator" || len(got.SHA256) != 64 || got.Size == 0 || len(got.Imports) == 0 {
		t.Errorf("inspect --json: exit %d, %v, %+v", code, err, got)
	}
	code, _, stderr := terrarium(t, "plugin", "inspect", "no-such-file.wasm")
	if code != exitFailed || !strings.Contains(stderr, "no-such-file.wasm") {
		t.Errorf("missing file: exit %d, %s", code, stderr)
	}
}

func TestPluginTest(t *testing.T) {
	scratch := pluginbuild.ForTest(t, "../../plugins/scratchpad")
	code, stdout, stderr := terrarium(t, "plugin", "test", scratch, "--state", "write")
	if code != exitOK || !strings.Contains(stdout, "conforms") || !strings.Contains(stderr, "tool note: valid input") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	broken := pluginbuild.ForTest(t, "../../host/testdata/misbehave")
	code, stdout, _ = terrarium(t, "plugin", "test", "--json", "--config", "mode=liar", broken)
	var rep struct {
		Passed  bool
		Results []struct{ Check, Result, Detail string }
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitFailed || rep.Passed {
		t.Fatalf("broken plugin: exit %d, %v\n%s", code, err, stdout)
	}
	manifest := filepath.Join(t.TempDir(), "m.json")
	os.WriteFile(manifest, []byte(`{"state": "write", "timeout": "5s", "config": {"mode": "acceptsinvalid"}}`), 0o644)
	code, stdout, _ = terrarium(t, "plugin", "test", broken, "--manifest", manifest)
	if code != exitFailed || !strings.Contains(stdout, "accepted an input its schema forbids") || !strings.Contains(stdout, "DOES NOT CONFORM") {
		t.Errorf("manifest file: exit %d\n%s", code, stdout)
	}
	os.WriteFile(manifest, []byte(`{"stat": "write"}`), 0o644)
	if code, _, stderr := terrarium(t, "plugin", "test", broken, "--manifest", manifest); code != exitUsage || !strings.Contains(stderr, `unknown field "stat"`) {
		t.Errorf("bad manifest: exit %d, %s", code, stderr)
	}
	// A manifest that reads but grants nonsense is the command line's fault too.
	if code, _, stderr := terrarium(t, "plugin", "test", broken, "--state", "root"); code != exitUsage || !strings.Contains(stderr, `state access "root"`) {
		t.Errorf("bad grant: exit %d, %s", code, stderr)
	}
	// A failure's detail is printed whole, and -v shows the plugin's log lines.
	code, stdout, stderr = terrarium(t, "plugin", "test", broken, "-v", "--config", "mode=rejectsvalid")
	if code != exitFailed || !strings.Contains(stdout, "FAILURES") || !strings.Contains(stdout, "narrow the schema (enum, pattern, bounds) or give examples of meaningful values") {
		t.Errorf("failure detail: exit %d\n%s", code, stdout)
	}
	if !strings.Contains(stderr, "plugin loaded") {
		t.Errorf("-v shows no log lines:\n%s", stderr)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"plugin"}, {"plugin", "melt"}, {"plugin", "test"}, {"plugin", "test", "a.wasm", "b.wasm"}, {"plugin", "test", "--config", "novalue", "a.wasm"}} {
		if code, _, stderr := terrarium(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if code, _, stderr := terrarium(t, "help"); code != exitOK || !strings.Contains(stderr, "plugin build") {
		t.Errorf("help: %d %s", code, stderr)
	}
}

// TestBinary builds the command and runs it as a user would, from the module root.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := filepath.Join(t.TempDir(), "terrarium")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "plugin", "build", "plugins/clock")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("plugin build: %v", err)
	}
	cmd = exec.Command(bin, "plugin", "test", strings.TrimSpace(string(out)))
	cmd.Dir = "../.."
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "conforms") {
		t.Errorf("plugin test: %v\n%s", err, out)
	}
}
