// Package langtest checks the example plugins written in other languages than Go: each
// must conform and be called by an agent, as a Go plugin is.
package langtest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/conformance"
	"github.com/terrarium-ai/terrarium/host/conformance/conformancetest"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// Need returns the path of a tool the test needs, or skips the test without it
// (fails it in CI, where .ci/run installs it). ok says whether a found candidate is
// usable; the first usable of candidates is returned.
func Need(t *testing.T, what string, ok func(path string) bool, candidates ...string) string {
	t.Helper()
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil && (ok == nil || ok(p)) {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI needs %s (tried %v)", what, candidates)
	}
	t.Skipf("needs %s (tried %v): apt-get install clang lld rustc libstd-rust-dev-wasm32", what, candidates)
	return ""
}

// Run runs a build command, failing the test with its output.
func Run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// Check requires the plugin in file to conform, then has an agent (the offline model,
// told "/call <tool> <input>") call its tool and requires the answer to hold want.
func Check(t *testing.T, file, tool, input, want string) {
	t.Helper()
	module, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	conformancetest.Require(t, module, conformance.Options{})

	offline, err := os.ReadFile(pluginbuild.ForTest(t, "../../plugins/offline"))
	if err != nil {
		t.Fatal(err)
	}
	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	for _, m := range [][]byte{offline, module} {
		if _, err := h.Load(t.Context(), m, host.Manifest{}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := agent.Generate(t.Context(), r, agent.WithModelName("offline/echo"),
		agent.WithPrompt("/call "+tool+" "+input), agent.WithToolNames(tool))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Text(), want) {
		t.Errorf("the agent's answer %q lacks %q", resp.Text(), want)
	}
}
