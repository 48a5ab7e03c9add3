package deploy_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/oci"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// pushOffline pushes the offline plugin to a registry started for the test and
// returns its pinned reference, the registry and the module.
func pushOffline(t *testing.T) (oci.Reference, *testenv.Registry, []byte) {
	t.Helper()
	reg := testenv.StartRegistry(t)
	module := pluginbuild.WasmForTest(t, "../plugins/offline")
	c, err := oci.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	r, err := oci.ParseReference(reg.Addr + "/plugins/offline:1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := c.Push(t.Context(), r, module, oci.Info{Name: "offline", ABI: 1})
	if err != nil {
		t.Fatal(err)
	}
	return pinned, reg, module
}

// ociAgent writes an agent file loading the plugin at ref and reads it.
func ociAgent(t *testing.T, ref string) []*deploy.File {
	t.Helper()
	dir := writeFiles(t, map[string]string{
		"a.yaml": "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n  - path: " + ref + "\n",
	})
	files, err := deploy.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// puller returns a puller with a cache of its own.
func puller(t *testing.T, opts ...oci.PullerOption) *oci.Puller {
	t.Helper()
	p, err := oci.NewPuller(append([]oci.PullerOption{oci.WithCacheDir(t.TempDir()), oci.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAgentFileLoadsPluginFromRegistry loads an agent file naming a plugin by digest
// from a registry, then again with the registry stopped: from the cache alone.
func TestAgentFileLoadsPluginFromRegistry(t *testing.T) {
	pinned, reg, module := pushOffline(t)
	files := ociAgent(t, pinned.String())
	p := puller(t)
	var log bytes.Buffer
	d, err := deploy.New(t.Context(), files, deploy.WithPuller(p), deploy.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := d.Agent("a")
	conn, err := a.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := turn(t, conn, say("hello")); !strings.Contains(text, "hello") {
		t.Fatalf("the agent answered %q", text)
	}
	conn.Close()
	if got, want := d.Host().Plugin("offline").SHA256(), sha256.Sum256(module); got != hex.EncodeToString(want[:]) {
		t.Fatalf("loaded module %s, want the one pushed", got)
	}
	if !strings.Contains(log.String(), pinned.Digest.String()) {
		t.Fatalf("the log does not say the digest pulled:\n%s", log.String())
	}
	d.Close(t.Context())

	reg.Stop()
	d, err = deploy.New(t.Context(), files, deploy.WithPuller(p), quiet)
	if err != nil {
		t.Fatalf("starting again with the registry stopped: %v", err)
	}
	d.Close(t.Context())
}

// TestAgentFileFloatingTag refuses a plugin named by a tag alone, naming the file and
// line, unless the puller allows floating tags.
func TestAgentFileFloatingTag(t *testing.T) {
	pinned, _, _ := pushOffline(t)
	floating := pinned.WithDigest("").String()
	files := ociAgent(t, floating)
	_, err := deploy.New(t.Context(), files, deploy.WithPuller(puller(t)), quiet)
	if !errors.Is(err, oci.ErrFloatingTag) || !strings.Contains(err.Error(), "a.yaml:5") {
		t.Fatalf("a floating tag: %v, want ErrFloatingTag at a.yaml:5", err)
	}
	d, err := deploy.New(t.Context(), files, deploy.WithPuller(puller(t, oci.AllowFloatingTags())), quiet)
	if err != nil {
		t.Fatalf("a floating tag, allowed: %v", err)
	}
	d.Close(t.Context())
}

// TestAgentFileBadReference refuses a malformed reference when the file is read, and
// ed25519 keys for a registry plugin, which cosign signs.
func TestAgentFileBadReference(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "name: a\nmodel: {name: offline/echo}\nplugins:\n  - path: oci://127.0.0.1:5000/plugins/offline@sha256:abc\n",
	})
	if _, err := deploy.ReadDir(dir); !errors.Is(err, oci.ErrReference) || !strings.Contains(err.Error(), "a.yaml:4") {
		t.Fatalf("a bad reference: %v, want ErrReference at a.yaml:4", err)
	}
	dir = writeFiles(t, map[string]string{
		"a.yaml": "name: a\nmodel: {name: offline/echo}\nplugins:\n  - path: oci://127.0.0.1:5000/plugins/offline:1\n    grants:\n      trustedKeys: ['ed25519:AAAA']\n",
	})
	if _, err := deploy.ReadDir(dir); err == nil || !strings.Contains(err.Error(), "grants.trustedKeys") || !strings.Contains(err.Error(), "cosign") {
		t.Fatalf("ed25519 keys for a registry plugin: %v, want them refused", err)
	}
}

// TestRegistryPluginSignaturePolicy refuses an unsigned registry plugin where a
// policy requires a signature, naming the reference, the digest and the policy; and
// refuses one where file plugins must be signed (trusted keys) but no policy says how
// to check a registry plugin's.
func TestRegistryPluginSignaturePolicy(t *testing.T) {
	pinned, _, _ := pushOffline(t)
	files := ociAgent(t, pinned.String())
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	policy, err := oci.Policy{Keys: []string{string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}}.Verifier("the test", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = deploy.New(t.Context(), files, deploy.WithPuller(puller(t)), deploy.WithSignaturePolicy(policy), quiet)
	if !errors.Is(err, oci.ErrSignature) {
		t.Fatalf("unsigned, under a policy: %v, want ErrSignature", err)
	}
	for _, want := range []string{pinned.String(), pinned.Digest.String(), "the policy of the test"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}

	pub, _, err := host.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, err = deploy.New(t.Context(), files, deploy.WithPuller(puller(t)), deploy.WithTrustedKeys(pub), quiet)
	if err == nil || !strings.Contains(err.Error(), "cosign") {
		t.Fatalf("trusted keys and no policy: %v, want the registry plugin refused", err)
	}
}
