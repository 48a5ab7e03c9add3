package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// genkit runs Genkit's CLI (genkit-cli, from npm) in a project directory, with a home
// of its own (where it keeps its settings), and returns what it printed.
func genkit(t *testing.T, dir, project, home string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ui:stop runs in a cleanup
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBinary, append([]string{filepath.Join(dir, "node_modules", "genkit-cli", "dist", "bin", "genkit.js")}, args...)...)
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "HOME="+home, "NO_UPDATE_NOTIFIER=1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("genkit %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestGenkitCLIRunsAnAgent: `genkit flow:run assistant '{"text": ...}'`, the documented
// command, sends a turn to the agent and prints its answer; `genkit ui:start` starts
// the Developer UI's server, whose action list (what the UI shows) has the agents.
func TestGenkitCLIRunsAnAgent(t *testing.T) {
	dir := clients(t)
	project, home := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "package.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	startServe(t, "-data", t.TempDir(), "-dev", "-reflection-addr", "127.0.0.1:0", "-genkit-dir", project, exampleDeployment)
	// The first run of the CLI asks about analytics; a script says no beforehand.
	genkit(t, dir, project, home, "config", "set", "analyticsOptOut", "true")

	out := genkit(t, dir, project, home, "--non-interactive", "flow:run", "assistant", `{"text": "hello from genkit flow:run"}`)
	_, result, ok := strings.Cut(out, "Result:\n")
	result, _, _ = strings.Cut(result, "\nTrace ID:")
	var answer struct{ SessionID, Text, FinishReason string }
	if !ok || json.Unmarshal([]byte(result), &answer) != nil || answer.Text != "echo: hello from genkit flow:run" || answer.FinishReason != "stop" {
		t.Fatalf("genkit flow:run printed:\n%s", out)
	}
	// The next turn of the same session.
	out = genkit(t, dir, project, home, "--non-interactive", "flow:run", "assistant", fmt.Sprintf(`{"text": "again", "sessionId": %q}`, answer.SessionID))
	if !strings.Contains(out, `"text": "echo: again"`) || !strings.Contains(out, answer.SessionID) {
		t.Errorf("the session's next turn:\n%s", out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	genkit(t, dir, project, home, "--non-interactive", "ui:start", "-p", port)
	t.Cleanup(func() { genkit(t, dir, project, home, "--non-interactive", "ui:stop") })
	resp, err := http.Get("http://localhost:" + port + "/api/listActions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listed struct {
		Result struct {
			Data map[string]struct{ Type, Name, Description string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&listed); err != nil {
		t.Fatal(err)
	}
	for _, agent := range []string{"assistant", "support"} {
		if a := listed.Result.Data["/flow/"+agent]; a.Type != "flow" || a.Name != agent {
			t.Errorf("the Developer UI lists agent %s as %+v", agent, a)
		}
	}
}
