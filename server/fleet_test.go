package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/store"
)

// newHost serves the agents echo and gate (a model the test releases), both keeping
// their sessions in shared: one host of a fleet sharing a store.
func newHost(t *testing.T, shared store.Store) *testServer {
	t.Helper()
	return newServerOf(t, map[string]string{
		"echo.yaml": "name: echo\nmodel: {name: test/echo}\n",
		"gate.yaml": "name: gate\nmodel: {name: test/gate}\n",
	}, []deploy.Option{deploy.WithStore(shared)})
}

// turnResult is what a turn sent by sendTurn got: the model's text, or an error's
// status and code.
type turnResult struct {
	status int
	text   string
	code   abi.ErrorCode
	err    error
}

// sendTurn sends a turn without failing the test, so that it can run in a goroutine.
func (ts *testServer) sendTurn(ctx context.Context, agent, session, text string) turnResult {
	body, _ := json.Marshal(map[string]string{"text": text})
	req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/api/agents/%s/sessions/%s/turns", ts.URL, agent, session), strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	if err != nil {
		return turnResult{err: err}
	}
	defer resp.Body.Close()
	r := turnResult{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var e abi.Error
		r.err = json.NewDecoder(resp.Body).Decode(&e)
		r.code = e.Code
		return r
	}
	var out struct {
		Chunks []struct {
			Chunk *abi.GenerateResponseChunk `json:"chunk"`
		} `json:"chunks"`
	}
	r.err = json.NewDecoder(resp.Body).Decode(&out)
	for _, c := range out.Chunks {
		if c.Chunk != nil && c.Chunk.Role == abi.RoleModel {
			r.text += c.Chunk.Text()
		}
	}
	return r
}

// mustTurn runs a turn that must succeed and returns the model's text.
func (ts *testServer) mustTurn(t *testing.T, agent, session, text string) string {
	t.Helper()
	r := ts.sendTurn(t.Context(), agent, session, text)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("turn %q: status %d, code %q, %v", text, r.status, r.code, r.err)
	}
	return r.text
}

// messagesOf returns how many messages the session's latest snapshot holds.
func (ts *testServer) messagesOf(t *testing.T, agent, session string) int {
	t.Helper()
	var info struct {
		Snapshot struct {
			State struct {
				Messages []json.RawMessage `json:"messages"`
			} `json:"state"`
		} `json:"snapshot"`
	}
	if resp := ts.do(t, "GET", "/api/agents/"+agent+"/sessions/"+session, nil, &info); resp.StatusCode != http.StatusOK {
		t.Fatalf("session %s: status %d", session, resp.StatusCode)
	}
	return len(info.Snapshot.State.Messages)
}

// A client alternating the turns of one session across two hosts: each host finds
// the session open from its last turn there, and must notice that the other host
// continued it since, instead of committing over an older snapshot (a conflict).
func TestHostsTakeTurnsOfOneSession(t *testing.T) {
	shared := store.NewMemory()
	hosts := []*testServer{newHost(t, shared), newHost(t, shared)}
	id := hosts[0].newSession(t, "echo", nil)
	for i := range 6 {
		text := fmt.Sprint("turn ", i)
		if got := hosts[i%2].mustTurn(t, "echo", id, text); got != "echo: "+text {
			t.Fatalf("turn %d on host %d: %q", i, i%2, got)
		}
	}
	for i, h := range hosts {
		if n := h.messagesOf(t, "echo", id); n != 12 {
			t.Errorf("host %d sees %d messages, want 12 (6 turns)", i, n)
		}
	}
}

// Two hosts run a turn of one session at once, each from the same snapshot: the first
// to commit wins, the other is refused with 409 and commits nothing, and the session
// goes on from the winner's turn on either host.
func TestHostsRacingATurnConflict(t *testing.T) {
	shared := store.NewMemory()
	a, b := newHost(t, shared), newHost(t, shared)
	id := a.newSession(t, "gate", nil)
	first := make(chan turnResult, 1)
	go func() { first <- a.sendTurn(t.Context(), "gate", id, "first") }()
	<-a.gate.started
	a.gate.release <- struct{}{}
	if r := <-first; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("first turn: %+v", r)
	}

	results := map[*testServer]chan turnResult{a: make(chan turnResult, 1), b: make(chan turnResult, 1)}
	for h, res := range results {
		go func() { res <- h.sendTurn(t.Context(), "gate", id, "race") }()
	}
	// Both models run: both hosts resumed the session from the first turn.
	<-a.gate.started
	<-b.gate.started
	a.gate.release <- struct{}{}
	if r := <-results[a]; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("the winner: %+v", r)
	}
	b.gate.release <- struct{}{}
	if r := <-results[b]; r.status != http.StatusConflict || r.code != "conflict" {
		t.Fatalf("the loser: status %d, code %q (%v), want 409 conflict", r.status, r.code, r.err)
	}
	if n := b.messagesOf(t, "gate", id); n != 4 {
		t.Fatalf("after the race the session holds %d messages, want 4 (two turns)", n)
	}

	// The loser reloads: its next turn continues the winner's.
	next := make(chan turnResult, 1)
	go func() { next <- b.sendTurn(t.Context(), "gate", id, "after") }()
	<-b.gate.started
	b.gate.release <- struct{}{}
	if r := <-next; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("the turn after the race: %+v", r)
	}
	if n := a.messagesOf(t, "gate", id); n != 6 {
		t.Errorf("after the next turn the session holds %d messages, want 6", n)
	}
}

// pingStore is a memory store whose database may be down.
type pingStore struct {
	*store.Memory
	down atomic.Bool
}

// Head fails while the database is down, as a read that ran out of retries does.
func (s *pingStore) Head(ctx context.Context, ns, session string) (store.Record, error) {
	if s.down.Load() {
		return store.Record{}, fmt.Errorf("head of %s: %w (12 attempts in 30s): connection refused", session, store.ErrUnavailable)
	}
	return s.Memory.Head(ctx, ns, session)
}

func (s *pingStore) Ping(ctx context.Context) error {
	if s.down.Load() {
		return fmt.Errorf("pinging: %w: connection refused", store.ErrUnavailable)
	}
	return nil
}

// /readyz fails while the snapshot store cannot be reached, so that a load balancer
// sends turns to hosts that can keep them.
func TestReadyzChecksTheStore(t *testing.T) {
	st := &pingStore{Memory: store.NewMemory()}
	ts := newHost(t, st)
	for _, down := range []bool{false, true, false} {
		st.down.Store(down)
		var e struct{ Code string }
		resp := ts.do(t, "GET", "/readyz", nil, &e)
		switch {
		case down && (resp.StatusCode != http.StatusServiceUnavailable || e.Code != "store_unavailable"):
			t.Errorf("store down: /readyz %d %q, want 503 store_unavailable", resp.StatusCode, e.Code)
		case !down && resp.StatusCode != http.StatusOK:
			t.Errorf("store up: /readyz %d", resp.StatusCode)
		}
	}
}

// Turns sent at once to a kept session that is not open: each request reads the store
// and opens a connection, and exactly one connection may be kept, or two turns of one
// session would run at once on one host. The others find it busy.
func TestConcurrentReopenKeepsOneConnection(t *testing.T) {
	h := newHost(t, store.NewMemory())
	id := h.newSession(t, "gate", nil)
	done := make(chan turnResult, 1)
	go func() { done <- h.sendTurn(t.Context(), "gate", id, "first") }()
	<-h.gate.started
	h.gate.release <- struct{}{}
	if r := <-done; r.status != http.StatusOK {
		t.Fatalf("first turn: %+v", r)
	}
	for round := range 20 {
		if resp := h.do(t, "DELETE", "/api/agents/gate/sessions/"+id, nil, nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("closing the session: %d", resp.StatusCode)
		}
		const n = 4
		results := make(chan turnResult, n)
		for range n {
			go func() { results <- h.sendTurn(t.Context(), "gate", id, fmt.Sprint("round ", round)) }()
		}
		<-h.gate.started
		for range n - 1 {
			select {
			case r := <-results:
				if r.status != http.StatusConflict || r.code != "session_busy" {
					t.Fatalf("round %d: a turn beside the running one: status %d, code %q, %v", round, r.status, r.code, r.err)
				}
			case <-h.gate.started:
				h.gate.release <- struct{}{}
				h.gate.release <- struct{}{}
				t.Fatalf("round %d: two turns of one session run at once", round)
			}
		}
		h.gate.release <- struct{}{}
		if r := <-results; r.status != http.StatusOK {
			t.Fatalf("round %d: the running turn: %+v", round, r)
		}
	}
}

// A turn the store cannot serve is 503 store_unavailable, for the client to retry
// later or elsewhere, not a 500.
func TestTurnWhileTheStoreIsDownIs503(t *testing.T) {
	st := &pingStore{Memory: store.NewMemory()}
	ts := newHost(t, st)
	id := ts.newSession(t, "echo", nil)
	ts.mustTurn(t, "echo", id, "before")
	st.down.Store(true)
	if r := ts.sendTurn(t.Context(), "echo", id, "during"); r.status != http.StatusServiceUnavailable || r.code != "store_unavailable" {
		t.Fatalf("a turn while the store is down: status %d, code %q, %v", r.status, r.code, r.err)
	}
	st.down.Store(false)
	if got := ts.mustTurn(t, "echo", id, "after"); got != "echo: after" {
		t.Fatalf("a turn once the store is back: %q", got)
	}
}

// A WebSocket holds a session open on one host while another host runs a turn of it:
// the socket's next turn reopens the session from the store's head and continues the
// other host's turn, as an HTTP turn would, instead of failing with a conflict.
func TestWebSocketContinuesAnotherHostsTurn(t *testing.T) {
	shared := store.NewMemory()
	a, b := newHost(t, shared), newHost(t, shared)
	id := a.newSession(t, "echo", nil)
	w := dialWS(t, a, "echo", "sessionId="+id)
	if got := w.turn(t, "one on a"); got != "echo: one on a" {
		t.Fatalf("the first turn on a's socket: %q", got)
	}
	b.mustTurn(t, "echo", id, "two on b")
	if got := w.turn(t, "three on a"); got != "echo: three on a" {
		t.Fatalf("the socket's turn after b's answered %q", got)
	}
	var info struct {
		Snapshot struct {
			State struct {
				Messages []*abi.Message `json:"messages"`
			} `json:"state"`
		} `json:"snapshot"`
	}
	b.do(t, "GET", "/api/agents/echo/sessions/"+id, nil, &info)
	var history []string
	for _, m := range info.Snapshot.State.Messages {
		if m.Role == abi.RoleUser {
			history = append(history, m.Text())
		}
	}
	if want := []string{"one on a", "two on b", "three on a"}; !slices.Equal(history, want) {
		t.Fatalf("the session's turns are %q, want %q", history, want)
	}
}

// A turn on a WebSocket racing one on another host from the same snapshot is still a
// conflict when it commits second: the socket reports it, and its next turn continues
// the winner's.
func TestWebSocketRacingAnotherHostConflicts(t *testing.T) {
	shared := store.NewMemory()
	a, b := newHost(t, shared), newHost(t, shared)
	id := a.newSession(t, "gate", nil)
	w := dialWS(t, a, "gate", "sessionId="+id)
	release := func(h *testServer) {
		<-h.gate.started
		h.gate.release <- struct{}{}
	}
	go release(a)
	w.turn(t, "first")

	w.send(t, map[string]any{"text": "race on a"})
	<-a.gate.started
	onB := make(chan turnResult, 1)
	go func() { onB <- b.sendTurn(t.Context(), "gate", id, "race on b") }()
	release(b)
	if r := <-onB; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("the winner on b: %+v", r)
	}
	a.gate.release <- struct{}{}
	m := w.next(t)
	for m.Type == "chunk" && !m.Chunk.EndTurn {
		m = w.next(t)
	}
	if m.Type != "error" || m.Error.Code != "conflict" {
		t.Fatalf("the loser on a's socket got %+v, want a conflict", m)
	}
	if n := b.messagesOf(t, "gate", id); n != 4 {
		t.Fatalf("after the race the session holds %d messages, want 4 (two turns)", n)
	}

	go release(a)
	w.turn(t, "after")
	if n := b.messagesOf(t, "gate", id); n != 6 {
		t.Fatalf("after the socket's next turn the session holds %d messages, want 6", n)
	}
}

// A WebSocket's turn while the store cannot be read is refused with
// store_unavailable, and the socket stays open: its next turn, once the store is back,
// runs.
func TestWebSocketTurnWhileTheStoreIsDown(t *testing.T) {
	st := &pingStore{Memory: store.NewMemory()}
	ts := newHost(t, st)
	w := dialWS(t, ts, "echo", "")
	w.turn(t, "before")
	st.down.Store(true)
	w.send(t, map[string]any{"text": "during"})
	if m := w.next(t); m.Type != "error" || m.Error.Code != "store_unavailable" {
		t.Fatalf("a turn while the store is down: %+v", m)
	}
	st.down.Store(false)
	if got := w.turn(t, "after"); got != "echo: after" {
		t.Fatalf("a turn once the store is back: %q", got)
	}
}
