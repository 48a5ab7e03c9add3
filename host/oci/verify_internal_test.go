package oci

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
)

// newKey makes an ECDSA P-256 key, as cosign generate-key-pair does, and its PEM
// public key.
func newKey(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return k, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// simpleSigning signs a cosign simple-signing payload claiming d with k.
func simpleSigning(t *testing.T, k *ecdsa.PrivateKey, d digest.Digest) foundSignature {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"critical": map[string]any{
		"identity": map[string]string{"docker-reference": "127.0.0.1:5000/plugins/weather"},
		"image":    map[string]string{"docker-manifest-digest": d.String()},
		"type":     "cosign container image signature"}, "optional": nil})
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, k, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return foundSignature{Format: formatSimpleSigning, Payload: payload, Signature: base64.StdEncoding.EncodeToString(sig)}
}

// TestSimpleSigningChecksTheDigestSigned refuses a signature made by a trusted key
// for another artifact, replayed on this one: what the payload claims counts, not
// only that the key signed it.
func TestSimpleSigningChecksTheDigestSigned(t *testing.T) {
	k, pub := newKey(t)
	v, err := Policy{Keys: []string{pub}}.Verifier("the test", "")
	if err != nil {
		t.Fatal(err)
	}
	ref := Reference{Registry: "127.0.0.1:5000", Repository: "plugins/weather", Tag: "1"}
	this, other := digest.FromString("this"), digest.FromString("other")
	if _, err := v.verify(ref, this, []foundSignature{simpleSigning(t, k, this)}); err != nil {
		t.Fatalf("a signature of this manifest: %v", err)
	}
	_, err = v.verify(ref, this, []foundSignature{simpleSigning(t, k, other)})
	if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), "not "+this.String()) {
		t.Fatalf("another manifest's signature: %v, want ErrSignature saying what it signs", err)
	}
	altered := simpleSigning(t, k, this)
	altered.Payload = []byte(strings.Replace(string(altered.Payload), "weather", "weathex", 1))
	if _, err := v.verify(ref, this, []foundSignature{altered}); !errors.Is(err, ErrSignature) {
		t.Fatalf("an altered payload: %v, want ErrSignature", err)
	}
	garbage := foundSignature{Format: formatBundle, Bundle: []byte(`{"mediaType": 5}`)}
	if _, err := v.verify(ref, this, []foundSignature{garbage}); !errors.Is(err, ErrSignature) {
		t.Fatalf("a garbage bundle: %v, want ErrSignature", err)
	}
}

// TestPolicyErrors refuses policies that cannot be checked, naming whose they are.
func TestPolicyErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "not-a-key.pub"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Keys: []string{"missing.pub"}}, "keys[0]: neither a PEM public key nor a readable key file"},
		{Policy{Keys: []string{"not-a-key.pub"}}, "keys[0]: not a PEM public key"},
		{Policy{Identities: []Identity{{Subject: "a@example.com", Issuer: "https://issuer"}}}, "identities need a trustedRoot"},
		{Policy{TrustedRoot: "root.json"}, "a trusted root without identities"},
		{Policy{Identities: []Identity{{Subject: "a@example.com"}}, TrustedRoot: "missing.json"}, "trustedRoot"},
	} {
		_, err := c.p.Verifier("tenant acme", dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tenant acme") {
			t.Errorf("%+v: %v, want an error of tenant acme saying %q", c.p, err, c.want)
		}
	}
	if v, err := (Policy{}).Verifier("none", dir); v != nil || err != nil {
		t.Fatalf("the zero policy: %v, %v; want nothing to check", v, err)
	}
}

// TestParseArtifactRefuses refuses manifests that are not one plugin module.
func TestParseArtifactRefuses(t *testing.T) {
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	p, err := pack(wasm, Info{Name: "x"}, "x.wasm", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ref := Reference{Registry: "r", Repository: "x", Tag: "1"}
	if a, err := parseArtifact(ref, p.manifest); err != nil || a.Info.Name != "x" || a.Module.Digest != digest.FromBytes(wasm) {
		t.Fatalf("a packed plugin: %+v, %v", a, err)
	}
	layer := `{"mediaType":"application/wasm","digest":"` + digest.FromBytes(wasm).String() + `","size":8}`
	for _, c := range []struct{ manifest, want string }{
		{`not json`, "not JSON"},
		{`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json"}`, "not an image manifest"},
		{`{"schemaVersion":2,"layers":[]}`, "want one layer of media type application/wasm"},
		{`{"schemaVersion":2,"layers":[` + layer + `,` + layer + `]}`, "want one layer"},
		{`{"schemaVersion":2,"layers":[{"mediaType":"application/wasm","digest":"sha256:abc","size":8}]}`, "not a SHA-256"},
		{`{"schemaVersion":2,"layers":[{"mediaType":"application/wasm","digest":"` + digest.FromBytes(wasm).String() + `","size":1099511627776}]}`, "size"},
		{`{"schemaVersion":2,"layers":[` + layer + `],"annotations":{"dev.terrarium.plugin":"{"}}`, "annotation"},
	} {
		_, err := parseArtifact(ref, []byte(c.manifest))
		if !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrArtifact saying %q", c.manifest, err, c.want)
		}
	}
}

// FuzzParseArtifact checks that no manifest makes parseArtifact panic, and that what
// it accepts has one module of a size it may fetch.
func FuzzParseArtifact(f *testing.F) {
	p, _ := pack([]byte("\x00asm\x01\x00\x00\x00"), Info{Name: "x"}, "x.wasm", time.Unix(0, 0))
	f.Add(p.manifest)
	f.Add([]byte(`{"schemaVersion":2,"layers":[{"mediaType":"application/wasm","digest":"sha256:abc","size":8}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := parseArtifact(Reference{Registry: "r", Repository: "x", Tag: "1"}, raw)
		if err != nil {
			return
		}
		if a.Module.Size <= 0 || a.Module.Size > maxModuleBytes || a.Module.MediaType != MediaTypeWasm || a.Digest != digest.FromBytes(raw) {
			t.Fatalf("accepted %+v", a.Module)
		}
	})
}
