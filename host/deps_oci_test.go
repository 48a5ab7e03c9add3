package host_test

import (
	"strings"
	"testing"
)

// TestHostLinksNoOCIClient keeps the OCI client and Sigstore out of the plugin host:
// package deploy pulls registry plugins with host/oci and hands the host their bytes.
func TestHostLinksNoOCIClient(t *testing.T) {
	for _, dep := range hostDeps(t) {
		for _, banned := range []string{"host/oci", "oras.land/", "github.com/sigstore/", "github.com/opencontainers/"} {
			if strings.Contains(dep, banned) {
				t.Errorf("the host links %s", dep)
			}
		}
	}
}
