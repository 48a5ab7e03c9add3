package adder_test

import (
	"testing"

	"github.com/terrarium-ai/terrarium/internal/langtest"
)

// TestRustPlugin builds lib.rs with rustc, no crates, runs the conformance suite on it
// and has an agent call it.
func TestRustPlugin(t *testing.T) {
	langtest.Check(t, langtest.BuildRust(t, "lib.rs"), "../../plugins/offline", "adder-rust/add", `{"a": 2, "b": 40}`, `{"sum":42}`)
}
