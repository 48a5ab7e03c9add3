package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/server"
)

// send sends a request with a body of the given content type and headers, and
// returns its status and error code.
func send(t *testing.T, url, method, contentType, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Code string }
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Code
}

// A web page can send any site a form or text/plain without asking first: a server
// without keys runs nothing on such a body, nor on a request a page of another site
// sends, on any surface (turns, sessions, chat completions, the reflection API).
func TestPagesOfOtherSitesRunNothing(t *testing.T) {
	ts, rs := reflectionServer(t)
	id := ts.newSession(t, "echo", nil)
	turn := `{"text": "hi"}`
	for _, tc := range []struct{ name, url, body string }{
		{"turn", ts.URL + "/api/agents/echo/sessions/" + id + "/turns", turn},
		{"session", ts.URL + "/api/agents/echo/sessions", `{}`},
		{"chat completion", ts.URL + "/v1/chat/completions", `{"model": "echo", "messages": [{"role": "user", "content": "hi"}]}`},
		{"runAction", rs.URL + "/api/runAction", `{"key": "/session-flow/echo", "input": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}}`},
	} {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
			if status, code := send(t, tc.url, "POST", ct, tc.body, nil); status != http.StatusUnsupportedMediaType || code != "unsupported_media_type" {
				t.Errorf("%s as %q: %d %s, want 415 unsupported_media_type", tc.name, ct, status, code)
			}
		}
		for _, h := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Origin": "https://evil.example"},
		} {
			if status, code := send(t, tc.url, "POST", "application/json", tc.body, h); status != http.StatusForbidden || code != "cross_origin" {
				t.Errorf("%s with %v: %d %s, want 403 cross_origin", tc.name, h, status, code)
			}
		}
	}
	// None of them ran a turn.
	var info server.SessionInfo
	if ts.do(t, "GET", "/api/agents/echo/sessions/"+id, nil, &info); info.Snapshot != nil {
		t.Errorf("a refused request ran a turn: %+v", info.Snapshot)
	}
	// The page's own requests, and a client's, are served.
	for _, h := range []map[string]string{nil, {"Sec-Fetch-Site": "same-origin"}, {"Origin": ts.URL}} {
		if status, _ := send(t, ts.URL+"/api/agents/echo/sessions/"+id+"/turns", "POST", "application/json; charset=utf-8", turn, h); status != http.StatusOK {
			t.Errorf("a turn with %v: %d", h, status)
		}
	}
}

// A server without keys answers only under loopback names, IP addresses and the
// hosts it is told: a page of a site whose name its DNS points at the server (DNS
// rebinding) reaches nothing.
func TestServerOfOneDeploymentChecksTheHost(t *testing.T) {
	ts := newTestServer(t, server.WithAllowedHosts("chat.example.org"))
	for host, want := range map[string]int{
		"localhost": 200, "localhost:8080": 200, "app.localhost": 200, "127.0.0.1:9": 200, "[::1]:80": 200, "10.0.0.7": 200,
		"chat.example.org": 200, "CHAT.example.org.:443": 200,
		"evil.example": 403, "evil.example:8080": 403, "localhost.evil.example": 403, "example.org": 403,
	} {
		if status, code := send(t, ts.URL+"/api/agents", "GET", "", "", map[string]string{"Host": host}); status != want ||
			want == 403 && code != "host_not_allowed" {
			t.Errorf("Host %s: %d %s, want %d", host, status, code, want)
		}
	}
	if status, _ := send(t, ts.URL+"/", "GET", "", "", map[string]string{"Host": "evil.example"}); status != http.StatusForbidden {
		t.Errorf("the page under another host: %d", status)
	}
}

// The page runs its own script and style only, and no other page frames it.
func TestPageSecurityHeaders(t *testing.T) {
	ts := newTestServer(t)
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("X-Frame-Options %q", got)
	}
}

// The runtime file names a port that runs any action: only its owner reads it.
func TestRuntimeFileIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path, err := server.WriteRuntimeFile(dir, "r1", "http://127.0.0.1:3100")
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("the runtime file %s has mode %v, want 0600", filepath.Base(path), mode)
	}
}
