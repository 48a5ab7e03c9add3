package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/internal/testenv"
	"github.com/terrarium-ai/terrarium/mcp"
)

// pluginDir returns a directory of plugins as `terrarium mcp` takes it: calculator,
// clock and a slow test plugin, the slow one with a manifest granting one instance
// and an hour per call.
func pluginDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"../../plugins/calculator", "../../plugins/clock", "../../mcp/testdata/slow"} {
		wasm := pluginbuild.WasmForTest(t, p)
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)+".wasm"), wasm, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	manifest := `{"maxInstances": 1, "timeout": "1h"}`
	if err := os.WriteFile(filepath.Join(dir, "slow.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// terrariumCommand is the terrarium command with args, as a child process.
func terrariumCommand(t *testing.T, args ...string) *exec.Cmd {
	return exec.Command(binary(t), args...)
}

// TestMCPCommand serves a plugin directory, and a directory of agent files, over stdio
// to the Go SDK's client.
func TestMCPCommand(t *testing.T) {
	dir := pluginDir(t)
	for _, c := range []struct {
		args  []string
		tools []string
	}{
		{[]string{"mcp", dir}, []string{"calculator_calc", "clock_now", "slow_wait"}},
		{[]string{"mcp", "--tool", "calculator/*", dir}, []string{"calculator_calc"}},
		// Agent files: the plugins they load, with the grants they give.
		{[]string{"mcp", "../../examples/deploy"}, []string{"calculator_calc", "clock_now", "scratchpad_note", "scratchpad_notes"}},
	} {
		cmd := terrariumCommand(t, c.args...)
		cmd.Stderr = io.Discard
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(t.Context(), &mcpsdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := toolNames(t, cs)
		if !slices.Equal(names, c.tools) {
			t.Errorf("terrarium %v serves %v, want %v", c.args, names, c.tools)
		}
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "calculator_calc", Arguments: map[string]any{"expression": "6 * 7"}})
		if err != nil || res.IsError || res.StructuredContent.(map[string]any)["value"] != 42.0 {
			t.Errorf("calculator_calc: %v, %+v", err, res)
		}
		if err := cs.Close(); err != nil {
			t.Errorf("closing: the server ended with %v", err)
		}
	}
}

func TestMCPCommandRefuses(t *testing.T) {
	calc := pluginbuild.ForTest(t, "../../plugins/calculator")
	dir := func(manifest string) string {
		d := t.TempDir()
		wasm, err := os.ReadFile(calc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "calculator.wasm"), wasm, 0o644); err != nil {
			t.Fatal(err)
		}
		if manifest != "" {
			if err := os.WriteFile(filepath.Join(d, "calculator.json"), []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	badAgent := t.TempDir()
	if err := os.WriteFile(filepath.Join(badAgent, "broken.yaml"), []byte("name: broken\ntools: [nope/nothing]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad agent file", []string{"mcp", badAgent}, exitFailed, "broken.yaml"},
		{"no argument", []string{"mcp"}, exitUsage, "want exactly one argument"},
		{"empty dir", []string{"mcp", t.TempDir()}, exitFailed, "no agent file (*.yaml) and no plugin (*.wasm)"},
		{"missing dir", []string{"mcp", filepath.Join(t.TempDir(), "nope")}, exitFailed, "no such file"},
		{"pin", []string{"mcp", dir(`{"sha256": "` + strings.Repeat("0", 64) + `"}`)}, exitFailed, "the manifest pins 0000"},
		{"unknown grant", []string{"mcp", dir(`{"stat": "write"}`)}, exitFailed, `unknown field "stat"`},
		{"no tool", []string{"mcp", "--tool", "clock/*", dir("")}, exitFailed, `"clock/*" matches none of "calculator/calc"`},
	} {
		code, _, stderr := terrarium(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, code, stderr, c.code, c.want)
		}
	}
}

// tsSummary is the line of JSON mcp/testdata/ts/client.mjs prints.
type tsSummary struct {
	SDK    string
	Server struct{ Name string }
	Tools  []string
	Calc   struct {
		IsError    bool
		Structured map[string]any
		Text       string
	}
	BadExpression, WrongType struct {
		IsError bool
		Text    string
		Meta    map[string]struct{ Code string }
	}
	UnknownTool struct {
		Thrown, MCPError bool
		Code             int
		Message          string
	}
	Cancel struct {
		Thrown   bool
		Progress struct {
			Progress, Total float64
			Message         string
		}
	}
	AfterCancel struct {
		IsError    bool
		Structured map[string]any
	}
}

// TestMCPTypeScriptClient serves a plugin directory to a client nobody here wrote, the
// official TypeScript SDK's, over stdio (the client starts the command) and over
// streamable HTTP.
func TestMCPTypeScriptClient(t *testing.T) {
	npmDir, node := testenv.NPMInstall(t, "../../mcp/testdata/ts")
	dir := pluginDir(t)
	client := func(args ...string) tsSummary {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, args...)...)
		cmd.Dir = npmDir
		cmd.WaitDelay = 10 * time.Second
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node client.mjs %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, stderr.String())
		}
		var s tsSummary
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("node client.mjs %v printed %q: %v", args, out, err)
		}
		t.Logf("node client.mjs %s: %s", args[0], out)
		return s
	}
	check := func(how string, s tsSummary) {
		t.Helper()
		if s.SDK != "1.32.2" || s.Server.Name != "terrarium" {
			t.Errorf("%s: SDK %q, server %q, want the pinned SDK talking to terrarium", how, s.SDK, s.Server.Name)
		}
		if !slices.Equal(s.Tools, []string{"calculator_calc", "clock_now", "slow_wait"}) {
			t.Errorf("%s: tools %v", how, s.Tools)
		}
		if s.Calc.IsError || s.Calc.Structured["value"] != -1.5 || !strings.Contains(s.Calc.Text, `"value":-1.5`) {
			t.Errorf("%s: calc %+v, want -1.5", how, s.Calc)
		}
		if b := s.BadExpression; !b.IsError || !strings.HasPrefix(b.Text, "invalid_input: expression: ") || b.Meta["terrarium/error"].Code != "invalid_input" {
			t.Errorf("%s: a bad expression gave %+v, want a tool error from the plugin", how, b)
		}
		if w := s.WrongType; !w.IsError || !strings.Contains(w.Text, "at /expression") {
			t.Errorf("%s: a number for an expression gave %+v, want a tool error naming /expression", how, w)
		}
		if u := s.UnknownTool; !u.Thrown || !u.MCPError || u.Code != -32602 {
			t.Errorf("%s: an unknown tool gave %+v, want a protocol error -32602", how, u)
		}
		if c := s.Cancel; !c.Thrown || c.Progress.Progress != 1 || c.Progress.Total != 1e6 || c.Progress.Message != "step 1 of 1000000" {
			t.Errorf("%s: the long call %+v, want it cancelled after the plugin's first progress report", how, c)
		}
		if a := s.AfterCancel; a.IsError || a.Structured["steps"] != 1.0 {
			t.Errorf("%s: the call after the cancelled one gave %+v", how, a)
		}
	}

	check("stdio", client("stdio", binary(t), "mcp", dir))

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"mcp", "--http", "127.0.0.1:0", dir}, io.Discard, pw)
		pw.Close()
		done <- code
	}()
	url := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(pr)
		for s.Scan() {
			if _, rest, ok := strings.Cut(s.Text(), "streamable HTTP at "); ok {
				u, _, _ := strings.Cut(rest, ": ")
				url <- u
			}
		}
		close(url)
	}()
	u, ok := <-url
	if !ok {
		t.Fatalf("terrarium mcp --http ended (exit %d) without saying where it serves", <-done)
	}
	check("http", client("http", u))
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("terrarium mcp --http: exit %d after an interrupt", code)
	}
}

// BenchmarkMCPToolCall calls the calculator plugin's tool in-process, and through MCP
// as a Terrarium agent would (mcp.Connect): from a `terrarium mcp` child process over
// stdio, and from a server in this process over streamable HTTP on loopback.
func BenchmarkMCPToolCall(b *testing.B) {
	dir := pluginDir(b)
	input := map[string]any{"expression": "(1.5 + 2) * -3 / 7"}
	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	if _, err := h.LoadDir(b.Context(), dir); err != nil {
		b.Fatal(err)
	}
	calc, err := r.LookupTool("calculator/calc")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := mcp.NewServer([]agent.Tool{calc}, mcp.WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler(nil))
	defer ts.Close()

	bench := func(name string, tool func(b *testing.B) agent.Tool) {
		b.Run(name, func(b *testing.B) {
			t := tool(b)
			for b.Loop() {
				if _, err := t.Run(b.Context(), input); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	connect := func(cfg mcp.ServerConfig) func(b *testing.B) agent.Tool {
		return func(b *testing.B) agent.Tool {
			c, err := mcp.Connect(b.Context(), cfg, mcp.WithLogger(quietLogger()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			return c.Tools()[0]
		}
	}
	bench("in-process", func(*testing.B) agent.Tool { return calc })
	bench("mcp-stdio", connect(mcp.ServerConfig{Name: "t", Command: binary(b), Args: []string{"mcp", "--tool", "calculator/calc", dir},
		Allow: []string{"calculator_calc"}}))
	bench("mcp-http", connect(mcp.ServerConfig{Name: "t", URL: ts.URL, Allow: []string{"calculator_calc"}}))
}

// toolNames lists the names of the tools an MCP session offers.
func toolNames(t *testing.T, cs *mcpsdk.ClientSession) []string {
	t.Helper()
	var names []string
	for tl, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	return names
}
