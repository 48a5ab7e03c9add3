package mcp_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/internal/testenv"
	"github.com/terrarium-ai/terrarium/mcp"
)

// TestTypeScriptServer uses, from Generate, the tools of an MCP server nobody here
// wrote the protocol side of: one written with the official TypeScript SDK
// (testdata/ts/server.mjs), in a Node process.
func TestTypeScriptServer(t *testing.T) {
	dir, node := testenv.NPMInstall(t, filepath.Join("testdata", "ts"))
	c, err := mcp.Connect(t.Context(), mcp.ServerConfig{
		Name: "ts", Command: node, Args: []string{filepath.Join(dir, "server.mjs")}, Allow: []string{"*"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := toolNames(c.Tools()); strings.Join(got, " ") != "ts/add ts/crash ts/fail" {
		t.Fatalf("tools %v", got)
	}

	resp, err := generateWith(t, c.Tools(), "ts/add", map[string]any{"a": 2.5, "b": 4})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := resp.Output.(map[string]any); out["sum"] != 6.5 {
		t.Errorf("ts/add answered %#v, want {sum: 6.5}", resp.Output)
	}
	// The server's zod schema, seen by Generate as a JSON Schema.
	if _, err := generateWith(t, c.Tools(), "ts/add", map[string]any{"a": "2"}); !errors.Is(err, agent.ErrInvalidToolInput) {
		t.Errorf("ts/add with a string and no b: %v, want ErrInvalidToolInput", err)
	}
	if _, err := generateWith(t, c.Tools(), "ts/fail", nil); err == nil || !strings.Contains(err.Error(), "mcp tool ts/fail: the answer is not available today") {
		t.Errorf("ts/fail: %v, want the tool's error text", err)
	}

	_, err = generateWith(t, c.Tools(), "ts/crash", nil)
	t.Logf("ts/crash: %v", err)
	if !errors.Is(err, mcp.ErrUnavailable) || !strings.Contains(err.Error(), "connection closed during the call") {
		t.Errorf("ts/crash: %v, want an ErrUnavailable saying the connection closed", err)
	}
}
