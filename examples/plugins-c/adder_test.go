package adder_test

import (
	"testing"

	"github.com/terrarium-ai/terrarium/internal/langtest"
)

// TestCPlugin builds adder/plugin.c with clang for freestanding wasm32, runs the
// conformance suite on it and has an agent call it.
func TestCPlugin(t *testing.T) {
	langtest.Check(t, langtest.BuildC(t, "adder/plugin.c"), "../../plugins/offline", "adder-c/add", `{"a": 2, "b": 40}`, `{"sum":42}`)
}
