package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/server"
)

// newSessionOf opens a session of the agent with key.
func (ts *tenantServer) newSessionOf(t *testing.T, key, agent string) string {
	t.Helper()
	var info server.SessionInfo
	if resp := ts.call(t, key, "POST", "/api/agents/"+agent+"/sessions", nil, &info); resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating a session of %s: %d", agent, resp.StatusCode)
	}
	return info.SessionID
}

// turnOf runs a turn of the session, and returns the response and its error envelope.
func (ts *tenantServer) turnOf(t *testing.T, key, agent, id string) (*http.Response, struct{ Code, Message string }) {
	t.Helper()
	var e struct{ Code, Message string }
	resp := ts.call(t, key, "POST", "/api/agents/"+agent+"/sessions/"+id+"/turns", map[string]any{"text": "hi"}, &e)
	return resp, e
}

// A tenant whose turns used its model tokens of the day is refused new turns, told
// when the day frees enough; another tenant is still served.
func TestTenantModelTokensQuota(t *testing.T) {
	// Each turn of work uses 100 tokens: a's second turn starts within its 150, and
	// overruns them.
	ts := newTenantServerOf(t, "tenants:\n  - id: a\n    quotas: {modelTokensPerDay: 150}\n  - id: b\n    quotas: {modelTokensPerDay: 150}\n")
	a, b := ts.key["a"], ts.key["b"]
	as := ts.newSessionOf(t, a, "work")
	for i := range 2 {
		if resp, e := ts.turnOf(t, a, "work", as); resp.StatusCode != http.StatusOK {
			t.Fatalf("a's turn %d: %d %+v", i+1, resp.StatusCode, e)
		}
	}
	resp, e := ts.turnOf(t, a, "work", as)
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	// The window frees the first turn's tokens a day after it, less the seconds since.
	if resp.StatusCode != http.StatusTooManyRequests || e.Code != "over_quota" || !strings.Contains(e.Message, "modelTokensPerDay") ||
		retry < 86400-60*60 || retry > 86400 {
		t.Errorf("a's turn past its tokens: %d, Retry-After %q, %+v", resp.StatusCode, resp.Header.Get("Retry-After"), e)
	}
	bs := ts.newSessionOf(t, b, "work")
	if resp, e := ts.turnOf(t, b, "work", bs); resp.StatusCode != http.StatusOK {
		t.Errorf("b's turn while a is past its tokens: %d %+v", resp.StatusCode, e)
	}
}

// A tenant whose sessions take its stored bytes is refused new turns, without a
// Retry-After (waiting frees nothing), and keeps what it stored; another tenant is
// still served.
func TestTenantStoredBytesQuota(t *testing.T) {
	ts := newTenantServerOf(t, "tenants:\n  - id: a\n    quotas: {storedBytes: 1}\n  - id: b\n    quotas: {storedBytes: 1000000}\n")
	a, b := ts.key["a"], ts.key["b"]
	as := ts.newSessionOf(t, a, "work")
	if resp, e := ts.turnOf(t, a, "work", as); resp.StatusCode != http.StatusOK {
		t.Fatalf("a's first turn: %d %+v", resp.StatusCode, e)
	}
	resp, e := ts.turnOf(t, a, "work", as)
	if resp.StatusCode != http.StatusTooManyRequests || e.Code != "over_quota" || !strings.Contains(e.Message, "storedBytes") ||
		resp.Header.Get("Retry-After") != "" {
		t.Errorf("a's turn past its stored bytes: %d, Retry-After %q, %+v", resp.StatusCode, resp.Header.Get("Retry-After"), e)
	}
	var info server.SessionInfo
	if ts.call(t, a, "GET", "/api/agents/work/sessions/"+as, nil, &info); info.Snapshot == nil {
		t.Error("a's session lost its snapshot when its turn was refused")
	}
	bs := ts.newSessionOf(t, b, "work")
	for i := range 2 {
		if resp, e := ts.turnOf(t, b, "work", bs); resp.StatusCode != http.StatusOK {
			t.Errorf("b's turn %d while a is past its stored bytes: %d %+v", i+1, resp.StatusCode, e)
		}
	}
}

// A tenant's turn past its concurrentTurns waits in its line, when the line has room,
// and runs once a place frees; one more is refused at once.
func TestTenantQueuedTurns(t *testing.T) {
	ts := newTenantServerOf(t, "tenants:\n  - id: a\n    quotas: {concurrentTurns: 1, queuedTurns: 1, turnQueueTimeout: 1h}\n")
	a := ts.key["a"]
	release := ts.holdTurn(t, "a")
	queued := make(chan int)
	go func() {
		resp, _ := ts.turnOf(t, a, "echo", ts.newSessionOf(t, a, "echo"))
		queued <- resp.StatusCode
	}()
	// The limiter's count is the handshake: the turn is in line.
	for ts.limiters["a"].Waiting() == 0 {
		select {
		case status := <-queued:
			release()
			t.Fatalf("a's second turn did not wait in line: %d", status)
		default:
			runtime.Gosched()
		}
	}
	resp, e := ts.turnOf(t, a, "echo", ts.newSessionOf(t, a, "echo"))
	if resp.StatusCode != http.StatusTooManyRequests || e.Code != "over_quota" || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a's third turn at once, the line full: %d %+v", resp.StatusCode, e)
	}
	release()
	if status := <-queued; status != http.StatusOK {
		t.Errorf("a's queued turn, once the held one ended: %d", status)
	}
}

// A client that leaves while its turn waits in line is not answered, nor logged as a
// failure: clients that give up are no server error, and a flood of them no log storm.
func TestTenantQueuedTurnClientLeaves(t *testing.T) {
	var log syncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	// Registered first, so run last: once the server has finished every request.
	t.Cleanup(func() { slog.SetDefault(prev) })
	t.Cleanup(func() {
		if strings.Contains(log.String(), "request failed") {
			t.Errorf("a client that left its place in line was logged as a failure:\n%s", log.String())
		}
	})
	ts := newTenantServerOf(t, "tenants:\n  - id: a\n    quotas: {concurrentTurns: 1, queuedTurns: 1}\n")
	a := ts.key["a"]
	defer ts.holdTurn(t, "a")()

	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/api/agents/echo/sessions/"+ts.newSessionOf(t, a, "echo")+"/turns",
		strings.NewReader(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a)
	req.Header.Set("Content-Type", "application/json")
	left := make(chan error, 1)
	go func() {
		_, err := ts.Client().Do(req)
		left <- err
	}()
	for ts.limiters["a"].Waiting() == 0 {
		select {
		case err := <-left:
			t.Fatalf("the turn did not wait in line: %v", err)
		default:
			runtime.Gosched()
		}
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request: %v, want it cancelled", err)
	}
	// The place is held: only the client's leaving takes its turn out of line.
	for ts.limiters["a"].Waiting() != 0 {
		runtime.Gosched()
	}
}

// holdTurn starts a turn of tenant id on its gate agent and returns once the turn
// runs; release lets it end, and checks that it succeeded.
func (ts *tenantServer) holdTurn(t *testing.T, id string) (release func()) {
	t.Helper()
	key := ts.key[id]
	held := ts.newSessionOf(t, key, "gate")
	done := make(chan int, 1)
	go func() {
		resp, _ := ts.turnOf(t, key, "gate", held)
		done <- resp.StatusCode
	}()
	<-ts.gates[id].started
	return func() {
		t.Helper()
		ts.gates[id].release <- struct{}{}
		if status := <-done; status != http.StatusOK {
			t.Errorf("%s's held turn: %d", id, status)
		}
	}
}

// A detached turn holds its tenant's place of concurrentTurns until it really ends,
// not only until its request does: its client is gone, but it runs on.
func TestDetachedTurnHoldsItsPlace(t *testing.T) {
	ts := newTenantServer(t) // a: concurrentTurns 1
	a := ts.key["a"]
	held := ts.newSessionOf(t, a, "gate")
	var e struct{ Code, Message string }
	if resp := ts.call(t, a, "POST", "/api/agents/gate/sessions/"+held+"/turns", map[string]any{"text": "go on", "detach": true}, &e); resp.StatusCode != http.StatusOK {
		t.Fatalf("the detached turn: %d %+v", resp.StatusCode, e)
	}
	<-ts.gates["a"].started // it runs, detached
	resp, e := ts.turnOf(t, a, "echo", ts.newSessionOf(t, a, "echo"))
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(e.Message, "concurrentTurns") {
		t.Errorf("a turn while the detached one runs: %d %+v, want 429 concurrentTurns", resp.StatusCode, e)
	}
	ts.gates["a"].release <- struct{}{}
	// Once it settles, its place is free: the next turn runs (the place is given back
	// just after the settle, so the first try may come a moment early).
	var status int
	for range 100 {
		if resp, _ = ts.turnOf(t, a, "echo", ts.newSessionOf(t, a, "echo")); resp.StatusCode != http.StatusTooManyRequests {
			status = resp.StatusCode
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status != http.StatusOK {
		t.Errorf("a turn once the detached one ended: %d", resp.StatusCode)
	}
}

// A tenant's session flow run through the reflection API (serve -dev) is a turn as any
// other: refused past the tenant's concurrentTurns, and holding its place while it runs.
func TestReflectionRunsWithinTheTenantsQuotas(t *testing.T) {
	ts := newTenantServer(t) // a: concurrentTurns 1
	rs := httptest.NewServer(ts.srv.ReflectionHandler("runtime-1"))
	t.Cleanup(rs.Close)
	a := ts.key["a"]
	run := func(agent string) map[string]any {
		t.Helper()
		var out map[string]any
		request(t, rs, a, "POST", "/api/runAction", `{"key": "/session-flow/`+agent+`", "input": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}}`, &out)
		return out
	}
	release := ts.holdTurn(t, "a")
	out := run("echo")
	if e, _ := out["error"].(map[string]any); e == nil || e["code"] != float64(8) || !strings.Contains(e["message"].(string), "concurrentTurns") {
		t.Errorf("a run while a's turn runs: %v, want RESOURCE_EXHAUSTED (8) naming concurrentTurns", out)
	}
	release()
	if out := run("echo"); out["result"] == nil {
		t.Fatalf("a run once a's turn ended: %v", out)
	}

	// A run holds its place: a turn meanwhile is refused.
	ran := make(chan map[string]any)
	go func() { ran <- run("gate") }()
	<-ts.gates["a"].started
	if resp, e := ts.turnOf(t, a, "echo", ts.newSessionOf(t, a, "echo")); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a turn while a run runs: %d %+v, want 429", resp.StatusCode, e)
	}
	ts.gates["a"].release <- struct{}{}
	if out := <-ran; out["result"] == nil {
		t.Errorf("the held run: %v", out)
	}
}
