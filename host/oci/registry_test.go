package oci_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/terrarium-ai/terrarium/host/oci"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

var quiet = oci.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// module is a stand-in module for tests of the registry's side only: what is pushed
// and pulled is bytes.
var module = append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte("terrarium"), 1000)...)

var info = oci.Info{Name: "weather", Version: "1.0.0", ABI: 1, Kinds: []string{"tool"}, Tools: []string{"forecast"}}

// ref parses a reference or fails the test.
func ref(t testing.TB, s string) oci.Reference {
	t.Helper()
	r, err := oci.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newPuller returns a puller with a cache of its own in a temporary directory.
func newPuller(t testing.TB, opts ...oci.PullerOption) (*oci.Puller, string) {
	t.Helper()
	dir := t.TempDir()
	p, err := oci.NewPuller(append([]oci.PullerOption{oci.WithCacheDir(dir), quiet, noCredentials(t)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// noCredentials keeps the tests from the Docker config of whoever runs them.
func noCredentials(t testing.TB) oci.PullerOption {
	t.Helper()
	c, err := oci.NewClient(oci.WithCredentials(emptyStore{}))
	if err != nil {
		t.Fatal(err)
	}
	return oci.WithClient(c)
}

// push pushes module to the registry as repo:tag and returns the pinned reference.
func push(t testing.TB, reg *testenv.Registry, repoTag string, wasm []byte) oci.Reference {
	t.Helper()
	c, err := oci.NewClient(oci.WithCredentials(emptyStore{}))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := c.Push(t.Context(), ref(t, reg.Addr+"/"+repoTag), wasm, info)
	if err != nil {
		t.Fatal(err)
	}
	return pinned
}

// TestPushPullRoundTrip pushes a module, pulls it by digest, and pulls it again with
// the registry stopped, from the cache alone.
func TestPushPullRoundTrip(t *testing.T) {
	reg := testenv.StartRegistry(t)
	pinned := push(t, reg, "plugins/weather:1.0.0", module)
	if !pinned.Pinned() || pinned.Tag != "1.0.0" {
		t.Fatalf("push returned %s, want the tag pinned to a digest", pinned)
	}
	p, _ := newPuller(t)
	got, err := p.Pull(t.Context(), pinned, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Module, module) || got.Cached || got.Digest != pinned.Digest {
		t.Fatalf("pulled %d bytes (cached %v, digest %s), want the %d pushed, from the registry, %s", len(got.Module), got.Cached, got.Digest, len(module), pinned.Digest)
	}
	if got.Info == nil || got.Info.Name != "weather" || got.Info.Tools[0] != "forecast" {
		t.Fatalf("info %+v, want the one pushed", got.Info)
	}
	if b, err := os.ReadFile(got.Path); err != nil || !bytes.Equal(b, module) {
		t.Fatalf("the cached file %s: %v", got.Path, err)
	}

	reg.Stop()
	again, err := p.Pull(t.Context(), pinned, nil)
	if err != nil {
		t.Fatalf("pulling a cached pinned plugin with the registry down: %v", err)
	}
	if !again.Cached || !bytes.Equal(again.Module, module) {
		t.Fatalf("cached %v, %d bytes: want the module from the cache", again.Cached, len(again.Module))
	}
}

// TestFloatingTags refuses a tag without a digest, unless floating tags are allowed:
// then it is resolved to the digest pushed, which is logged.
func TestFloatingTags(t *testing.T) {
	reg := testenv.StartRegistry(t)
	pinned := push(t, reg, "plugins/weather:1.0.0", module)
	floating := ref(t, reg.Addr+"/plugins/weather:1.0.0")

	p, _ := newPuller(t)
	_, err := p.Pull(t.Context(), floating, nil)
	if !errors.Is(err, oci.ErrFloatingTag) || !strings.Contains(err.Error(), floating.String()) {
		t.Fatalf("pulling a floating tag: %v, want ErrFloatingTag naming it", err)
	}

	var log bytes.Buffer
	p, _ = newPuller(t, oci.AllowFloatingTags(), oci.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	got, err := p.Pull(t.Context(), floating, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != pinned.Digest || !strings.Contains(log.String(), pinned.Digest.String()) {
		t.Fatalf("resolved to %s, logged %q: want %s, logged", got.Digest, log.String(), pinned.Digest)
	}
}

// TestTamperedBlobRefused changes the module's blob in the registry's storage: the
// pull is refused, naming the reference and the digest, and nothing is cached.
func TestTamperedBlobRefused(t *testing.T) {
	reg := testenv.StartRegistry(t)
	pinned := push(t, reg, "plugins/weather:1.0.0", module)
	layer := digest.FromBytes(module)
	blob := filepath.Join(reg.Storage, "docker/registry/v2/blobs/sha256", layer.Encoded()[:2], layer.Encoded(), "data")
	tampered := bytes.Clone(module)
	tampered[len(tampered)-1] ^= 1
	if err := os.WriteFile(blob, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	p, cacheDir := newPuller(t)
	_, err := p.Pull(t.Context(), pinned, nil)
	if !errors.Is(err, oci.ErrDigestMismatch) || !strings.Contains(err.Error(), pinned.String()) || !strings.Contains(err.Error(), layer.String()) {
		t.Fatalf("pulling a tampered module: %v, want ErrDigestMismatch naming %s and %s", err, pinned, layer)
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "blobs/sha256", layer.Encoded())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the tampered module was cached: %v", err)
	}
}

// TestTamperedCacheRefetched changes a cached module: the next pull notices, and
// fetches it again from the registry; with the registry down it fails, naming the
// digest.
func TestTamperedCacheRefetched(t *testing.T) {
	reg := testenv.StartRegistry(t)
	pinned := push(t, reg, "plugins/weather:1.0.0", module)
	p, _ := newPuller(t)
	got, err := p.Pull(t.Context(), pinned, nil)
	if err != nil {
		t.Fatal(err)
	}
	tamper := func() {
		if err := os.WriteFile(got.Path, []byte("not the module"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tamper()
	again, err := p.Pull(t.Context(), pinned, nil)
	if err != nil || !bytes.Equal(again.Module, module) || again.Cached {
		t.Fatalf("pulling over a tampered cache: %v (cached %v), want the module fetched again", err, again != nil && again.Cached)
	}
	tamper()
	reg.Stop()
	_, err = p.Pull(t.Context(), pinned, nil)
	if err == nil || !strings.Contains(err.Error(), pinned.String()) {
		t.Fatalf("pulling over a tampered cache, registry down: %v, want an error naming %s", err, pinned)
	}
}

// TestPinnedDigestNotInRegistry pulls a digest the registry does not hold.
func TestPinnedDigestNotInRegistry(t *testing.T) {
	reg := testenv.StartRegistry(t)
	push(t, reg, "plugins/weather:1.0.0", module)
	missing := ref(t, reg.Addr+"/plugins/weather:1.0.0@"+digest.FromString("another").String())
	p, _ := newPuller(t)
	if _, err := p.Pull(t.Context(), missing, nil); !errors.Is(err, oci.ErrNotFound) {
		t.Fatalf("pulling an unknown digest: %v, want ErrNotFound", err)
	}
}

// TestUnreachableRegistryIsBounded pulls from an address nothing listens on: the
// pull fails, within its timeout.
func TestUnreachableRegistryIsBounded(t *testing.T) {
	p, _ := newPuller(t, oci.WithTimeout(5*1e9))
	r := ref(t, "127.0.0.1:1/plugins/weather@"+digest.FromBytes(module).String())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := p.Pull(ctx, r, nil); err == nil || !strings.Contains(err.Error(), r.String()) {
		t.Fatalf("pulling from nowhere: %v, want an error naming the reference", err)
	}
}
