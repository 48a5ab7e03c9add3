package deploy_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// TestDeploymentRequiresSignatures loads a .wasm with and without its .sig beside it
// from a deployment whose host trusts one key.
func TestDeploymentRequiresSignatures(t *testing.T) {
	module := pluginbuild.WasmForTest(t, "../plugins/offline")
	pub, priv, err := host.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := writeFiles(t, map[string]string{
		"a.yaml":       "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n  - path: offline.wasm\n",
		"offline.wasm": string(module),
	})
	files, err := deploy.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	trust := deploy.WithHostOptions(host.WithTrustedKeys(pub))
	if _, err := deploy.New(t.Context(), files, trust, quiet); !errors.Is(err, host.ErrSignature) {
		t.Fatalf("unsigned: %v, want ErrSignature", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "offline.wasm.sig"), host.Sign(module, priv), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(t.Context(), files, trust, quiet)
	if err != nil {
		t.Fatalf("signed: %v", err)
	}
	d.Close(t.Context())
}
