package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

func TestPluginKeygenSignVerify(t *testing.T) {
	dir := t.TempDir()
	module := pluginbuild.WasmForTest(t, "../../plugins/offline")
	wasm := filepath.Join(dir, "offline.wasm")
	if err := os.WriteFile(wasm, module, 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "author.key")
	code, pub, stderr := terrarium(t, "plugin", "keygen", key)
	if code != exitOK || !strings.HasPrefix(pub, "ed25519:") {
		t.Fatalf("keygen: exit %d, %q, %s", code, pub, stderr)
	}
	if info, err := os.Stat(key); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the private key's file: %v, %v", info, err)
	}
	if code, _, stderr := terrarium(t, "plugin", "keygen", key); code != exitFailed || !strings.Contains(stderr, "exists") {
		t.Errorf("keygen over an existing key: exit %d, %s", code, stderr)
	}

	// Serving the plugin while trusting the key refuses it until it is signed.
	agents := filepath.Join(dir, "agents")
	if err := os.Mkdir(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	agentFile := "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n  - path: ../offline.wasm\n"
	if err := os.WriteFile(filepath.Join(agents, "a.yaml"), []byte(agentFile), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = terrarium(t, "serve", "-addr", "127.0.0.1:0", "-trusted-key", key+".pub", agents)
	if code != exitFailed || !strings.Contains(stderr, "the plugin is not signed") {
		t.Errorf("serve of an unsigned plugin: exit %d, %s", code, stderr)
	}

	if code, stdout, stderr := terrarium(t, "plugin", "sign", wasm, "-key", key); code != exitOK || strings.TrimSpace(stdout) != wasm+".sig" {
		t.Fatalf("sign: exit %d, %s, %s", code, stdout, stderr)
	}
	if code, stdout, stderr := terrarium(t, "plugin", "verify", wasm, "--trusted-key", strings.TrimSpace(pub)); code != exitOK || !strings.Contains(stdout, "signed by "+strings.TrimSpace(pub)) {
		t.Errorf("verify: exit %d, %s, %s", code, stdout, stderr)
	}

	// One byte changed after signing.
	module[len(module)-1] ^= 1
	if err := os.WriteFile(wasm, module, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := terrarium(t, "plugin", "verify", wasm, "--trusted-key", key+".pub"); code != exitFailed || !strings.Contains(stderr, "changed after signing") {
		t.Errorf("verify of a tampered module: exit %d, %s", code, stderr)
	}
	if code, _, stderr := terrarium(t, "plugin", "verify", wasm); code != exitUsage {
		t.Errorf("verify without keys: exit %d, %s", code, stderr)
	}
	if code, _, stderr := terrarium(t, "plugin", "sign", wasm); code != exitUsage || !strings.Contains(stderr, "-key is required") {
		t.Errorf("sign without a key: exit %d, %s", code, stderr)
	}
}
