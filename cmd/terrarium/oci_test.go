package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/host/oci"
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

// TestTenantsSignaturePolicy serves two tenants an agent file naming a registry
// plugin by digest: both load it from one cached copy; a tenant whose policy trusts a
// key refuses it unsigned, naming the tenant's policy.
func TestTenantsSignaturePolicy(t *testing.T) {
	reg := testenv.StartRegistry(t)
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	wasm := filepath.Join(dir, "offline.wasm")
	if err := os.WriteFile(wasm, pluginbuild.WasmForTest(t, "../../plugins/offline"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := terrarium(t, "plugin", "push", wasm, reg.Addr+"/plugins/offline:1")
	if code != exitOK {
		t.Fatalf("push: exit %d, %s", code, stderr)
	}
	agents := filepath.Join(dir, "agents")
	if err := os.Mkdir(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	agentFile := "name: a\nmodel: {name: offline/echo}\nplugins:\n  - path: " + strings.TrimSpace(stdout) + "\n"
	if err := os.WriteFile(filepath.Join(agents, "a.yaml"), []byte(agentFile), 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err := os.WriteFile(filepath.Join(dir, "cosign.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := deploy.ReadDir(agents)
	if err != nil {
		t.Fatal(err)
	}
	deployAll := func(tenants string) error {
		path := filepath.Join(dir, "tenants.yaml")
		if err := os.WriteFile(path, []byte(tenants), 0o644); err != nil {
			t.Fatal(err)
		}
		f := serveFlags{tenants: path, data: t.TempDir(), oci: ociFlags{cacheDir: filepath.Join(dir, "cache")}}
		st, err := deployTenants(t.Context(), files, f, slog.New(slog.DiscardHandler), noop.NewMeterProvider())
		st.close()
		return err
	}
	open := "tenants:\n  - id: one\n    plugins: {offline: {}}\n  - id: two\n    plugins: {offline: {}}\n"
	if err := deployAll(open); err != nil {
		t.Fatal(err)
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "cache/blobs/sha256/*"))
	if len(blobs) != 2 { // the manifest and the module, once
		t.Errorf("the cache holds %d blobs, want the manifest and the module once: %v", len(blobs), blobs)
	}
	err = deployAll(open + "  - id: signed\n    plugins: {offline: {}}\n    signatures: {keys: [cosign.pub]}\n")
	if !errors.Is(err, oci.ErrSignature) || !strings.Contains(err.Error(), "the policy of tenant signed") {
		t.Fatalf("an unsigned plugin for a tenant requiring signatures: %v, want ErrSignature naming its policy", err)
	}
}
