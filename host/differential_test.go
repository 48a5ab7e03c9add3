package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/host"
)

// rawCall is one call of a plugin's export with a raw input, as Plugin.Call sends it.
type rawCall struct {
	export string
	input  any // encoded as JSON; nil sends no input
}

func tool(name string, input any) rawCall {
	return rawCall{plugin.ExportCallTool, plugin.ToolInput{Tool: name, Input: input}}
}

// largeInput is an input of 256 KiB, its bytes varied so that a misplaced piece shows.
var largeInput = func() []int {
	v := make([]int, 64<<10)
	for i := range v {
		v[i] = i * 7919 % 1000
	}
	return v
}()

// differentialCases are the calls the engines must agree on: every first-party plugin
// that needs no network, the host functions (through hostcheck, in a session), and
// the faults of misbehave (but oom, whose time and stderr depend on the machine's load).
var differentialCases = []struct {
	dir      string
	manifest host.Manifest
	calls    []rawCall
}{
	{"../plugins/calculator", host.Manifest{}, []rawCall{
		{plugin.ExportDescribe, nil},
		tool("calc", map[string]any{"expression": "(1.5 + 2) * -3 / 7"}),
		tool("calc", map[string]any{"expression": "1 / 0"}),
		tool("calc", map[string]any{"expression": "2 +"}),
		tool("calc", map[string]any{}),
		tool("nosuch", map[string]any{}),
		{plugin.ExportCallTool, "not an envelope"},
	}},
	{"../plugins/clock", host.Manifest{}, []rawCall{
		{plugin.ExportDescribe, nil},
		tool("now", map[string]any{"timezone": "Not/AZone"}), // the time itself differs
	}},
	{"../plugins/offline", host.Manifest{}, []rawCall{
		{plugin.ExportDescribe, nil},
		{plugin.ExportGenerate, plugin.GenerateInput{Model: "echo", Request: &abi.GenerateRequest{
			Messages: []*abi.Message{abi.NewMessage(abi.RoleUser, abi.NewTextPart("say this back"))},
		}}},
	}},
	{"../plugins/scratchpad", host.Manifest{State: plugin.StateWrite}, []rawCall{
		tool("note", map[string]any{"text": "first"}),
		tool("note", map[string]any{"text": "  "}),
		tool("note", map[string]any{"text": "second"}),
		tool("notes", map[string]any{}),
	}},
	{"../plugins/profile", host.Manifest{State: plugin.StateWrite}, []rawCall{
		{plugin.ExportHandle, abi.HandlerInput{Handler: "extract", Point: abi.HookTurnStart, Input: []*abi.Message{
			abi.NewMessage(abi.RoleUser, abi.NewTextPart("My name is Ada and I live in London. I like tea.")),
		}}},
	}},
	{"testdata/hostcheck", host.Manifest{State: plugin.StateWrite, Config: map[string]string{"greeting": "hello"}}, []rawCall{
		tool("session_id", map[string]any{}),
		tool("state_get", map[string]any{}),
		tool("state_set", map[string]any{"value": map[string]any{"count": 7, "label": "set by the plugin"}}),
		tool("state_get", map[string]any{}),
		tool("state_set", map[string]any{"value": "not an object"}),
		tool("messages_append", map[string]any{"messages": []*abi.Message{abi.NewMessage(abi.RoleModel, abi.NewTextPart("appended"))}}),
		tool("messages_get", map[string]any{}),
		tool("messages_set", map[string]any{"messages": []*abi.Message{abi.NewMessage(abi.RoleUser, abi.NewTextPart("replaced"))}}),
		tool("artifact_add", map[string]any{"text": "an artifact"}),
		tool("status", map[string]any{"value": "working"}),
		tool("config", map[string]any{"text": "greeting"}),
		tool("config", map[string]any{"text": "ungranted"}),
		tool("secret", map[string]any{"text": "TOKEN"}),
		tool("log", map[string]any{"text": "a line"}),
		tool("http", map[string]any{"url": "http://192.0.2.1/"}), // not granted: refused before any connection
		// Large enough that the native engine hands it over to the guest's memory
		// (terrarium_input_buffer), which Extism's never does: both must read it whole.
		tool("echo", largeInput),
		tool("echo", "short"),
		tool("echo", largeInput),
	}},
	{"testdata/misbehave", host.Manifest{Timeout: host.Duration{Duration: 2 * time.Second}, MemoryPages: 512}, []rawCall{
		{plugin.ExportDescribe, nil},
		tool("ok", map[string]any{}),
		tool("error", map[string]any{}),
		tool("badjson", map[string]any{}),
		tool("panic", map[string]any{}),
		tool("ok", map[string]any{}),
		tool("loop", map[string]any{}),
		tool("ok", map[string]any{}),
		tool("exit", map[string]any{}),
		tool("sleep", map[string]any{"ms": 1}),
		tool("logflood", map[string]any{"lines": 3, "text": "flood"}),
		tool("nosuch", map[string]any{}),
		// What a call's return code and error_set mean together (ABI.md, section 2).
		tool("returns", map[string]any{"rc": 0, "output": `{"output":"fine"}`}),
		tool("returns", map[string]any{"rc": 1}),
		tool("returns", map[string]any{"rc": -1, "output": `{"output":"fine"}`}),
		tool("returns", map[string]any{"rc": 0, "error": `{"code":"unavailable","message":"set, then 0 returned"}`}),
		tool("returns", map[string]any{"rc": 0, "output": `{"output":"fine"}`, "error": "set beside an output"}),
		tool("returns", map[string]any{"rc": 1, "error": `{"code":"invalid_input","message":"set, then 1 returned"}`}),
		tool("returns", map[string]any{"rc": 0, "error": ""}),
		tool("returns", map[string]any{"rc": 1, "error": ""}),
		tool("ok", map[string]any{}),
	}},
}

// TestEnginesAgree runs the same calls through the native engine and through Extism's
// and compares what they give byte for byte: outputs, the errors plugins report, the
// kind of each fault, and what host functions did to the session.
func TestEnginesAgree(t *testing.T) {
	for _, tc := range differentialCases {
		t.Run(strings.TrimPrefix(tc.dir, "../plugins/"), func(t *testing.T) {
			var results [2][]string
			for i, e := range engines {
				results[i] = runCalls(t, host.WithEngine(e.engine), tc.dir, tc.manifest, tc.calls)
			}
			for j, c := range tc.calls {
				if results[0][j] != results[1][j] {
					t.Errorf("call %d (%s %v):\n%s: %s\n%s: %s", j, c.export, c.input, engines[0].name, results[0][j], engines[1].name, results[1][j])
				}
			}
			if n := len(tc.calls); results[0][n] != results[1][n] {
				t.Errorf("the session after the calls:\n%s: %s\n%s: %s", engines[0].name, results[0][n], engines[1].name, results[1][n])
			}
		})
	}
}

// runCalls loads a plugin on a host with the engine, makes the calls in one session,
// and returns what each gave and, last, the session's state, messages and artifacts.
func runCalls(t *testing.T, engine host.Option, dir string, m host.Manifest, calls []rawCall) []string {
	t.Helper()
	h, _ := newHost(t, engine)
	p := load(t, h, dir, m)
	var results []string
	out, statuses := withSession(t, map[string]any{"count": 1}, func(ctx context.Context, s *session.Session[map[string]any]) {
		for _, c := range calls {
			var input []byte
			if c.input != nil {
				var err error
				if input, err = json.Marshal(c.input); err != nil {
					t.Fatal(err)
				}
			}
			out, err := p.Call(ctx, c.export, input)
			// The session's ID differs from one run to the other.
			results = append(results, strings.ReplaceAll(outcome(out, err), s.ID(), "<session>"))
		}
	})
	end, err := json.Marshal(struct {
		State     any
		Messages  any
		Artifacts any
		Statuses  []any
	}{out.State.Custom, out.State.Messages, out.State.Artifacts, statuses})
	if err != nil {
		t.Fatal(err)
	}
	return append(results, string(end))
}

// outcome describes a call's result for comparison: the output as it is, a plugin's
// reported error as it is, and a fault by its first line and the first line of the
// guest's stderr; a timeout and an exit by their kind alone, as the engines word them
// differently.
func outcome(out []byte, err error) string {
	var ce *host.CallError
	switch {
	case err == nil:
		return "output: " + string(out)
	case !errors.As(err, &ce):
		return "not a CallError: " + err.Error()
	case errors.Is(err, host.ErrPluginFault):
		msg := err.Error()
		for _, kind := range []string{"timed out", "exited with code"} {
			if strings.Contains(msg, kind) {
				return "fault: " + kind
			}
		}
		first, _, _ := strings.Cut(msg, "\n")
		if _, stderr, ok := strings.Cut(msg, "(stderr: "); ok {
			line, _, _ := strings.Cut(stderr, "\n")
			first += " (stderr: " + line
		}
		return "fault: " + first
	default:
		return fmt.Sprintf("error (%T): %v", ce.Err, ce.Err)
	}
}
