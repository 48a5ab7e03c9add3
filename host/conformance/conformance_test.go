package conformance_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/conformance"
	"github.com/terrarium-ai/terrarium/host/conformance/conformancetest"
	"github.com/terrarium-ai/terrarium/host/internal/wasmtest"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

func wasm(t *testing.T, dir string) []byte {
	t.Helper()
	return pluginbuild.WasmForTest(t, dir)
}

func TestFirstPartyPluginsConform(t *testing.T) {
	for _, name := range []string{"calculator", "clock", "scratchpad", "profile", "offline"} {
		t.Run(name, func(t *testing.T) {
			conformancetest.Require(t, wasm(t, "../../plugins/"+name), conformance.Options{Manifest: host.Manifest{State: plugin.StateWrite}})
		})
	}
}

// TestBrokenPluginsFail runs the suite on a plugin misbehaving in one way at a time:
// each must fail with the finding for that failure, and only with findings that
// follow from it.
func TestBrokenPluginsFail(t *testing.T) {
	broken := wasm(t, "../testdata/misbehave")
	for _, tc := range []struct {
		mode  string
		check string // a failing check's name contains this
		says  string // and its detail this
	}{
		{"abi", "descriptor: abi version", "ABI version 99"},
		{"unknownkey", "load: describe", `unknown field "output_schema"`},
		{"dupnames", "descriptor: names", `tool "t" is declared twice`},
		{"badschema", "descriptor: schemas", "input schema"},
		{"badpoint", "descriptor: hook points", `unknown point "midnight"`},
		{"badcaps", "descriptor: capabilities", `state "root"`},
		{"acceptsinvalid", "tool t: invalid input", "accepted an input its schema forbids"},
		{"badoutput", "tool t: valid input", "does not match the output schema"},
		{"trap", "robustness: terrarium_call_tool with garbage input", "cannot parse my input"},
		{"slow", "tool t: valid input", "timed out"},
		{"memhog", "tool t: valid input", "plugin fault"},
		{"liar", "model m: tool request and follow-up", "without a tool request"},
		{"liar", "model m: structured output", "claims JSON output"},
		{"baddirective", "handler h: at turnStart", `unknown directive action "explode"`},
		{"badstate", "handler h: at turnStart", "no longer matches the declared state schema"},
		{"rejectsvalid", "tool t: valid input (required properties only)", "answered an input its schema allows with invalid_input"},
		{"internalerror", "tool t: valid input (required properties only)", "answered an input its schema allows with internal"},
		{"noenvelope", "tool t: valid input", "not a tool output envelope"},
		{"answersgarbage", "robustness: terrarium_call_tool with garbage input", "bad input must be refused with a protocol error"},
		{"undeclaredstate", "capabilities: declared", "called state_set, which needs state write"},
		{"undeclaredhttp", "capabilities: declared", "called http_request, which needs http"},
	} {
		t.Run(tc.mode+"/"+tc.check, func(t *testing.T) {
			m := host.Manifest{Config: map[string]string{"mode": tc.mode}, State: plugin.StateWrite, Timeout: host.Duration{Duration: time.Second}, MemoryPages: 512}
			rep, err := conformance.Run(context.Background(), broken, conformance.Options{Manifest: m})
			if err != nil {
				t.Fatal(err)
			}
			var table strings.Builder
			rep.WriteTable(&table)
			if rep.Passed {
				t.Fatalf("mode %s passed:\n%s", tc.mode, table.String())
			}
			found := false
			for _, res := range rep.Failed() {
				if strings.Contains(res.Check, tc.check) && strings.Contains(res.Detail, tc.says) {
					found = true
				}
			}
			if !found {
				t.Errorf("mode %s: no failing %q saying %q:\n%s", tc.mode, tc.check, tc.says, table.String())
			}
		})
	}
	// A module that declares tools without exporting terrarium_call_tool.
	rep, err := conformance.Run(context.Background(), wasm(t, "../testdata/noexport"), conformance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res := rep.Find("descriptor: exports"); len(res) != 1 || res[0].Outcome != conformance.Fail || !strings.Contains(res[0].Detail, "terrarium_call_tool") {
		t.Errorf("noexport: %+v", res)
	}
	// Modules no toolchain setting for Terrarium would make.
	for _, tc := range []struct {
		name             string
		imports, exports []string
		says             string
	}{
		{"command module", nil, []string{"_start", "terrarium_describe"}, "build a reactor"},
		{"refused kernel imports", []string{"extism:host/env.config_get"}, []string{"terrarium_describe"}, "Extism kernel functions Terrarium does not provide (config_get)"},
	} {
		rep, err := conformance.Run(context.Background(), wasmtest.Module(tc.imports, tc.exports), conformance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res := rep.Find("load: describe"); rep.Passed || len(res) != 1 || res[0].Outcome != conformance.Fail || !strings.Contains(res[0].Detail, tc.says) {
			t.Errorf("%s: %+v", tc.name, res)
		}
	}
	// Not WebAssembly at all.
	rep, err = conformance.Run(context.Background(), []byte("MZ not wasm"), conformance.Options{})
	if err != nil || rep.Passed || len(rep.Find("load: module")) != 1 {
		t.Errorf("garbage module: %+v, %v", rep, err)
	}
}

func TestReportFormats(t *testing.T) {
	rep, err := conformance.Run(context.Background(), wasm(t, "../../plugins/calculator"), conformance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var js strings.Builder
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back conformance.Report
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil || back.Plugin != "calculator" || !back.Passed || len(back.Results) != len(rep.Results) {
		t.Errorf("JSON report = %s (%v)", js.String(), err)
	}
}
