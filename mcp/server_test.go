package mcp_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/mcp"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

func add(_ context.Context, in addIn) (addOut, error) { return addOut{Sum: in.A + in.B}, nil }

// connect serves tools with a new Server and returns a Go SDK client session on it,
// through in-memory transports.
func connect(t *testing.T, tools []agent.Tool, opts ...mcpsdk.ClientOptions) *mcpsdk.ClientSession {
	t.Helper()
	srv, err := mcp.NewServer(tools)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcpsdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	var co *mcpsdk.ClientOptions
	if len(opts) > 0 {
		co = &opts[0]
	}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, co).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

func call(t *testing.T, cs *mcpsdk.ClientSession, name string, args any) *mcpsdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

func text(res *mcpsdk.CallToolResult) string {
	var s []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

func TestServerToolsAndResults(t *testing.T) {
	tools := []agent.Tool{
		agent.NewTool("math/add", "Adds two integers.", add),
		agent.NewTool("greet", "Greets someone.", func(_ context.Context, in struct {
			Name string `json:"name"`
		}) (string, error) {
			return "Hello, " + in.Name + "!", nil
		}),
		agent.NewTool("lookup", "Fails as a plugin would.", func(_ context.Context, in struct {
			Key string `json:"key"`
		}) (string, error) {
			return "", abi.Errorf(abi.CodeNotFound, "no entry %q", in.Key)
		}),
		agent.NewTool("chart", "Draws.", func(context.Context, struct{}) (*agent.MultipartToolResponse, error) {
			return &agent.MultipartToolResponse{Output: map[string]any{"bars": 2}, Content: []*abi.Part{
				abi.NewMediaPart("image/png", "data:image/png;base64,iVBORw0KGgo="),
				abi.NewMediaPart("application/pdf", "https://example.com/report.pdf"),
			}}, nil
		}),
	}
	cs := connect(t, tools)

	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcpsdk.Tool{}
	for _, tl := range list.Tools {
		byName[tl.Name] = tl
	}
	if len(byName) != 4 || byName["math_add"] == nil || byName["greet"] == nil {
		t.Fatalf("tools %v, want math_add (from math/add), greet, lookup, chart", byName)
	}
	addTool := byName["math_add"]
	if addTool.Description != "Adds two integers." {
		t.Errorf("description %q", addTool.Description)
	}
	in := addTool.InputSchema.(map[string]any)
	if props := in["properties"].(map[string]any); props["a"] == nil || props["b"] == nil {
		t.Errorf("input schema %v lacks a and b", in)
	}
	if out, _ := addTool.OutputSchema.(map[string]any); out["type"] != "object" {
		t.Errorf("output schema %v, want the object schema of addOut", addTool.OutputSchema)
	}
	if byName["greet"].OutputSchema != nil {
		t.Errorf("greet answers a string, yet is served with output schema %v: MCP clients want an object's", byName["greet"].OutputSchema)
	}

	res := call(t, cs, "math_add", map[string]any{"a": 2, "b": 3})
	if res.IsError || text(res) != `{"sum":5}` {
		t.Errorf("math_add: isError %v, text %q", res.IsError, text(res))
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["sum"] != 5.0 {
		t.Errorf("math_add: structured content %v, want {sum: 5}", res.StructuredContent)
	}
	if res := call(t, cs, "greet", map[string]any{"name": "Ada"}); text(res) != "Hello, Ada!" || res.StructuredContent != nil {
		t.Errorf("greet: text %q (a string output is the text as is), structured %v", text(res), res.StructuredContent)
	}

	res = call(t, cs, "chart", nil)
	if len(res.Content) != 3 {
		t.Fatalf("chart: content %v, want text, image, link", res.Content)
	}
	if img, ok := res.Content[1].(*mcpsdk.ImageContent); !ok || img.MIMEType != "image/png" || string(img.Data) != "\x89PNG\r\n\x1a\n" {
		t.Errorf("chart: content[1] = %#v, want the PNG decoded", res.Content[1])
	}
	if link, ok := res.Content[2].(*mcpsdk.ResourceLink); !ok || link.URI != "https://example.com/report.pdf" || link.Name != "report.pdf" {
		t.Errorf("chart: content[2] = %#v, want a link to the PDF", res.Content[2])
	}
}

// TestServerErrors checks the MCP specification's split: bad input and a tool's own
// error are tool execution errors the model reads (isError, the error in _meta too),
// an unknown tool is a protocol error.
func TestServerErrors(t *testing.T) {
	ran := 0
	cs := connect(t, []agent.Tool{
		agent.NewTool("math/add", "Adds.", func(ctx context.Context, in addIn) (addOut, error) {
			ran++
			return add(ctx, in)
		}),
		agent.NewTool("lookup", "Fails.", func(_ context.Context, in struct {
			Key string `json:"key"`
		}) (string, error) {
			return "", abi.Errorf(abi.CodeNotFound, "no entry %q", in.Key)
		}),
		agent.NewTool("broken", "Fails without a code.", func(context.Context, struct{}) (string, error) {
			return "", errors.New("disk on fire")
		}),
		agent.NewTool("bomb", "Panics.", func(context.Context, struct{}) (string, error) {
			panic("a bug in the tool")
		}),
		agent.NewTool("slow", "Times out.", func(context.Context, struct{}) (string, error) {
			return "", fmt.Errorf("plugin slow: timed out after 1s (%w)", context.DeadlineExceeded)
		}),
		agent.NewTool("total", "Sums items.", func(_ context.Context, in struct {
			Items []*addIn `json:"items"`
		}) (int, error) {
			ran++
			n := 0
			for _, it := range in.Items {
				n += it.A + it.B
			}
			return n, nil
		}),
	})

	for _, c := range []struct {
		tool     string
		args     any
		code     abi.ErrorCode
		contains string
	}{
		{"math_add", map[string]any{"a": "two", "b": 3}, abi.CodeInvalidInput, "/a"},
		{"math_add", map[string]any{"a": 1, "b": 2, "c": 3}, abi.CodeInvalidInput, "additional"},
		{"lookup", map[string]any{"key": "x"}, abi.CodeNotFound, `not_found: no entry "x"`},
		{"broken", nil, abi.CodeInternal, "disk on fire"},
		// Arguments of the wrong kind, nulls among them, are refused before the tool
		// runs (its schema's), as bad input.
		{"total", map[string]any{"items": []any{nil}}, abi.CodeInvalidInput, "/items/0"},
		{"total", map[string]any{"items": []any{map[string]any{"a": 1}, 2}}, abi.CodeInvalidInput, "/items/1"},
		{"total", map[string]any{"items": map[string]any{"a": 1}}, abi.CodeInvalidInput, "/items"},
		{"total", map[string]any{"items": []any{map[string]any{"a": nil}}}, abi.CodeInvalidInput, "/items/0/a"},
		// A panic is the call's error, not the server's end: the next call runs.
		{"bomb", nil, abi.CodeInternal, "a bug in the tool"},
		{"slow", nil, abi.CodeLimitExceeded, "timed out"},
		{"math_add", map[string]any{"a": 1, "b": 2}, "", ""},
	} {
		if c.code == "" {
			if res := call(t, cs, c.tool, c.args); res.IsError {
				t.Errorf("%s after the failures: %s", c.tool, text(res))
			}
			continue
		}
		res := call(t, cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(text(res), c.contains) {
			t.Errorf("%s(%v): isError %v, text %q, want an error containing %q", c.tool, c.args, res.IsError, text(res), c.contains)
		}
		b, _ := json.Marshal(res.Meta[mcp.ErrorMetaKey])
		var e abi.Error
		if err := json.Unmarshal(b, &e); err != nil || e.Code != c.code {
			t.Errorf("%s(%v): _meta %s = %s, want an error with code %s", c.tool, c.args, mcp.ErrorMetaKey, b, c.code)
		}
	}
	if ran != 1 {
		t.Errorf("the tools ran %d times, want once: never with input their schema refuses, and math/add after the failures", ran)
	}

	_, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "nope"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown tool: %v, want a JSON-RPC invalid params error", err)
	}
}

func TestNewServerRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		tools []agent.Tool
		want  string
	}{
		{"clash", []agent.Tool{agent.NewTool("a/b", "", add), agent.NewTool("a_b", "", add)}, `both served as "a_b"`},
		{"bad name", []agent.Tool{agent.NewTool("a:b", "", add)}, `not ':'`},
		{"not an object", []agent.Tool{agent.NewTool("echo", "", func(_ context.Context, s string) (string, error) { return s, nil })}, "take an object"},
	} {
		if _, err := mcp.NewServer(c.tools); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestServerProgress checks that status reports become progress notifications for
// the caller's token, always increasing, with the reports' own numbers where they
// give them.
func TestServerProgress(t *testing.T) {
	report := agent.NewTool("work", "Works in steps.", func(ctx context.Context, _ struct{}) (string, error) {
		for _, s := range []any{
			map[string]any{"progress": 1, "total": 4, "message": "one"},
			map[string]any{"progress": 3, "total": 4},
			map[string]any{"progress": 2, "message": "went back"}, // must still increase
			"plain",
		} {
			if err := agent.ReportStatus(ctx, s); err != nil {
				return "", err
			}
		}
		return "done", nil
	})
	notes := make(chan *mcpsdk.ProgressNotificationParams, 10)
	cs := connect(t, []agent.Tool{report}, mcpsdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
			notes <- req.Params
		},
	})
	if _, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "work"}); err != nil {
		t.Fatal(err)
	}
	params := &mcpsdk.CallToolParams{Name: "work"}
	params.SetProgressToken("tok")
	if _, err := cs.CallTool(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	// The client handles notifications concurrently, in no set order.
	var got []*mcpsdk.ProgressNotificationParams
	for range 4 {
		got = append(got, <-notes)
	}
	slices.SortFunc(got, func(a, b *mcpsdk.ProgressNotificationParams) int { return cmp.Compare(a.Progress, b.Progress) })
	want := []struct {
		progress, total float64
		message         string
	}{{1, 4, "one"}, {3, 4, ""}, {4, 0, "went back"}, {5, 0, `"plain"`}}
	for i, w := range want {
		g := got[i]
		if g.ProgressToken != "tok" || g.Progress != w.progress || g.Total != w.total || g.Message != w.message {
			t.Errorf("notification %d: %+v, want %+v", i, *g, w)
		}
	}
	select {
	case n := <-notes:
		t.Errorf("unexpected notification %+v (the call without a token asked for none)", *n)
	default:
	}
}

// TestServerCancellation checks that a client's cancellation reaches the tool.
func TestServerCancellation(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan error, 1)
	block := agent.NewTool("block", "Waits until cancelled.", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return "", ctx.Err()
	})
	cs := connect(t, []agent.Tool{block})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "block"})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v", err)
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Errorf("the tool's context ended with %v, want context.Canceled", err)
	}
}

// A page of another site cannot call the tools of a server on its reader's machine:
// its requests, which carry their Origin (or Sec-Fetch-Site), are refused.
func TestServerHandlerRefusesOtherSites(t *testing.T) {
	srv, err := mcp.NewServer([]agent.Tool{agent.NewTool("math/add", "Adds.", add)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler(nil))
	defer ts.Close()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`
	for _, tc := range []struct {
		header, value string
		refused       bool
	}{
		{"Sec-Fetch-Site", "cross-site", true},
		{"Origin", "https://evil.example", true},
		{"Sec-Fetch-Site", "same-origin", false},
		{"", "", false},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if refused := resp.StatusCode == http.StatusForbidden; refused != tc.refused {
			t.Errorf("%s: %s: %d, refused %v, want %v", tc.header, tc.value, resp.StatusCode, refused, tc.refused)
		}
	}
}
