package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// TestPluginTestRecordReplay drives the flags; the recording itself is tested in
// host/cassette and, for the model providers, in their packages.
func TestPluginTestRecordReplay(t *testing.T) {
	calc := pluginbuild.ForTest(t, "../../plugins/calculator")
	tape := filepath.Join(t.TempDir(), "calc.cassette.json")
	code, _, stderr := terrarium(t, "plugin", "test", calc, "--record", tape)
	if code != exitOK || !strings.Contains(stderr, "recorded 0 HTTP exchanges in "+tape) {
		t.Fatalf("--record: exit %d\n%s", code, stderr)
	}
	if data, err := os.ReadFile(tape); err != nil || !strings.Contains(string(data), `"exchanges"`) {
		t.Fatalf("the cassette: %s, %v", data, err)
	}
	if code, _, stderr := terrarium(t, "plugin", "test", calc, "--replay", tape); code != exitOK {
		t.Errorf("--replay: exit %d\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"--record", tape, "--replay", tape},
		{"--replay", filepath.Join(t.TempDir(), "missing.json")},
	} {
		if code, _, stderr := terrarium(t, append([]string{"plugin", "test", calc}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, stderr)
		}
	}
}
