package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/mcp"
)

// pluginTools loads the calculator and the slow test plugin (one instance, so that a
// call that is not stopped keeps the next one waiting) and returns their tools.
func pluginTools(t testing.TB) []agent.Tool {
	t.Helper()
	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	for _, p := range []struct {
		dir string
		m   host.Manifest
	}{
		{filepath.Join("..", "plugins", "calculator"), host.Manifest{}},
		{filepath.Join("testdata", "slow"), host.Manifest{MaxInstances: 1, Timeout: host.Duration{Duration: time.Hour}}},
	} {
		if _, err := h.LoadFile(t.Context(), pluginbuild.ForTest(t, p.dir), p.m); err != nil {
			t.Fatal(err)
		}
	}
	tools, err := mcp.RegistryTools(r)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func TestServerPluginTools(t *testing.T) {
	cs := connect(t, pluginTools(t))

	res := call(t, cs, "calculator_calc", map[string]any{"expression": "(1.5 + 2) * -3 / 7"})
	if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["value"] != -1.5 {
		t.Errorf("calculator_calc: isError %v, structured %v, text %q", res.IsError, res.StructuredContent, text(res))
	}
	// The plugin's own error, as the plugin reported it.
	if res := call(t, cs, "calculator_calc", map[string]any{"expression": "1 +"}); !res.IsError || !strings.HasPrefix(text(res), "invalid_input: expression: ") {
		t.Errorf("a bad expression: isError %v, text %q", res.IsError, text(res))
	}
	// Input the schema refuses never reaches the plugin.
	if res := call(t, cs, "calculator_calc", map[string]any{"expression": 42}); !res.IsError || !strings.Contains(text(res), "/expression") {
		t.Errorf("a number for an expression: isError %v, text %q", res.IsError, text(res))
	}
}

// TestServerPluginProgressAndCancel follows a plugin's progress reports to the client
// and the client's cancellation back to the plugin.
func TestServerPluginProgressAndCancel(t *testing.T) {
	notes := make(chan *mcpsdk.ProgressNotificationParams, 100)
	cs := connect(t, pluginTools(t), mcpsdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
			select {
			case notes <- req.Params:
			default: // the long call below reports far more than this test reads
			}
		},
	})

	params := &mcpsdk.CallToolParams{Name: "slow_wait", Arguments: map[string]any{"steps": 3}}
	params.SetProgressToken("short")
	if res := call(t, cs, params.Name, nil); !res.IsError {
		t.Errorf("slow_wait without steps: %q, want an error", text(res))
	}
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("slow_wait: %v %q", err, text(res))
	}
	seen := map[string]bool{}
	for range 3 {
		n := <-notes
		if n.ProgressToken != "short" || n.Total != 3 {
			t.Errorf("notification %+v, want token short and total 3", *n)
		}
		seen[n.Message] = true
	}
	for i := 1; i <= 3; i++ {
		if msg := fmt.Sprintf("step %d of 3", i); !seen[msg] {
			t.Errorf("no notification %q among %v", msg, seen)
		}
	}

	// A call of about three hours, cancelled at its first progress report.
	ctx, cancel := context.WithCancel(t.Context())
	long := &mcpsdk.CallToolParams{Name: "slow_wait", Arguments: map[string]any{"steps": 1_000_000}}
	long.SetProgressToken("long")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, long)
		errc <- err
	}()
	for n := range notes {
		if n.ProgressToken == "long" {
			break
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call returned %v", err)
	}
	// The plugin has one instance: this call runs only once the cancelled call has
	// given it back, which it does only if cancellation stopped it.
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "slow_wait", Arguments: map[string]any{"steps": 1}})
	if err != nil || res.IsError {
		t.Fatalf("the call after the cancelled one: %v %q (is the cancelled call still running?)", err, text(res))
	}
}
