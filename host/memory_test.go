package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/internal/wasmtest"
)

// A plugin need not export its memory, nor have one: blocks live in the kernel's
// memory, not the guest's (ABI.md, section 1). One importing its memory is refused at
// load, by both engines alike, saying how to link it.
func TestPluginMemory(t *testing.T) { forEachEngine(t, testPluginMemory) }

func testPluginMemory(t *testing.T, engine host.Option) {
	const desc = `{"abi":1,"name":"bare"}`
	for name, mem := range map[string]wasmtest.Memory{
		"exported": wasmtest.MemoryExported, "hidden": wasmtest.MemoryHidden, "none": wasmtest.MemoryNone,
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := newHost(t, engine)
			p, err := h.Load(context.Background(), wasmtest.Describer(desc, mem), host.Manifest{})
			if err != nil {
				t.Fatal(err)
			}
			if out, err := p.Call(context.Background(), plugin.ExportDescribe, nil); err != nil || string(out) != desc {
				t.Errorf("describe: %q, %v", out, err)
			}
		})
	}
	t.Run("imported", func(t *testing.T) {
		h, _ := newHost(t, engine)
		_, err := h.Load(context.Background(), wasmtest.Describer(desc, wasmtest.MemoryImported), host.Manifest{})
		if !errors.Is(err, host.ErrNotAPlugin) || !strings.Contains(err.Error(), "imports its memory (env.memory)") ||
			!strings.Contains(err.Error(), "--import-memory") {
			t.Errorf("Load: %v, want ErrNotAPlugin naming the import and the fix", err)
		}
	})
}
