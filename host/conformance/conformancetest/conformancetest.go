// Package conformancetest runs the plugin conformance suite from a Go test: a plugin's
// own tests require it to conform in one line.
package conformancetest

import (
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host/conformance"
)

// Require runs the conformance suite on wasm and fails the test, with the report's
// table, unless the plugin conforms. The table is logged either way.
func Require(t testing.TB, wasm []byte, opts conformance.Options) *conformance.Report {
	t.Helper()
	rep, err := conformance.Run(t.Context(), wasm, opts)
	if err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	if !rep.Passed {
		t.Errorf("the plugin does not conform:\n%s", table.String())
	} else {
		t.Logf("\n%s", table.String())
	}
	return rep
}
