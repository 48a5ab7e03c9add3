package host

import (
	"context"
	"log/slog"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// A module is compiled once for a host and its views, and closed with its last user.
func TestViewsShareCompiledModules(t *testing.T) {
	data := pluginbuild.WasmForTest(t, "../plugins/calculator")
	h, err := New(agent.NewRegistry(), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	var plugins []*Plugin
	for _, id := range []string{"a", "b"} {
		v, err := h.Tenant(id, TenantConfig{Registry: agent.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		p, err := v.Load(ctx, data, Manifest{})
		if err != nil {
			t.Fatal(err)
		}
		plugins = append(plugins, p)
	}
	if plugins[0].module != plugins[1].module || len(h.modules) != 1 {
		t.Fatalf("two views compiled the module apart (%d modules)", len(h.modules))
	}
	// Another memory limit is another compilation.
	other, err := h.Load(ctx, data, Manifest{MemoryPages: 512})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.modules) != 2 || other.module == plugins[0].module {
		t.Errorf("%d modules, want 2", len(h.modules))
	}
	plugins[0].Unload(ctx)
	if len(h.modules) != 2 {
		t.Errorf("unloading one user closed the shared module")
	}
	plugins[1].Unload(ctx)
	other.Unload(ctx)
	if len(h.modules) != 0 {
		t.Errorf("%d modules left after every user unloaded", len(h.modules))
	}
}
