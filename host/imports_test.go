package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
)

// importing is a module importing one function of type () -> () from module.name.
func importing(module, name string) []byte {
	entry := append([]byte{byte(len(module))}, module...)
	entry = append(append(entry, byte(len(name))), name...)
	entry = append(entry, 0x00, 0x00) // a function of type 0
	imports := append([]byte{1}, entry...)
	wasm := []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type section: func () -> ()
		0x02, byte(len(imports)),
	}
	return append(wasm, imports...)
}

// TestNativeEngineRefusesUnknownImports: a module importing what the native engine does
// not provide is refused at load, the import named (wazero alone would only say that a
// module is missing, at instantiation).
func TestNativeEngineRefusesUnknownImports(t *testing.T) {
	h, _ := newHost(t, host.WithEngine(host.NativeEngine()))
	for _, tc := range []struct{ module, name, says string }{
		{"extism:host/env", "var_get", "not part of the kernel ABI"},
		{"terrarium:host/v1", "launch_missiles", "this host does not provide"},
		{"env", "abort", "from module env"},
	} {
		_, err := h.Load(context.Background(), importing(tc.module, tc.name), host.Manifest{})
		if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("a module importing %s.%s: %v, want ErrLoad naming it, saying %q", tc.module, tc.name, err, tc.says)
		}
	}
}
