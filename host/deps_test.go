package host_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestHostLinksNoPromptStack keeps the plugin host free of the prompt-template stack:
// DefineAgent takes any PromptRenderer, so nothing the host imports needs dotprompt,
// Handlebars or a YAML parser of its own. (The CLI links them: terrarium serve reads
// agent files and their prompts, through package deploy.)
func TestHostLinksNoPromptStack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/google/dotprompt", "github.com/mbleigh/raymond", "github.com/goccy/go-yaml", "agent/prompt"} {
			if strings.Contains(dep, banned) {
				t.Errorf("the host links %s", dep)
			}
		}
	}
}
