package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// jsInteropSummary is the line of JSON testdata/jsinterop/interop.mjs prints on success.
type jsInteropSummary struct {
	OK      bool   `json:"ok"`
	Extism  string `json:"extism"`
	Node    string `json:"node"`
	Plugins map[string]struct {
		ABI    int      `json:"abi"`
		Tools  []string `json:"tools"`
		Models []string `json:"models"`
	} `json:"plugins"`
	Calc      float64           `json:"calc"`
	Errors    map[string]string `json:"errors"`
	Notes     []string          `json:"notes"`
	State     map[string]any    `json:"state"`
	Chunks    []string          `json:"chunks"`
	Text      string            `json:"text"`
	HostCalls map[string]int    `json:"hostCalls"`
	MS        int               `json:"ms"`
}

// TestExtismJSSDKRunsOurPlugins runs plugins built with the Go SDK under a host nobody
// here wrote: the Extism JavaScript SDK on Node, with terrarium:host/v1 implemented in
// JavaScript from ABI.md (testdata/jsinterop/interop.mjs). It installs the pinned
// package, so it runs only with TERRARIUM_NPM_TESTS=1 (as .ci/run sets it); a registry
// that cannot be reached then fails it.
func TestExtismJSSDKRunsOurPlugins(t *testing.T) {
	dir, node := testenv.NPMInstall(t, filepath.Join("testdata", "jsinterop"))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	var wasmPaths []string
	for _, p := range []string{"calculator", "scratchpad", "offline"} {
		wasmPaths = append(wasmPaths, pluginbuild.ForTest(t, filepath.Join("..", "plugins", p)))
	}

	cmd := exec.CommandContext(ctx, node, append([]string{"interop.mjs"}, wasmPaths...)...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	err := cmd.Run()
	out, errOut := o.Bytes(), e.Bytes()
	if err != nil {
		t.Fatalf("node interop.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	t.Logf("node interop.mjs: %v", time.Since(start).Round(time.Millisecond))

	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	var s jsInteropSummary
	if err := json.Unmarshal([]byte(last), &s); err != nil {
		t.Fatalf("the summary line %q is not JSON: %v\nstderr:\n%s", last, err, errOut)
	}
	t.Logf("summary: %s", last)

	// The script checks everything itself; these checks make sure it checked what this
	// test is about.
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "package.json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	if !s.OK {
		t.Errorf("summary: ok is false")
	}
	if want := pkg.Dependencies["@extism/extism"]; s.Extism != want {
		t.Errorf("ran @extism/extism %q, want exactly the version package.json pins, %q", s.Extism, want)
	}
	for _, name := range []string{"calculator", "scratchpad", "offline"} {
		if p, ok := s.Plugins[name]; !ok || p.ABI != 1 {
			t.Errorf("plugin %s: %+v (present %v), want ABI 1", name, p, ok)
		}
	}
	if s.Calc != 9 {
		t.Errorf("calc (1+2)*3 = %v, want 9", s.Calc)
	}
	if s.Errors["badExpression"] != "invalid_input" {
		t.Errorf("an invalid expression gave %q, want invalid_input", s.Errors["badExpression"])
	}
	if got, want := strings.Join(s.Notes, "|"), "first note|second note"; got != want {
		t.Errorf("notes %q, want %q", got, want)
	}
	if s.State["owner"] != "js" || s.State["scratchpad"] == nil {
		t.Errorf("the JS session's state is %v, want the owner key kept and the notes added", s.State)
	}
	if s.HostCalls["state_get"] == 0 || s.HostCalls["state_set"] == 0 || s.HostCalls["stream"] == 0 {
		t.Errorf("host function calls %v, want state_get, state_set and stream called", s.HostCalls)
	}
	if s.Text != "echo: hello from js" || strings.Join(s.Chunks, "") != s.Text || len(s.Chunks) < 2 {
		t.Errorf("generated %q from chunks %q, want \"echo: hello from js\" streamed in several chunks", s.Text, s.Chunks)
	}
}
