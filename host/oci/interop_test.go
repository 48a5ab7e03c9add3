package oci_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/oci"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// The clients nobody here wrote, at the versions the tests install (.ci/run installs
// the same first).
const (
	orasPackage   = "oras.land/oras/cmd/oras"
	orasVersion   = "v1.3.6"
	cosignPackage = "github.com/sigstore/cosign/v3/cmd/cosign"
	cosignVersion = "v3.1.3"
)

// run runs a command, failing the test with its output if it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// The clients' own Docker config, empty: no credentials of whoever runs the test.
	cmd.Env = append(append(os.Environ(), "DOCKER_CONFIG="+t.TempDir()), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestOrasPushedPluginLoads pushes a plugin with the oras CLI in the Wasm artifact
// layout, and pulls and loads it with Terrarium.
func TestOrasPushedPluginLoads(t *testing.T) {
	oras := testenv.GoTool(t, orasPackage, orasVersion)
	reg := testenv.StartRegistry(t)
	wasm := pluginbuild.WasmForTest(t, "../../plugins/clock")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "clock.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	config := `{"created":"2026-01-01T00:00:00Z","architecture":"wasm","os":"wasip1","layerDigests":["` + digest.FromBytes(wasm).String() + `"]}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	target := reg.Addr + "/plugins/clock:1.0.0"
	run(t, dir, nil, oras, "push", "--plain-http", "--config", "config.json:"+oci.MediaTypeWasmConfig, target, "clock.wasm:"+oci.MediaTypeWasm)

	p, _ := newPuller(t, oci.AllowFloatingTags())
	pulled, err := p.Pull(t.Context(), ref(t, target), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Info != nil {
		t.Fatalf("info %+v from an artifact without Terrarium's annotation", pulled.Info)
	}
	h, err := host.New(agent.NewRegistry(), host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	plugin, err := h.Load(t.Context(), pulled.Module, host.Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	if plugin.Name() != "clock" {
		t.Fatalf("loaded %q, want clock", plugin.Name())
	}
}

// TestTerrariumPushedPluginPulledByOthers pushes with Terrarium, pulls with the oras
// CLI and copies with skopeo: both get the module byte for byte, oras under the
// file name of the layer's title.
func TestTerrariumPushedPluginPulledByOthers(t *testing.T) {
	oras := testenv.GoTool(t, orasPackage, orasVersion)
	skopeo, err := exec.LookPath("skopeo")
	testenv.Need(t, "Debian's skopeo package (.ci/run installs it)", err)
	reg := testenv.StartRegistry(t)
	pinned := push(t, reg, "plugins/weather:1.0.0", module)
	name := strings.TrimPrefix(pinned.String(), oci.Scheme)

	out := t.TempDir()
	run(t, out, nil, oras, "pull", "--plain-http", name)
	if b, err := os.ReadFile(filepath.Join(out, "weather.wasm")); err != nil || !bytes.Equal(b, module) {
		t.Fatalf("oras pulled weather.wasm: %d bytes (%v), want the %d pushed", len(b), err, len(module))
	}

	dir := filepath.Join(t.TempDir(), "copy")
	// skopeo takes a tag or a digest, not both.
	byDigest := reg.Addr + "/plugins/weather@" + pinned.Digest.String()
	run(t, "", nil, skopeo, "copy", "--src-tls-verify=false", "docker://"+byDigest, "dir:"+dir)
	if b, err := os.ReadFile(filepath.Join(dir, digest.FromBytes(module).Encoded())); err != nil || !bytes.Equal(b, module) {
		t.Fatalf("skopeo copied the module layer: %d bytes (%v), want the %d pushed", len(b), err, len(module))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err != nil || digest.FromBytes(b) != pinned.Digest {
		t.Fatalf("skopeo copied a manifest of digest %s (%v), want %s", digest.FromBytes(b), err, pinned.Digest)
	}
}

// TestCosignSignatures signs a pushed plugin with cosign sign --key, both ways cosign
// attaches signatures (its default, a Sigstore bundle as an OCI referrer, and the
// older simple-signing .sig tag): Terrarium accepts each under a policy trusting the
// key, and refuses each under one trusting another key, naming the reference, the
// digest and the policy. An unsigned plugin is refused too.
func TestCosignSignatures(t *testing.T) {
	cosign := testenv.GoTool(t, cosignPackage, cosignVersion)
	reg := testenv.StartRegistry(t)
	keys := t.TempDir()
	env := []string{"COSIGN_PASSWORD=", "COSIGN_YES=true"}
	run(t, keys, env, cosign, "generate-key-pair", "--output-key-prefix", "author")
	run(t, keys, env, cosign, "generate-key-pair", "--output-key-prefix", "other")
	trusting := func(name string) *oci.Verifier {
		v, err := oci.Policy{Keys: []string{name + ".pub"}}.Verifier("tenant "+name, keys)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	author, other := trusting("author"), trusting("other")

	type warm struct {
		p   *oci.Puller
		ref oci.Reference
	}
	var warmed []warm
	parent := t
	// Without a transparency log, cosign 3 wants --use-signing-config=false beside
	// --tlog-upload=false.
	for _, c := range []struct {
		name, format string
		flags        []string
	}{
		{"bundle as a referrer", "bundle", []string{"--use-signing-config=false"}},
		{"simple signing tag", "simplesigning", []string{"--use-signing-config=false", "--new-bundle-format=false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wasm := append(bytes.Clone(module), c.name...) // a plugin of its own
			pinned := push(t, reg, "plugins/weather:"+strings.ReplaceAll(c.name, " ", "-"), wasm)
			name := strings.TrimPrefix(pinned.String(), oci.Scheme)

			_, err := pullFresh(t, pinned, author)
			if !errors.Is(err, oci.ErrSignature) || !strings.Contains(err.Error(), "not signed") {
				t.Fatalf("unsigned: %v, want ErrSignature saying it is not signed", err)
			}

			args := append([]string{"sign", "--key", "author.key", "--tlog-upload=false", "--allow-http-registry", "--allow-insecure-registry"}, c.flags...)
			run(t, keys, env, cosign, append(args, name)...)

			p, cacheDir := newPuller(parent) // kept past the subtest, for the offline pulls below
			got, err := p.Pull(t.Context(), pinned, author)
			if err != nil {
				t.Fatalf("signed by a trusted key: %v", err)
			}
			kept, _ := filepath.Glob(filepath.Join(cacheDir, "signatures/sha256", pinned.Digest.Encoded(), "*.json"))
			if len(kept) != 1 {
				t.Fatalf("kept signatures %v, want cosign's one", kept)
			}
			if b, _ := os.ReadFile(kept[0]); !strings.Contains(string(b), `"format":"`+c.format+`"`) {
				t.Fatalf("the signature found is not in cosign's %s form: %.200s", c.format, b)
			}
			warmed = append(warmed, warm{p, pinned})
			if !strings.HasPrefix(got.Signer, "key sha256:") {
				t.Fatalf("signer %q, want the key", got.Signer)
			}
			_, err = pullFresh(t, pinned, other)
			if !errors.Is(err, oci.ErrSignature) {
				t.Fatalf("signed by another key: %v, want ErrSignature", err)
			}
			for _, want := range []string{pinned.String(), pinned.Digest.String(), "the policy of tenant other"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not name %q: %v", want, err)
				}
			}
		})
	}

	// With the registry down, a warm cache's signatures are checked offline.
	reg.Stop()
	for _, w := range warmed {
		if _, err := w.p.Pull(t.Context(), w.ref, author); err != nil {
			t.Errorf("%s, signed, cached, registry down: %v", w.ref, err)
		}
		if _, err := w.p.Pull(t.Context(), w.ref, other); err == nil || !strings.Contains(err.Error(), "the policy of tenant other") {
			t.Errorf("%s, cached, registry down, another key trusted: %v, want a refusal naming the policy", w.ref, err)
		}
	}
}

// pullFresh pulls into a cache of its own, under policy.
func pullFresh(t *testing.T, r oci.Reference, policy *oci.Verifier) (*oci.Pulled, error) {
	t.Helper()
	p, _ := newPuller(t)
	return p.Pull(t.Context(), r, policy)
}
