package server_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/server"
)

// bearer adds an API key to the requests of an MCP client.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b != "" {
		r.Header.Set("Authorization", "Bearer "+string(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectMCP opens an MCP session on the server's /mcp with key.
func connectMCP(t *testing.T, url, key string) (*mcpsdk.ClientSession, error) {
	t.Helper()
	return mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(),
		&mcpsdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer(key)}}, nil)
}

func mcpTools(t *testing.T, cs *mcpsdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// note calls the note tool and returns the notes it answers.
func note(t *testing.T, cs *mcpsdk.ClientSession, text string) []any {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "note", Arguments: map[string]any{"text": text}})
	if err != nil || res.IsError {
		t.Fatalf("note: %v %+v", err, res)
	}
	notes, _ := res.StructuredContent.(map[string]any)
	if notes == nil {
		// An array answers as text.
		return []any{res.Content[0].(*mcpsdk.TextContent).Text}
	}
	return nil
}

// /mcp serves the agents' tools (not askUser, which waits for a turn's user); each
// MCP session has a session of its own, whose state the tools keep and the store
// keeps.
func TestMCPOnTheServer(t *testing.T) {
	ts := newTestServer(t)
	cs, err := connectMCP(t, ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if names := mcpTools(t, cs); !slices.Equal(names, []string{"note", "upper"}) {
		t.Errorf("tools %v, want the agents' note and upper", names)
	}
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "upper", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcpsdk.TextContent).Text != "HI" {
		t.Errorf("upper: %v %+v", err, res)
	}
	note(t, cs, "a")
	if got := note(t, cs, "b"); !slices.Equal(got, []any{`["a","b"]`}) {
		t.Errorf("the session's second note: %v", got)
	}
	other, err := connectMCP(t, ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := note(t, other, "c"); !slices.Equal(got, []any{`["c"]`}) {
		t.Errorf("another session's note: %v, want its own", got)
	}
	snaps, err := ts.dep.ToolSessions().Snapshots(t.Context(), cs.ID())
	if err != nil || len(snaps) != 2 || snaps[1].ParentID != snaps[0].SnapshotID {
		t.Fatalf("the session's snapshots: %v %+v", err, snaps)
	}
	if notes := snaps[1].State.Custom; string(notes) != `{"notes":["a","b"]}` {
		t.Errorf("the last snapshot keeps %s", notes)
	}
}

// With tenants, /mcp needs a key; a key sees the tools of the agents it may use, and
// its MCP sessions are its own.
func TestMCPTenants(t *testing.T) {
	ts := newTenantServer(t)
	var narrowed server.NewKey
	ts.call(t, adminKey, "POST", "/admin/tenants/a/keys", server.KeyRequest{Agents: []string{"gate"}}, &narrowed)
	for key, want := range map[string][]string{ts.key["a"]: {"note", "upper"}, narrowed.Key: {"upper"}} {
		cs, err := connectMCP(t, ts.URL, key)
		if err != nil {
			t.Fatal(err)
		}
		if names := mcpTools(t, cs); !slices.Equal(names, want) {
			t.Errorf("key %s sees %v, want %v", key[:12], names, want)
		}
		cs.Close()
	}
	a, err := connectMCP(t, ts.URL, ts.key["a"])
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	note(t, a, "a's")
	b, err := connectMCP(t, ts.URL, ts.key["b"])
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := note(t, b, "b's"); !slices.Equal(got, []any{`["b's"]`}) {
		t.Errorf("b's note: %v, want its own", got)
	}
	// a's MCP session is not b's to use.
	list := `{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/mcp", strings.NewReader(list))
	req.Header.Set("Authorization", "Bearer "+ts.key["b"])
	req.Header.Set("Mcp-Session-Id", a.ID())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("b's key in a's MCP session: %d, want 404", resp.StatusCode)
	}
	for _, key := range []string{"", "nonsense", ts.key["a"] + "x"} {
		if cs, err := connectMCP(t, ts.URL, key); err == nil {
			cs.Close()
			t.Errorf("key %q connects", key)
		}
		if resp := ts.call(t, key, "POST", "/mcp", list, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: %d, want 401", key, resp.StatusCode)
		}
	}
}

// A shutdown ends the MCP sessions, whose event streams would otherwise hold the HTTP
// server's graceful shutdown until its deadline.
func TestMCPShutdown(t *testing.T) {
	ts := newTestServer(t)
	cs, err := connectMCP(t, ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	mcpTools(t, cs) // the client's event stream is open
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ts.Config.Shutdown(ctx) }()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("the HTTP server's shutdown: %v", err)
	}
	if _, err := cs.ListTools(t.Context(), nil); err == nil {
		t.Error("the MCP session outlived the shutdown")
	}
}
