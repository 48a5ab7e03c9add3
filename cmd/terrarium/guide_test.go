package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginGuideRunsAsWritten follows docs/plugins.md: it writes the files the guide
// shows (```go file=path) and runs its shell steps (```sh run) in order, in an empty
// directory, with $TERRARIUM set to this checkout.
func TestPluginGuideRunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command and builds a plugin")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.Open(filepath.Join(root, "docs", "plugins.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer guide.Close()
	work := t.TempDir()
	bin := filepath.Join(work, ".bin")
	env := append(os.Environ(), "TERRARIUM="+root, "GOBIN="+bin, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	steps := 0
	var block []string
	var kind, arg string // kind: "run", "file" or "" (not part of the guide's steps)
	s := bufio.NewScanner(guide)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "```") {
			if kind != "" {
				block = append(block, line)
			}
			continue
		}
		if kind == "" && len(block) == 0 && line != "```" {
			info := strings.Fields(strings.TrimPrefix(line, "```"))
			switch {
			case len(info) == 2 && info[0] == "sh" && info[1] == "run":
				kind = "run"
			case len(info) == 2 && strings.HasPrefix(info[1], "file="):
				kind, arg = "file", strings.TrimPrefix(info[1], "file=")
			default:
				kind = "skip"
			}
			continue
		}
		// The closing fence.
		text := strings.Join(block, "\n") + "\n"
		switch kind {
		case "run":
			steps++
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", text)
			cmd.Dir, cmd.Env = work, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("step %d failed: %v\n$ %s\n%s", steps, err, text, out)
			}
			t.Logf("step %d:\n$ %s%s", steps, text, out)
		case "file":
			path := filepath.Join(work, arg)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		kind, arg, block = "", "", nil
	}
	if steps < 4 {
		t.Fatalf("found %d runnable steps in the guide, want at least 4", steps)
	}
	if _, err := os.Stat(filepath.Join(work, "weather", "weather.wasm")); err != nil {
		t.Errorf("the guide did not produce weather.wasm: %v", err)
	}
}
