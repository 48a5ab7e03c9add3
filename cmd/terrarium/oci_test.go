package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// TestPluginPushInspectPullTest pushes a plugin to a registry, inspects it there
// without pulling it, pulls it, and runs the conformance suite on what operators
// will pull; serve refuses an agent file naming it by a floating tag.
func TestPluginPushInspectPullTest(t *testing.T) {
	reg := testenv.StartRegistry(t)
	dir := t.TempDir()
	module := pluginbuild.WasmForTest(t, "../../plugins/clock")
	wasm := filepath.Join(dir, "clock.wasm")
	if err := os.WriteFile(wasm, module, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := []string{"--plugin-cache", filepath.Join(dir, "cache")}
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of whoever runs the test

	code, stdout, stderr := terrarium(t, "plugin", "push", wasm, reg.Addr+"/plugins/clock:1.0.0")
	pinned := strings.TrimSpace(stdout)
	if code != exitOK || !strings.HasPrefix(pinned, "oci://"+reg.Addr+"/plugins/clock:1.0.0@sha256:") {
		t.Fatalf("push: exit %d, %q, %s", code, stdout, stderr)
	}

	code, stdout, stderr = terrarium(t, "plugin", "inspect", "oci://"+reg.Addr+"/plugins/clock:1.0.0")
	for _, want := range []string{pinned, "plugin       clock", "tool         /tool/clock/", "asks for"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("inspect: exit %d, no %q in\n%s%s", code, want, stdout, stderr)
		}
	}

	out := filepath.Join(dir, "pulled.wasm")
	code, _, stderr = terrarium(t, append([]string{"plugin", "pull", pinned, "-o", out}, cache...)...)
	if b, err := os.ReadFile(out); code != exitOK || err != nil || !bytes.Equal(b, module) {
		t.Fatalf("pull: exit %d, %v, %s", code, err, stderr)
	}

	code, stdout, stderr = terrarium(t, append([]string{"plugin", "test", pinned}, cache...)...)
	if code != exitOK || !strings.Contains(stderr, "pulled "+pinned) {
		t.Fatalf("test: exit %d\n%s%s", code, stdout, stderr)
	}

	agents := filepath.Join(dir, "agents")
	if err := os.Mkdir(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	agentFile := "name: a\nmodel: {name: clock/x}\nsnapshots: {store: none}\nplugins:\n  - path: oci://" + reg.Addr + "/plugins/clock:1.0.0\n"
	if err := os.WriteFile(filepath.Join(agents, "a.yaml"), []byte(agentFile), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = terrarium(t, append(append([]string{"serve", "-addr", "127.0.0.1:0", "-data", filepath.Join(dir, "data")}, cache...), agents)...)
	if code != exitFailed || !strings.Contains(stderr, "floating tag") || !strings.Contains(stderr, "a.yaml:5") {
		t.Errorf("serve of a floating tag: exit %d, %s", code, stderr)
	}
}

// TestPluginPushRefuses refuses what cannot be pushed: a digest in the destination,
// a module that does not describe itself.
func TestPluginPushRefuses(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.wasm")
	if err := os.WriteFile(junk, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := terrarium(t, "plugin", "push", junk, "127.0.0.1:1/a@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"); code != exitUsage || !strings.Contains(stderr, "without a digest") {
		t.Errorf("push to a digest: exit %d, %s", code, stderr)
	}
	if code, _, stderr := terrarium(t, "plugin", "push", junk, "127.0.0.1:1/a:1"); code != exitFailed || !strings.Contains(stderr, "not pushed") {
		t.Errorf("push of junk: exit %d, %s", code, stderr)
	}
	if code, _, stderr := terrarium(t, "plugin", "push", junk, "nonsense"); code != exitUsage {
		t.Errorf("push to nonsense: exit %d, %s", code, stderr)
	}
}
