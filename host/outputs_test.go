package host_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
)

// TestToolOutputsAreCheckedAtRunTime: an output breaking the tool's output schema, or
// an answer that is no output envelope, fails the call, naming the plugin, the tool
// and what is wrong; leniently, the schema mismatch is only logged.
func TestToolOutputsAreCheckedAtRunTime(t *testing.T) {
	for _, tc := range []struct {
		mode, says string
	}{
		{"badoutput", `plugin misbehave: terrarium_call_tool: plugin fault: tool t: the output does not match the output schema`},
		{"noenvelope", `tool t: invalid output: not a tool output envelope ({"output": ..., "content": [...]} or {"interrupt": {...}}): json: unknown field "value"`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, r, _ := misbehaving(t, host.Manifest{Config: map[string]string{"mode": tc.mode}})
			out, err := runWith(context.Background(), r, "misbehave/t", map[string]any{"n": 1})
			if !errors.Is(err, host.ErrPluginFault) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("output %v, err %v; want a plugin fault saying %q", out, err, tc.says)
			}
		})
	}

	logs := newPluginLogs()
	h, r := newHost(t, host.WithLogger(slog.New(logs)), host.WithLenientOutputs())
	load(t, h, "testdata/misbehave", host.Manifest{Config: map[string]string{"mode": "badoutput"}})
	out, err := runWith(context.Background(), r, "misbehave/t", map[string]any{"n": 1})
	if err != nil || out != "a string, though the schema says integer" {
		t.Fatalf("lenient: output %v, err %v", out, err)
	}
	if n, _ := logs.count("tool output does not match its output schema", ""); n != 1 {
		t.Errorf("lenient: %d warnings logged, want 1", n)
	}
}
