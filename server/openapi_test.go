package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/internal/schema"
)

// TestResponsesMatchTheOpenAPIDocument checks real answers, successes and errors,
// against the schemas the document served at /openapi.json gives them.
func TestResponsesMatchTheOpenAPIDocument(t *testing.T) {
	ts := newTestServer(t)
	var doc map[string]any
	ts.do(t, "GET", "/openapi.json", nil, &doc)
	components := doc["components"]

	// check sends a request (with a JSON body, unless headers say otherwise) and checks
	// its answer against the document.
	check := func(method, path, pattern, body string, headers ...string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			if headers[i] == "Host" {
				req.Host = headers[i+1]
			} else {
				req.Header.Set(headers[i], headers[i+1])
			}
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		op, _ := doc["paths"].(map[string]any)[pattern].(map[string]any)[strings.ToLower(method)].(map[string]any)
		if op == nil {
			t.Fatalf("%s %s is not documented", method, pattern)
		}
		r, _ := op["responses"].(map[string]any)[fmt.Sprint(resp.StatusCode)].(map[string]any)
		if r == nil {
			t.Errorf("%s %s answered %d, which is not documented: %s", method, path, resp.StatusCode, data)
			return
		}
		content, _ := r["content"].(map[string]any)
		if content == nil {
			return
		}
		media, _ := content["application/json"].(map[string]any)
		s := map[string]any{"components": components}
		for k, v := range media["schema"].(map[string]any) {
			s[k] = v
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
		if err := schema.Validate(s, v); err != nil {
			t.Errorf("%s %s (%d): %v\n%s", method, path, resp.StatusCode, err, data)
		}
	}

	var info struct{ SessionID string }
	ts.do(t, "POST", "/api/agents/echo/sessions", nil, &info)
	id := info.SessionID
	sessions := "/api/agents/{agent}/sessions"
	session := sessions + "/{session}"
	check("GET", "/api/agents", "/api/agents", "")
	check("GET", "/api/agents/echo", "/api/agents/{agent}", "")
	check("GET", "/api/agents/nope", "/api/agents/{agent}", "")
	check("POST", "/api/agents/echo/sessions", sessions, `{"sessionId": "documented"}`)
	check("POST", "/api/agents/echo/sessions", sessions, `{"bad": 1}`)
	check("POST", "/api/agents/echo/sessions/"+id+"/turns", session+"/turns", `{"text": "hi"}`)
	check("POST", "/api/agents/echo/sessions/"+id+"/turns", session+"/turns", `{"text": `)
	check("POST", "/api/agents/echo/sessions/"+id+"/turns", session+"/turns", `{"resume": {"respond": [{"toolResponse": {"name": "askUser", "ref": "x", "output": 1}}]}}`)
	check("GET", "/api/agents/echo/sessions", sessions, "")
	check("GET", "/api/agents/echo/sessions/"+id, session, "")
	check("GET", "/api/agents/echo/sessions/"+id+"/snapshots", session+"/snapshots", "")
	var snaps struct{ Snapshots []struct{ SnapshotID string } }
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id+"/snapshots", nil, &snaps)
	check("GET", "/api/agents/echo/snapshots/"+snaps.Snapshots[0].SnapshotID, "/api/agents/{agent}/snapshots/{snapshot}", "")
	check("GET", "/api/agents/echo/snapshots/"+snaps.Snapshots[0].SnapshotID[:8], "/api/agents/{agent}/snapshots/{snapshot}", "")
	check("GET", "/api/agents/echo/snapshots/ffffffff", "/api/agents/{agent}/snapshots/{snapshot}", "")
	check("POST", "/api/agents/echo/snapshots/"+snaps.Snapshots[0].SnapshotID+"/abort", "/api/agents/{agent}/snapshots/{snapshot}/abort", "")
	check("POST", "/api/agents/echo/sessions/"+id+"/cancel", session+"/cancel", "")
	check("DELETE", "/api/agents/echo/sessions/"+id, session, "")
	// A routed agent's answers match the same schemas.
	routed := ts.newSession(t, "flights", nil)
	check("GET", "/api/agents/flights", "/api/agents/{agent}", "")
	check("POST", "/api/agents/flights/sessions/"+routed+"/turns", session+"/turns", `{"text": "destination=Oslo"}`)
	check("POST", "/api/agents/flights/sessions/"+routed+"/turns", session+"/turns", `{"text": "passengers=0"}`)
	check("GET", "/api/agents/flights/sessions/"+routed, session, "")
	check("GET", "/api/agents/flights/sessions/"+routed+"/snapshots", session+"/snapshots", "")
	check("GET", "/v1/models", "/v1/models", "")
	check("GET", "/v1/models/echo", "/v1/models/{model}", "")
	check("GET", "/v1/models/nope", "/v1/models/{model}", "")
	chat := "/v1/chat/completions"
	check("POST", chat, chat, `{"model": "echo", "messages": [{"role": "user", "content": "hi"}]}`)
	check("POST", chat, chat, `{"model": "echo", "messages": [{"role": "user", "content": "ask why?"}]}`)
	check("POST", chat, chat, `{"model": "echo", "tools": [{"type": "function", "function": {"name": "f"}}], "messages": [{"role": "user", "content": "call f {}"}]}`)
	check("POST", chat, chat, `{"model": "echo", "response_format": {"type": "json_object"}, "messages": [{"role": "user", "content": "not JSON"}]}`)
	check("POST", chat, chat, `{"model": "echo", "n": 2, "messages": [{"role": "user", "content": "hi"}]}`)
	check("POST", chat, chat, `{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}`)
	// What the guards refuse, and an ID too long.
	check("POST", "/api/agents/echo/sessions/"+id+"/turns", session+"/turns", `{"text": "hi"}`, "Content-Type", "text/plain")
	check("POST", "/api/agents/echo/sessions/"+id+"/turns", session+"/turns", `{"text": "hi"}`, "Sec-Fetch-Site", "cross-site")
	check("GET", "/api/agents", "/api/agents", "", "Host", "evil.example")
	check("GET", "/api/agents/echo/sessions/"+strings.Repeat("x", 1025), session, "")
	check("GET", "/healthz", "/healthz", "")
	check("GET", "/readyz", "/readyz", "")
}
