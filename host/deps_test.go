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
	for _, dep := range hostDeps(t) {
		for _, banned := range []string{"github.com/google/dotprompt", "github.com/mbleigh/raymond", "github.com/goccy/go-yaml", "agent/prompt"} {
			if strings.Contains(dep, banned) {
				t.Errorf("the host links %s", dep)
			}
		}
	}
}

// TestHostLinksNoExtism keeps Extism's go-sdk and what it brings (protobuf, OTLP's
// types, observe-sdk) out of a program that runs plugins on the default engine: only
// one that selects host/extismengine links them (docs/architecture.md, "The plugin
// host").
func TestHostLinksNoExtism(t *testing.T) {
	for _, dep := range hostDeps(t) {
		for _, banned := range []string{"github.com/extism/", "host/extismengine", "google.golang.org/protobuf", "go.opentelemetry.io/proto/otlp", "github.com/dylibso/observe-sdk"} {
			if strings.Contains(dep, banned) {
				t.Errorf("the host links %s", dep)
			}
		}
	}
}

// hostDeps lists the packages package host links, its tests' aside.
func hostDeps(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}
