package mcp_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestMCPLinksNoHost keeps package mcp about agent tools, whatever serves them: the
// plugin host plugs in through agent.Tool, as it does into Generate.
func TestMCPLinksNoHost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/terrarium-ai/terrarium/host") {
			t.Errorf("package mcp links %s", dep)
		}
	}
}
