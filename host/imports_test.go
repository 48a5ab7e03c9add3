package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
)

// importing is a plugin-shaped module importing one function of type () -> () from
// module.name.
func importing(module, name string) []byte {
	entry := append([]byte{1, byte(len(module))}, module...)
	entry = append(append(entry, byte(len(name))), name...)
	return describer(append(entry, 0x00, 0x00), "importing") // a function of type 0
}

// TestNativeEngineRefusesUnknownImports: a module importing what the native engine does
// not provide is refused at load, the import named (wazero alone would only say that a
// module is missing, at instantiation).
func TestNativeEngineRefusesUnknownImports(t *testing.T) {
	h, _ := newHost(t, host.WithEngine(host.NativeEngine()))
	for _, tc := range []struct{ module, name, says string }{
		{"extism:host/env", "var_get", "does not provide"},
		{"terrarium:host/v1", "launch_missiles", "this host does not provide"},
		{"env", "abort", "modules no host provides (env.abort)"},
	} {
		_, err := h.Load(context.Background(), importing(tc.module, tc.name), host.Manifest{})
		if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("a module importing %s.%s: %v, want ErrLoad naming it, saying %q", tc.module, tc.name, err, tc.says)
		}
	}
}
