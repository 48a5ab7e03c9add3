package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store"
)

// awaitStatus polls path until it answers status, for at most 10 seconds.
func (ts *testServer) awaitStatus(t *testing.T, path string, status int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := ts.do(t, "GET", path, nil, nil)
		if resp.StatusCode == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: still %d after 10 s, want %d", path, resp.StatusCode, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// streamed is what a turn sent by streamTurnAsync got: its events, or an error.
type streamed struct {
	status int
	events []event
	err    error
}

// streamTurnAsync sends a turn asking for server-sent events; it may run in any
// goroutine.
func (ts *testServer) streamTurnAsync(t *testing.T, agent, session, text string) <-chan streamed {
	out := make(chan streamed, 1)
	body, _ := json.Marshal(map[string]string{"text": text})
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", fmt.Sprintf("%s/api/agents/%s/sessions/%s/turns", ts.URL, agent, session), bytes.NewReader(body))
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			out <- streamed{err: err}
			return
		}
		defer resp.Body.Close()
		out <- streamed{status: resp.StatusCode, events: readEvents(t, resp.Body)}
	}()
	return out
}

// answered waits at most 10 seconds for a turn's answer.
func answered(t *testing.T, turn <-chan streamed) streamed {
	t.Helper()
	select {
	case s := <-turn:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the turn was not answered in 10 s")
		return streamed{}
	}
}

// endOf returns the last snapshot a turn's events announced and its finish reason.
func endOf(t *testing.T, s streamed) (snapshot string, reason abi.FinishReason) {
	t.Helper()
	if s.err != nil || s.status != http.StatusOK {
		t.Fatalf("turn: status %d, %v", s.status, s.err)
	}
	for _, e := range s.events {
		var c session.AnyChunk
		if e.name != "" || json.Unmarshal([]byte(e.data), &c) != nil {
			t.Fatalf("turn: event %s %s", e.name, e.data)
		}
		if c.SnapshotCreated != "" {
			snapshot = c.SnapshotCreated
		}
		if c.EndTurn {
			reason = c.FinishReason
		}
	}
	return snapshot, reason
}

// snapshotStatus reads a snapshot's status on ts.
func (ts *testServer) snapshotStatus(t *testing.T, agent, id string) session.SnapshotStatus {
	t.Helper()
	var snap struct {
		Status session.SnapshotStatus `json:"status"`
	}
	if resp := ts.do(t, "GET", "/api/agents/"+agent+"/snapshots/"+id, nil, &snap); resp.StatusCode != http.StatusOK {
		t.Fatalf("snapshot %s: status %d", id, resp.StatusCode)
	}
	return snap.Status
}

// Draining: the running turn finishes and is answered; meanwhile /readyz fails, new
// sessions and turns are refused with 503 shutting_down and a Retry-After, and reads
// and /healthz are still served.
func TestDrainLetsRunningTurnsFinish(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "gate", nil)
	other := ts.newSession(t, "echo", nil)
	turn := ts.streamTurnAsync(t, "gate", id, "finish me")
	<-ts.gate.started
	drained := make(chan error, 1)
	go func() { drained <- ts.srv.Drain(t.Context()) }()
	ts.awaitStatus(t, "/readyz", http.StatusServiceUnavailable)

	for _, req := range []struct{ path, body string }{
		{"/api/agents/echo/sessions/" + other + "/turns", `{"text": "refused"}`},
		{"/api/agents/echo/sessions", `{}`},
		{"/v1/chat/completions", `{"model": "echo", "messages": [{"role": "user", "content": "refused"}]}`},
	} {
		var body json.RawMessage // the API's error, or the OpenAI-compatible one
		resp := ts.do(t, "POST", req.path, req.body, &body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("POST %s while draining: %d, Retry-After %q, want 503 and 1", req.path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if !strings.Contains(string(body), `"code":"shutting_down"`) {
			t.Errorf("POST %s while draining: %s, want the code shutting_down", req.path, body)
		}
	}
	for _, path := range []string{"/healthz", "/api/agents/echo/sessions/" + other} {
		if resp := ts.do(t, "GET", path, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s while draining: %d", path, resp.StatusCode)
		}
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while a turn runs", err)
	default:
	}
	close(ts.gate.release)
	if snap, reason := endOf(t, answered(t, turn)); snap == "" || reason != abi.FinishStop {
		t.Errorf("the running turn ended %q with snapshot %q, want stop and a snapshot", reason, snap)
	}
	if err := <-drained; err != nil {
		t.Errorf("Drain: %v", err)
	}
}

// detachedByDrain starts two hosts sharing a store and a turn of a session on the
// first, which drains past its deadline while the turn runs: the turn is detached. It
// returns the hosts, the session and the turn's pending snapshot.
func detachedByDrain(t *testing.T) (a, b *testServer, id, pending string) {
	t.Helper()
	shared := store.NewMemory()
	a, b = newHost(t, shared), newHost(t, shared)
	id = a.newSession(t, "gate", nil)
	turn := a.streamTurnAsync(t, "gate", id, "long")
	<-a.gate.started
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the drain's deadline has passed
	if err := a.srv.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	pending, reason := endOf(t, answered(t, turn))
	if reason != session.FinishDetached || pending == "" {
		t.Fatalf("the turn running at the drain's deadline ended %q with snapshot %q, want detached and its pending snapshot", reason, pending)
	}
	return a, b, id, pending
}

// A turn still running at the drain's deadline is detached: its client gets the
// pending snapshot, the turn runs on, Shutdown waits for it to settle in the store,
// and another host sharing the store continues the session from there.
func TestDrainDetachesTurnsPastItsDeadline(t *testing.T) {
	a, b, id, pending := detachedByDrain(t)
	if st := b.snapshotStatus(t, "gate", pending); st != session.StatusPending {
		t.Fatalf("the detached turn's snapshot on the other host: %q, want pending", st)
	}
	var e abi.Error
	if resp := b.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", `{"text": "too soon"}`, &e); resp.StatusCode != http.StatusConflict || e.Code != "not_resumable" {
		t.Errorf("a turn on the other host before the detached turn settled: %d %+v, want 409 not_resumable", resp.StatusCode, e)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- a.srv.Shutdown(t.Context()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) before the detached turn settled", err)
	case <-time.After(50 * time.Millisecond):
	}
	a.gate.release <- struct{}{}
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if st := b.snapshotStatus(t, "gate", pending); st != session.StatusCompleted {
		t.Fatalf("after Shutdown the detached turn's snapshot is %q, want completed", st)
	}
	nextTurnGoesOn(t, b, id)
	if n := b.messagesOf(t, "gate", id); n != 4 {
		t.Errorf("the session holds %d messages, want 4: the detached turn's and the next", n)
	}
}

// nextTurnGoesOn sends the session's next turn to host b and fails the test unless it
// is answered.
func nextTurnGoesOn(t *testing.T, b *testServer, id string) {
	t.Helper()
	next := make(chan turnResult, 1)
	go func() { next <- b.sendTurn(t.Context(), "gate", id, "after") }()
	<-b.gate.started
	b.gate.release <- struct{}{}
	if r := <-next; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("the next turn on the other host: %+v", r)
	}
}

// A detached turn still running at Shutdown's deadline is aborted, so that no
// snapshot stays pending for a host that is gone: the other host continues from the
// aborted snapshot.
func TestShutdownAbortsDetachedTurnsPastItsDeadline(t *testing.T) {
	a, b, id, pending := detachedByDrain(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the shutdown's deadline has passed
	if err := a.srv.Shutdown(ctx); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("Shutdown past its deadline with a detached turn running: %v, want an error saying it was aborted", err)
	}
	if st := b.snapshotStatus(t, "gate", pending); st != session.StatusAborted {
		t.Fatalf("the detached turn's snapshot: %q, want aborted", st)
	}
	nextTurnGoesOn(t, b, id)
}

// Draining closes each WebSocket with StatusReconnect: an idle one at once, one
// running a turn once its client has the turn's last chunk. A new one is refused with
// 503 and a Retry-After.
func TestDrainClosesWebSockets(t *testing.T) {
	ts := newTestServer(t)
	idle := dialWS(t, ts, "echo", "")
	busy := dialWS(t, ts, "gate", "")
	busy.send(t, map[string]any{"text": "hold"})
	<-ts.gate.started
	go ts.srv.Drain(t.Context())

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, _, err := idle.c.Read(ctx); websocket.CloseStatus(err) != server.StatusReconnect {
		t.Errorf("the idle socket: %v, want closed with %d", err, server.StatusReconnect)
	}
	_, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/agents/echo/connect", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a new socket while draining: %v, want refused with 503 and Retry-After", err)
	}

	close(ts.gate.release)
	for {
		m := busy.next(t)
		if m.Type != "chunk" {
			t.Fatalf("the busy socket's turn: %s %+v", m.Type, m.Error)
		}
		if m.Chunk.EndTurn {
			if m.Chunk.FinishReason != abi.FinishStop {
				t.Errorf("the busy socket's turn ended %q, want stop", m.Chunk.FinishReason)
			}
			break
		}
	}
	_, _, err = busy.c.Read(ctx)
	if websocket.CloseStatus(err) != server.StatusReconnect {
		t.Errorf("the busy socket after its turn: %v, want closed with %d", err, server.StatusReconnect)
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) && !strings.Contains(ce.Reason, "reconnect") {
		t.Errorf("close reason %q", ce.Reason)
	}
}
