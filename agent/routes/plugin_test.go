package routes_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// TestPluginStepTool runs a step's tool served by a WebAssembly plugin: the calculator,
// built from plugins/calculator and loaded into a host over the agent's registry.
func TestPluginStepTool(t *testing.T) {
	a, m, r := newAgent(t)
	h, err := host.New(r, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	if _, err := h.LoadFile(t.Context(), pluginbuild.ForTest(t, "../../plugins/calculator"), host.Manifest{}); err != nil {
		t.Fatal(err)
	}
	calc, err := r.LookupTool("calculator/calc")
	if err != nil {
		t.Fatal(err)
	}
	billRoute(a, calc)
	for _, w := range ways {
		c := converse(t, a, w)
		reply(m, map[string]any{"message": "What is the sum?", "expression": "120/4"})
		c.say("Split 120 between 4 of us")
		reply(m, "That's 30 each.")
		res := c.say("go ahead")
		if got := res.Session.Data()["value"]; got != 30.0 {
			t.Errorf("%s: the plugin's result in the data: %v", w.name, got)
		}
		if len(res.ToolCalls) != 1 || res.ToolCalls[0].ToolName != "calculator/calc" {
			t.Errorf("%s: tool calls %+v", w.name, res.ToolCalls)
		}
		if sys := systemOf(m.LastRequest()); !strings.Contains(sys, "Tell each person's share: 30") {
			t.Errorf("%s: prompt:\n%s", w.name, sys)
		}
		if !res.Session.RouteComplete() && res.Session.CurrentStep.ID != "report" {
			t.Errorf("%s: step %+v", w.name, res.Session.CurrentStep)
		}
	}
}
