package host_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
)

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := host.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func TestSignedPluginLoadsWhereKeysAreRequired(t *testing.T) {
	module := wasm(t, "../plugins/calculator")
	pub, priv := newKey(t)
	h, _ := newHost(t, host.WithTrustedKeys(pub))
	p, err := h.Load(context.Background(), module, host.Manifest{Signature: host.Sign(module, priv)})
	if err != nil {
		t.Fatalf("a plugin signed by a trusted key: %v", err)
	}
	p.Unload(context.Background())

	// A manifest's own trusted keys require a signature on a host that trusts none.
	h2, _ := newHost(t)
	if _, err := h2.Load(context.Background(), module, host.Manifest{TrustedKeys: []string{host.FormatPublicKey(pub)}, Signature: host.Sign(module, priv)}); err != nil {
		t.Fatalf("signed for the manifest's key: %v", err)
	}
}

func TestBadlySignedPluginsAreRefused(t *testing.T) {
	module := wasm(t, "../plugins/calculator")
	pub, priv := newKey(t)
	_, stranger := newKey(t)
	sig := host.Sign(module, priv)

	var altered host.Signature
	if err := json.Unmarshal(sig, &altered); err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(altered.Sig)
	raw[0] ^= 1
	altered.Sig = base64.StdEncoding.EncodeToString(raw)
	alteredSig, _ := json.Marshal(altered)

	tampered := append(bytes.Clone(module), 0) // a byte after the signing
	for _, tc := range []struct {
		name   string
		module []byte
		m      host.Manifest
		says   string
	}{
		{"unsigned", module, host.Manifest{}, "not signed"},
		{"tampered module", tampered, host.Manifest{Signature: sig}, "the module changed after signing"},
		{"untrusted key", module, host.Manifest{Signature: host.Sign(module, stranger)}, "not a trusted key"},
		{"altered signature", module, host.Manifest{Signature: alteredSig}, "does not verify"},
		{"not a signature", module, host.Manifest{Signature: []byte("hello")}, "not a Terrarium plugin signature"},
		{"unsigned, manifest's key", module, host.Manifest{TrustedKeys: []string{host.FormatPublicKey(pub)}}, "not signed"},
		{"bad manifest key", module, host.Manifest{TrustedKeys: []string{"rsa:AAAA"}, Signature: sig}, "trustedKeys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []host.Option{host.WithTrustedKeys(pub)}
			if len(tc.m.TrustedKeys) > 0 {
				opts = nil
			}
			h, r := newHost(t, opts...)
			_, err := h.Load(context.Background(), tc.module, tc.m)
			if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want a load error saying %q", err, tc.says)
			}
			if tc.name != "bad manifest key" && !errors.Is(err, host.ErrSignature) {
				t.Errorf("err = %v, want ErrSignature", err)
			}
			if len(r.Actions()) != 0 {
				t.Errorf("a refused plugin registered %v", r.Actions())
			}
		})
	}
}

func TestLoadFileReadsTheSignatureBeside(t *testing.T) {
	module := wasm(t, "../plugins/calculator")
	pub, priv := newKey(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "calculator.wasm")
	if err := os.WriteFile(path, module, 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ := newHost(t, host.WithTrustedKeys(pub))
	if _, err := h.LoadDir(context.Background(), dir); !errors.Is(err, host.ErrSignature) {
		t.Fatalf("without a .sig file: %v, want ErrSignature", err)
	}
	if err := os.WriteFile(host.SignatureFile(path), host.Sign(module, priv), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.LoadDir(context.Background(), dir); err != nil {
		t.Fatalf("with its .sig file: %v", err)
	}
}

func TestKeysRoundTrip(t *testing.T) {
	pub, priv := newKey(t)
	back, err := host.ParsePublicKey(" " + host.FormatPublicKey(pub) + "\n")
	if err != nil || !back.Equal(pub) {
		t.Errorf("public key: %v, %v", back, err)
	}
	pemKey, err := host.MarshalPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := host.ParsePrivateKey(pemKey); err != nil || !k.Equal(priv) {
		t.Errorf("private key: %v", err)
	}
	for _, bad := range []string{"", "ed25519:", "ed25519:AAAA", "ssh-ed25519 AAAA", "ed25519:" + strings.Repeat("A", 44) + "!"} {
		if _, err := host.ParsePublicKey(bad); err == nil {
			t.Errorf("ParsePublicKey(%q) accepted it", bad)
		}
	}
	if _, err := host.ParsePrivateKey([]byte(host.FormatPublicKey(pub))); err == nil {
		t.Error("ParsePrivateKey accepted a public key")
	}
}
