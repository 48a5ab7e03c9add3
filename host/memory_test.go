package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
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

// A plugin's manifest sets its guest's environment, and a Go guest's runtime takes
// its collector's settings from it as it starts: GOGC is DefaultGOGC unless the
// manifest sets it, and nothing else is set.
func TestGuestEnvironment(t *testing.T) { forEachEngine(t, testGuestEnvironment) }

func testGuestEnvironment(t *testing.T, engine host.Option) {
	type gc struct {
		Percent     int    `json:"percent"`
		MemoryLimit string `json:"memoryLimit"`
		Env         string `json:"env"`
	}
	noLimit := strconv.FormatInt(math.MaxInt64, 10)
	for _, c := range []struct {
		name string
		env  map[string]string
		ask  string
		want gc
	}{
		{"default", nil, "HOME", gc{Percent: 25, MemoryLimit: noLimit}},
		{"set", map[string]string{"GOGC": "80", "GOMEMLIMIT": "4MiB", "GREETING": "hi"}, "GREETING", gc{80, strconv.Itoa(4 << 20), "hi"}},
		{"Go's default", map[string]string{"GOGC": "100"}, "GOGC", gc{100, noLimit, "100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, r := newHost(t, engine)
			if _, err := h.Load(context.Background(), wasm(t, "testdata/hostcheck"), host.Manifest{Env: c.env}); err != nil {
				t.Fatal(err)
			}
			tool, err := r.LookupTool("hostcheck/gc")
			if err != nil {
				t.Fatal(err)
			}
			out, err := tool.Run(context.Background(), map[string]any{"text": c.ask})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(out)
			var got gc
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("the guest saw %+v, want %+v", got, c.want)
			}
		})
	}
}

// An environment variable wazero cannot pass is refused by the manifest's check, naming
// it, rather than by the first instantiation.
func TestManifestEnvInvalid(t *testing.T) {
	for _, env := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A\x00": "x"}, {"A": "x\x00y"}} {
		err := host.Manifest{Env: env}.Validate()
		if err == nil || !strings.Contains(err.Error(), "env") {
			t.Errorf("env %q: got %v, want an error naming env", env, err)
		}
	}
}
