package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
)

// pluginDir writes modules into a new directory under the names given.
func pluginDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func names(ps []*host.Plugin) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name())
	}
	return out
}

// LoadDir compiles its plugins at once but returns and registers them in the order of
// their files, whichever finished compiling first.
func TestLoadDirKeepsTheFilesOrder(t *testing.T) {
	dir := pluginDir(t, map[string][]byte{
		"1.wasm": wasm(t, "../plugins/scratchpad"),
		"2.wasm": wasm(t, "../plugins/calculator"),
		"3.wasm": wasm(t, "../plugins/clock"),
	})
	h, r := newHost(t)
	loaded, err := h.LoadDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(loaded), []string{"scratchpad", "calculator", "clock"}; !slices.Equal(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	for _, tool := range []string{"scratchpad/note", "calculator/calc", "clock/now"} {
		if _, err := r.LookupTool(tool); err != nil {
			t.Errorf("%s: %v", tool, err)
		}
	}
}

// A plugin that fails stops LoadDir there, whatever the order the compilations end
// in: the error names its file, those before it are loaded, those after it are not.
func TestLoadDirStopsAtTheFirstFailureInOrder(t *testing.T) {
	for _, tc := range []struct {
		name, bad string
		write     func(dir string) error
	}{
		{"not a module", "2.wasm", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "2.wasm"), []byte("not wasm"), 0o644)
		}},
		{"a manifest that does not parse", "2.json", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "2.json"), []byte(`{"memoryPage": 1}`), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := pluginDir(t, map[string][]byte{
				"1.wasm": wasm(t, "../plugins/calculator"),
				"2.wasm": wasm(t, "../plugins/clock"),
				"3.wasm": wasm(t, "../plugins/scratchpad"),
			})
			if err := tc.write(dir); err != nil {
				t.Fatal(err)
			}
			h, r := newHost(t)
			loaded, err := h.LoadDir(context.Background(), dir)
			if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), filepath.Join(dir, tc.bad)) {
				t.Errorf("err = %v, want ErrLoad naming %s", err, tc.bad)
			}
			if got := names(loaded); !slices.Equal(got, []string{"calculator"}) {
				t.Errorf("loaded %v, want [calculator]", got)
			}
			if h.Plugin("scratchpad") != nil || h.Plugin("clock") != nil {
				t.Error("a plugin after the failing one is loaded")
			}
			if _, err := r.LookupTool("scratchpad/note"); err == nil {
				t.Error("a plugin after the failing one registered its tools")
			}
		})
	}
}

// Two sources of one plugin: the second is refused as a duplicate, by its position
// and not by which finished compiling first.
func TestLoadAllRefusesTheLaterDuplicate(t *testing.T) {
	h, _ := newHost(t)
	calc := wasm(t, "../plugins/calculator")
	loaded, err := h.LoadAll(context.Background(), []host.Source{
		{From: "first", Wasm: calc},
		{From: "second", Wasm: calc},
	})
	if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "(from second)") {
		t.Errorf("err = %v, want ErrLoad naming the second", err)
	}
	if len(loaded) != 1 || h.Plugin("calculator") != loaded[0] {
		t.Errorf("loaded %v, want the first", names(loaded))
	}
}

// A tenant's admission sees the plugins one at a time, in the order given: it counts
// what it admitted (as tenant.Admission counts memory) without a lock, and which
// plugin it refuses must not depend on which compilation ended first.
func TestLoadAllAdmitsInOrder(t *testing.T) {
	h, _ := newHost(t)
	var admitted []string
	v, err := h.Tenant("acme", host.TenantConfig{Registry: agent.NewRegistry(), Admit: func(name string, _ host.Manifest) error {
		if len(admitted) == 1 {
			return errors.New("one plugin only")
		}
		admitted = append(admitted, name)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := v.LoadAll(context.Background(), []host.Source{
		{From: "calculator.wasm", Wasm: wasm(t, "../plugins/calculator")},
		{From: "clock.wasm", Wasm: wasm(t, "../plugins/clock")},
	})
	if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "(from clock.wasm)") {
		t.Errorf("err = %v, want ErrLoad naming clock.wasm", err)
	}
	if got := names(loaded); !slices.Equal(got, []string{"calculator"}) || !slices.Equal(admitted, got) {
		t.Errorf("loaded %v, admitted %v, want [calculator]", got, admitted)
	}
}
