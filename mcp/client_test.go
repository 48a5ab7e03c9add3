package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	goccyyaml "github.com/goccy/go-yaml"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/mcp"
)

// serverEnv makes the test binary an MCP server written with the Go SDK, on stdio,
// when it is set to "go": the server other processes' tests connect to.
const serverEnv = "TERRARIUM_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "go" {
		serveGoSDK()
		return
	}
	os.Exit(m.Run())
}

// serveGoSDK serves tools written with the Go SDK's typed handlers over stdio.
func serveGoSDK() {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "gosdk-test", Version: "1.0.0"}, nil)
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "add", Description: "Adds two integers."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in addIn) (*mcpsdk.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "crash", Description: "Dies mid-call."},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, _ *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "env", Description: "Shows its environment."},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, map[string][]string, error) {
			return nil, map[string][]string{"env": os.Environ()}, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "ticker", Description: "Reports progress until cancelled."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			for i := 1; ctx.Err() == nil; i++ {
				req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{
					ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 1e6, Message: fmt.Sprintf("tick %d", i)})
				time.Sleep(10 * time.Millisecond)
			}
			return nil, nil, ctx.Err()
		})
	if err := s.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// goServer is the config of the Go SDK server above, in a child process.
func goServer(allow ...string) mcp.ServerConfig {
	return mcp.ServerConfig{Name: "go", Command: os.Args[0], Env: map[string]string{serverEnv: "go"}, Allow: allow}
}

func toolNames(tools []agent.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name())
	}
	slices.Sort(names)
	return names
}

func toolByName(t *testing.T, c *mcp.Client, name string) agent.Tool {
	t.Helper()
	for _, tl := range c.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %s among %v", name, toolNames(c.Tools()))
	return nil
}

// generateWith runs Generate with a scripted model asking for one tool call, then
// answering "done", and returns the response and the tool's answer to the model.
func generateWith(t *testing.T, tools []agent.Tool, name string, input any, opts ...agent.GenerateOption) (*abi.ToolResponse, error) {
	t.Helper()
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/scripted")
	m.Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: name, Ref: "1", Input: input})).ReplyText("done")
	opts = append(opts, agent.WithModelName("test/scripted"), agent.WithTools(tools...), agent.WithPrompt("go"))
	if _, err := agent.Generate(t.Context(), r, opts...); err != nil {
		return nil, err
	}
	for _, msg := range m.LastRequest().Messages {
		for _, p := range msg.Content {
			if p.ToolResponse != nil {
				return p.ToolResponse, nil
			}
		}
	}
	t.Fatal("the model never got the tool's answer")
	return nil, nil
}

// TestClientGoSDKServer uses the tools of an MCP server written with the Go SDK, in
// another process, from Generate.
func TestClientGoSDKServer(t *testing.T) {
	t.Setenv("LEAK_CANARY", "host-only")
	cfg := goServer("add", "crash", "env", "ticker")
	cfg.Env["FROM_CONFIG"] = "{{secret:S}}"
	c, err := mcp.Connect(t.Context(), cfg, mcp.WithSecrets(func(_ context.Context, name string) (string, error) {
		if name != "S" {
			return "", fmt.Errorf("no secret %s", name)
		}
		return "resolved", nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := toolNames(c.Tools()), []string{"go/add", "go/crash", "go/env", "go/ticker"}; !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v (hang is not allowed)", got, want)
	}
	if def := toolByName(t, c, "go/add").Definition(); def.Description != "Adds two integers." || def.InputSchema["properties"] == nil {
		t.Errorf("go/add: definition %+v, want the server's description and input schema", def)
	}

	resp, err := generateWith(t, c.Tools(), "go/add", map[string]any{"a": 2, "b": 3})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := resp.Output.(map[string]any); out["sum"] != 5.0 {
		t.Errorf("go/add answered %#v, want {sum: 5}", resp.Output)
	}
	// Generate checks the input against the server's schema, as for a native tool.
	if _, err := generateWith(t, c.Tools(), "go/add", map[string]any{"a": "two", "b": 3}); !errors.Is(err, agent.ErrInvalidToolInput) {
		t.Errorf("go/add with a string: %v, want ErrInvalidToolInput", err)
	}

	// The command gets the variables of its config, not the host's.
	resp, err = generateWith(t, c.Tools(), "go/env", nil)
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprint(resp.Output)
	if !strings.Contains(env, "FROM_CONFIG=resolved") || strings.Contains(env, "LEAK_CANARY") {
		t.Errorf("the server's environment %s: want FROM_CONFIG=resolved and no LEAK_CANARY", env)
	}

	// Progress notifications become status reports of the call.
	ticker := toolByName(t, c, "go/ticker")
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan json.RawMessage, 1)
	ctx = agent.WithStatusFunc(ctx, func(_ context.Context, s json.RawMessage) error {
		select {
		case first <- s:
			cancel()
		default:
		}
		return nil
	})
	if _, err := ticker.Run(ctx, map[string]any{}); !errors.Is(err, context.Canceled) {
		t.Errorf("go/ticker: %v, want it cancelled", err)
	}
	var status struct {
		Progress, Total float64
		Message         string
	}
	if err := json.Unmarshal(<-first, &status); err != nil || status.Progress < 1 || status.Total != 1e6 || !strings.HasPrefix(status.Message, "tick ") {
		t.Errorf("status %+v (%v), want progress, total and message", status, err)
	}

	// The server killed mid-call: a clear error, not a hung turn.
	_, err = generateWith(t, c.Tools(), "go/crash", nil)
	t.Logf("go/crash: %v", err)
	if !errors.Is(err, mcp.ErrUnavailable) || !strings.Contains(err.Error(), "mcp tool go/crash") || !strings.Contains(err.Error(), "connection closed") {
		t.Errorf("go/crash: %v, want an ErrUnavailable naming the tool and the closed connection", err)
	}
	resp, err = generateWith(t, c.Tools(), "go/crash", nil, agent.WithReturnToolErrors(true))
	if err != nil || !strings.Contains(fmt.Sprint(resp.Output), "connection closed") {
		t.Errorf("go/crash with tool errors returned: %v, %v, want the error handed to the model", err, resp)
	}
	// The next call starts the server again.
	if resp, err := generateWith(t, c.Tools(), "go/add", map[string]any{"a": 1, "b": 1}); err != nil || resp.Output.(map[string]any)["sum"] != 2.0 {
		t.Errorf("go/add after a crash: %v %v", resp, err)
	}

	c.Close()
	if _, err := toolByName(t, c, "go/add").Run(t.Context(), map[string]any{"a": 1, "b": 1}); !errors.Is(err, mcp.ErrUnavailable) {
		t.Errorf("a call after Close: %v, want ErrUnavailable", err)
	}
}

func TestClientTimeout(t *testing.T) {
	cfg := goServer("hang")
	cfg.Timeout = mcp.Duration{Duration: 200 * time.Millisecond}
	c, err := mcp.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = generateWith(t, c.Tools(), "go/hang", nil)
	t.Logf("go/hang: %v", err)
	if !errors.Is(err, mcp.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Errorf("go/hang: %v, want an ErrUnavailable saying it did not answer in time", err)
	}
}

func TestConnectRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  mcp.ServerConfig
		want string
	}{
		{"no allow", mcp.ServerConfig{Name: "x", Command: "true"}, "allow lists no tools"},
		{"no server", mcp.ServerConfig{Name: "x", Allow: []string{"*"}}, "give a command or a url"},
		{"both", mcp.ServerConfig{Name: "x", Command: "true", URL: "http://127.0.0.1/", Allow: []string{"*"}}, "not both"},
		{"bad name", mcp.ServerConfig{Name: "a/b", Command: "true", Allow: []string{"*"}}, `server name "a/b"`},
		{"bad url", mcp.ServerConfig{Name: "x", URL: "ftp://host/", Allow: []string{"*"}}, "want an http or https URL"},
		{"missing secret", mcp.ServerConfig{Name: "x", URL: "http://127.0.0.1:1/", Headers: map[string]string{"Authorization": "{{secret:TERRARIUM_TEST_NO_SUCH}}"}, Allow: []string{"*"}}, "TERRARIUM_TEST_NO_SUCH is not set"},
		{"no command", mcp.ServerConfig{Name: "x", Command: "/nonexistent/mcp-server", Allow: []string{"*"}}, "connecting"},
		{"unknown tool", goServer("add", "sub"), `allow "sub" matches none of`},
	} {
		_, err := mcp.Connect(t.Context(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestClientHTTP consumes a Terrarium MCP server over streamable HTTP, behind a bearer
// token taken from a secret: its tools, and its errors with their codes.
func TestClientHTTP(t *testing.T) {
	srv, err := mcp.NewServer([]agent.Tool{
		agent.NewTool("math/add", "Adds.", add),
		agent.NewTool("lookup", "Finds nothing.", func(_ context.Context, in struct {
			Key string `json:"key"`
		}) (string, error) {
			return "", abi.Errorf(abi.CodeNotFound, "no entry %q", in.Key)
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler(nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	secrets := func(token string) mcp.Option {
		return mcp.WithSecrets(func(_ context.Context, name string) (string, error) { return token, nil })
	}
	cfg := mcp.ServerConfig{Name: "terra", URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer {{secret:TOKEN}}"}, Allow: []string{"*"}}

	if _, err := mcp.Connect(t.Context(), cfg, secrets("wrong")); !errors.Is(err, mcp.ErrUnavailable) || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("a wrong token: %v, want ErrUnavailable saying Unauthorized", err)
	}
	c, err := mcp.Connect(t.Context(), cfg, secrets("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := toolNames(c.Tools()); !slices.Equal(got, []string{"terra/lookup", "terra/math_add"}) {
		t.Fatalf("tools %v", got)
	}
	resp, err := generateWith(t, c.Tools(), "terra/math_add", map[string]any{"a": 20, "b": 22})
	if err != nil || resp.Output.(map[string]any)["sum"] != 42.0 {
		t.Errorf("terra/math_add: %v %v", resp, err)
	}
	_, err = toolByName(t, c, "terra/lookup").Run(t.Context(), map[string]any{"key": "k"})
	var e *abi.Error
	if !errors.As(err, &e) || e.Code != abi.CodeNotFound || e.Message != `no entry "k"` {
		t.Errorf("terra/lookup: %v, want the tool's own *abi.Error back", err)
	}
}

// TestServerConfigDecodes decodes an agent file's mcp: list with both YAML packages
// of the module, and from JSON.
func TestServerConfigDecodes(t *testing.T) {
	const doc = `
mcp:
  - name: files
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
    env: {LOG_LEVEL: warn}
    timeout: 10s
    allow: ["read_*"]
  - name: github
    url: https://api.githubcopilot.com/mcp/
    headers: {Authorization: "Bearer {{secret:GITHUB_TOKEN}}"}
    allow: [get_issue]
`
	want := []mcp.ServerConfig{
		{Name: "files", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"},
			Env: map[string]string{"LOG_LEVEL": "warn"}, Timeout: mcp.Duration{Duration: 10 * time.Second}, Allow: []string{"read_*"}},
		{Name: "github", URL: "https://api.githubcopilot.com/mcp/",
			Headers: map[string]string{"Authorization": "Bearer {{secret:GITHUB_TOKEN}}"}, Allow: []string{"get_issue"}},
	}
	type file struct {
		MCP []mcp.ServerConfig `json:"mcp" yaml:"mcp"`
	}
	check := func(how string, got file, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		gb, _ := json.Marshal(got.MCP)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%s:\n got %s\nwant %s", how, gb, wb)
		}
		for _, c := range got.MCP {
			if err := c.Validate(); err != nil {
				t.Errorf("%s: %v", how, err)
			}
		}
	}
	var a, c file
	check("goccy/go-yaml", a, goccyyaml.Unmarshal([]byte(doc), &a))
	js, _ := json.Marshal(file{MCP: want})
	check("JSON", c, json.Unmarshal(js, &c))
	if !strings.Contains(string(js), `"timeout":"10s"`) {
		t.Errorf("JSON %s: want the timeout as \"10s\"", js)
	}
	var d mcp.Duration
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error("a duration of \"soon\" decoded")
	}
}
