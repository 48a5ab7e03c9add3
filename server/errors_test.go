package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store"
)

// TestBadInputGetsAStableCode sends every bad input the API guards against and checks
// its status and code: never a 500, never a hang.
func TestBadInputGetsAStableCode(t *testing.T) {
	ts := newTestServer(t, server.WithMaxBodyBytes(1024))
	echo := ts.newSession(t, "echo", nil)
	client := ts.newSession(t, "client", nil)

	// An interrupted session, for answers that do not match.
	asked := ts.newSession(t, "echo", nil)
	ts.streamTurn(t, "echo", asked, map[string]any{"text": "ask why?"})
	var snaps struct {
		Snapshots []struct {
			SnapshotID string `json:"snapshotId"`
		} `json:"snapshots"`
	}
	ts.do(t, "GET", "/api/agents/echo/sessions/"+asked+"/snapshots", nil, &snaps)
	if len(snaps.Snapshots) == 0 {
		t.Fatal("no snapshot of the interrupted session")
	}
	snapshot := snaps.Snapshots[0].SnapshotID

	turns := "/api/agents/echo/sessions/" + echo + "/turns"
	long := strings.Repeat("x", store.MaxNameLen+1)
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               abi.ErrorCode
	}{
		{"malformed JSON", "POST", turns, `{"text": `, 400, "invalid_json"},
		{"empty body", "POST", turns, "", 400, "invalid_json"},
		{"unknown field", "POST", turns, `{"txt": "hi"}`, 400, "invalid_json"},
		{"two JSON values", "POST", turns, `{"text": "a"} {"text": "b"}`, 400, "invalid_json"},
		{"text and messages", "POST", turns, `{"text": "a", "messages": [{"role":"user","content":[{"text":"b"}]}]}`, 400, "invalid_json"},
		{"oversized body", "POST", turns, `{"text": "` + strings.Repeat("x", 2000) + `"}`, 413, "body_too_large"},
		{"unknown agent", "GET", "/api/agents/nope", nil, 404, "agent_not_found"},
		{"session of an unknown agent", "POST", "/api/agents/nope/sessions", nil, 404, "agent_not_found"},
		{"turn of an unknown session", "POST", "/api/agents/echo/sessions/nope/turns", `{"text":"hi"}`, 404, "session_not_found"},
		{"unknown session", "GET", "/api/agents/echo/sessions/nope", nil, 404, "session_not_found"},
		{"snapshots of an unknown session", "GET", "/api/agents/echo/sessions/nope/snapshots", nil, 404, "session_not_found"},
		{"unknown snapshot", "GET", "/api/agents/echo/snapshots/nope", nil, 404, "snapshot_not_found"},
		{"resume of an unknown snapshot", "POST", "/api/agents/echo/sessions", `{"snapshotId": "nope"}`, 404, "snapshot_not_found"},
		{"unknown init field", "POST", "/api/agents/echo/sessions", `{"sesionId": "x"}`, 400, "invalid_input"},
		{"state sent to a kept session", "POST", "/api/agents/echo/sessions", `{"state": {"messages": []}}`, 400, "server_managed"},
		{"state with an ID", "POST", "/api/agents/client/sessions", `{"state": {"messages": []}, "sessionId": "x"}`, 400, "invalid_init"},
		{"session ID for a client-kept agent", "POST", "/api/agents/client/sessions", `{"sessionId": "x"}`, 409, "no_snapshot_store"},
		{"snapshot of another session", "POST", "/api/agents/echo/sessions", `{"snapshotId": "` + snapshot + `", "sessionId": "other"}`, 400, "invalid_init"},
		{"resume of an open session from a snapshot", "POST", "/api/agents/echo/sessions", `{"snapshotId": "` + snapshot + `"}`, 409, "session_open"},
		{"snapshots of a client-kept agent", "GET", "/api/agents/client/sessions/" + client + "/snapshots", nil, 409, "no_snapshot_store"},
		{"a model message as input", "POST", turns, `{"messages": [{"role": "model", "content": [{"text": "I said so"}]}]}`, 400, "invalid_input"},
		{"an answer to no pending request", "POST", turns, `{"resume": {"respond": [{"toolResponse": {"name": "askUser", "ref": "q1", "output": "x"}}]}}`, 422, "invalid_resume"},
		{"an answer naming another request", "POST", "/api/agents/echo/sessions/" + asked + "/turns", `{"resume": {"respond": [{"toolResponse": {"name": "askUser", "ref": "q9", "output": "x"}}]}}`, 422, "invalid_resume"},
		{"a restart with another input", "POST", "/api/agents/echo/sessions/" + asked + "/turns", `{"resume": {"restart": [{"toolRequest": {"name": "askUser", "ref": "q1", "input": {"question": "other?"}}}]}}`, 422, "invalid_resume"},
		{"cancel with no turn running", "POST", "/api/agents/echo/sessions/" + echo + "/cancel", nil, 409, "no_running_turn"},
		{"cancel in an unknown session", "POST", "/api/agents/echo/sessions/nope/cancel", nil, 404, "session_not_found"},
		{"unknown route", "GET", "/api/nothing", nil, 404, "not_found"},
		{"a null message", "POST", turns, `{"messages": [null]}`, 400, "invalid_json"},
		{"a null part", "POST", turns, `{"messages": [{"role": "user", "content": [null]}]}`, 400, "invalid_json"},
		{"a null answer", "POST", turns, `{"resume": {"respond": [null]}}`, 400, "invalid_json"},
		{"a null message in a client's state", "POST", "/api/agents/client/sessions", `{"state": {"messages": [null]}}`, 400, "invalid_input"},
		{"a session ID too long", "GET", "/api/agents/echo/sessions/" + long, nil, 400, "invalid_id"},
		{"snapshots of a session ID too long", "GET", "/api/agents/echo/sessions/" + long + "/snapshots", nil, 400, "invalid_id"},
		{"a snapshot ID too long", "GET", "/api/agents/echo/snapshots/" + long, nil, 400, "invalid_id"},
		{"abort of a snapshot ID too long", "POST", "/api/agents/echo/snapshots/" + long + "/abort", nil, 400, "invalid_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e abi.Error
			resp := ts.do(t, tc.method, tc.path, tc.body, &e)
			if resp.StatusCode != tc.status || e.Code != tc.code || e.Message == "" {
				t.Errorf("%s %s: %d %+v, want %d %s", tc.method, tc.path, resp.StatusCode, e, tc.status, tc.code)
			}
		})
	}
}

// TestTurnWhileOneRunsIsRefused holds a turn running and sends another on the same
// session over HTTP and over a WebSocket: both are refused with 409, and the session
// is unharmed.
func TestTurnWhileOneRunsIsRefused(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "gate", nil)
	done := make(chan []event)
	go func() {
		_, events := ts.streamTurn(t, "gate", id, map[string]any{"text": "first"})
		done <- events
	}()
	<-ts.gate.started
	var e abi.Error
	if resp := ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", `{"text":"second"}`, &e); resp.StatusCode != http.StatusConflict || e.Code != "session_busy" {
		t.Errorf("a second turn over HTTP: %d %+v", resp.StatusCode, e)
	}
	ws := dialWS(t, ts, "gate", "sessionId="+id)
	ws.send(t, map[string]any{"text": "third"})
	if m := ws.next(t); m.Type != "error" || m.Error.Code != "session_busy" {
		t.Errorf("a second turn over a WebSocket: %+v", m)
	}
	if resp := ts.do(t, "DELETE", "/api/agents/gate/sessions/"+id, nil, &e); resp.StatusCode != http.StatusConflict || e.Code != "session_busy" {
		t.Errorf("closing a session with a running turn: %d %+v", resp.StatusCode, e)
	}
	close(ts.gate.release)
	if text := textOf(t, <-done); text != "released" {
		t.Errorf("the first turn answered %q", text)
	}
}

func TestCancelEndsTheRunningTurn(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "gate", nil)
	release := func() { <-ts.gate.started; ts.gate.release <- struct{}{} }
	go release()
	if resp := ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", `{"text":"first"}`, nil); resp.StatusCode != 200 {
		t.Fatalf("first turn: %d", resp.StatusCode)
	}
	done := make(chan server.TurnResult)
	go func() {
		var res server.TurnResult
		if resp := ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", `{"text":"long"}`, &res); resp.StatusCode != http.StatusOK {
			t.Errorf("the cancelled turn answered %d", resp.StatusCode)
		}
		done <- res
	}()
	<-ts.gate.started
	if resp := ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/cancel", nil, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	// Cancelled by its client, the turn is aborted, not failed.
	if res := <-done; res.FinishReason != "aborted" || len(res.Chunks) == 0 || !res.Chunks[len(res.Chunks)-1].EndTurn || res.Chunks[len(res.Chunks)-1].Error != nil {
		t.Errorf("the cancelled turn: %+v", res)
	}
	// The session goes on from its last snapshot.
	go release()
	var out struct{ Chunks []any }
	if resp := ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", `{"text":"again"}`, &out); resp.StatusCode != 200 {
		t.Errorf("a turn after the cancel: %d", resp.StatusCode)
	}
}

// A cancelled turn answers once its flow has ended, so that the session's next turn
// never runs beside it: a model that is slow to see its context (here, one that
// ignores it until released) must not find the next turn's call running with its own.
func TestCancelledTurnEndsBeforeTheNextRuns(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "stubborn", nil)
	release := func() { <-ts.gate.started; ts.gate.release <- struct{}{} }
	go release()
	if resp := ts.do(t, "POST", "/api/agents/stubborn/sessions/"+id+"/turns", `{"text":"first"}`, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("first turn: %d", resp.StatusCode)
	}
	done := make(chan server.TurnResult, 1)
	go func() {
		var res server.TurnResult
		ts.do(t, "POST", "/api/agents/stubborn/sessions/"+id+"/turns", `{"text":"long"}`, &res)
		done <- res
	}()
	<-ts.gate.started
	if resp := ts.do(t, "POST", "/api/agents/stubborn/sessions/"+id+"/cancel", nil, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	// The cancelled call ends a moment later, when released; its turn answers then.
	time.AfterFunc(100*time.Millisecond, func() { ts.gate.release <- struct{}{} })
	select {
	case res := <-done:
		if res.FinishReason != "aborted" {
			t.Errorf("the cancelled turn: %+v", res)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled turn never answered")
	}
	go release()
	if resp := ts.do(t, "POST", "/api/agents/stubborn/sessions/"+id+"/turns", `{"text":"again"}`, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a turn after the cancel: %d", resp.StatusCode)
	}
	if n := ts.gate.overlaps.Load(); n != 0 {
		t.Errorf("the next turn's model call ran beside the cancelled turn's %d time(s)", n)
	}
}

// A cancelled turn whose model never sees its context waits for it only so long
// (flowEndTimeout, 5 s): then the turn answers and the session takes its next turn.
func TestCancelledTurnWaitsForItsFlowBoundedly(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 5 s bound")
	}
	ts := newTestServer(t)
	id := ts.newSession(t, "stubborn", nil)
	release := func() { <-ts.gate.started; ts.gate.release <- struct{}{} }
	go release()
	if resp := ts.do(t, "POST", "/api/agents/stubborn/sessions/"+id+"/turns", `{"text":"first"}`, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("first turn: %d", resp.StatusCode)
	}
	done := make(chan server.TurnResult, 1)
	go func() {
		var res server.TurnResult
		ts.do(t, "POST", "/api/agents/stubborn/sessions/"+id+"/turns", `{"text":"stuck"}`, &res)
		done <- res
	}()
	<-ts.gate.started // the stuck call: released only with the next turn's
	if resp := ts.do(t, "POST", "/api/agents/stubborn/sessions/"+id+"/cancel", nil, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	select {
	case res := <-done:
		if res.FinishReason != "aborted" {
			t.Errorf("the cancelled turn: %+v", res)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled turn waited for its flow without a bound")
	}
	// Two releases: the stuck call may take either.
	go func() { <-ts.gate.started; ts.gate.release <- struct{}{}; ts.gate.release <- struct{}{} }()
	if resp := ts.do(t, "POST", "/api/agents/stubborn/sessions/"+id+"/turns", `{"text":"again"}`, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a turn after the cancel: %d", resp.StatusCode)
	}
}
