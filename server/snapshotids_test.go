package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store"
)

// TestSnapshotIDPrefixes: wherever the API takes a snapshot ID, a unique prefix of at
// least 8 hex digits does; an ambiguous one is 400 ambiguous_snapshot, an unknown or
// too short one 404 snapshot_not_found, and neither touches the session.
func TestSnapshotIDPrefixes(t *testing.T) {
	mem := store.NewMemory()
	ts := newHost(t, mem)
	id := ts.newSession(t, "echo", nil)
	ts.mustTurn(t, "echo", id, "one")
	var first server.SessionInfo
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id, nil, &first)
	snap := first.Snapshot.SnapshotID
	ts.mustTurn(t, "echo", id, "two")
	// Two records sharing their first 9 digits, in the agent's namespace.
	for _, rid := range []string{"abcdef010", "abcdef011"} {
		if err := mem.Commit(t.Context(), "echo", store.Record{ID: rid + strings.Repeat("0", 55), Session: "other", Branch: true}, nil); err != nil {
			t.Fatal(err)
		}
	}

	var got deploy.Snapshot
	if resp := ts.do(t, "GET", "/api/agents/echo/snapshots/"+snap[:8], nil, &got); resp.StatusCode != 200 || got.SnapshotID != snap {
		t.Errorf("GET by prefix: %d, %s", resp.StatusCode, got.SnapshotID)
	}
	if resp := ts.do(t, "GET", "/api/agents/echo/snapshots/"+strings.ToUpper(snap[:12]), nil, &got); resp.StatusCode != 200 || got.SnapshotID != snap {
		t.Errorf("GET by an upper-case prefix: %d, %s", resp.StatusCode, got.SnapshotID)
	}
	for _, c := range []struct {
		method, path string
		status       int
		code         abi.ErrorCode
		says         string
	}{
		{"GET", "/api/agents/echo/snapshots/abcdef01", 400, "ambiguous_snapshot", "give more of its digits"},
		{"POST", "/api/agents/echo/snapshots/abcdef01/abort", 400, "ambiguous_snapshot", "abcdef010"},
		{"GET", "/api/agents/echo/snapshots/ffffffff", 404, "snapshot_not_found", "no snapshot ID begins with ffffffff"},
		{"GET", "/api/agents/echo/snapshots/" + snap[:7], 404, "snapshot_not_found", "at least its first 8 hex digits"},
		{"POST", "/api/agents/echo/sessions", 400, "ambiguous_snapshot", "abcdef01"},
	} {
		var e abi.Error
		var body any
		if c.method == "POST" && strings.HasSuffix(c.path, "/sessions") {
			body = map[string]string{"snapshotId": "abcdef01"}
		}
		resp := ts.do(t, c.method, c.path, body, &e)
		if resp.StatusCode != c.status || e.Code != c.code || !strings.Contains(e.Message, c.says) {
			t.Errorf("%s %s: %d %s %q", c.method, c.path, resp.StatusCode, e.Code, e.Message)
		}
	}
	// Abort, as Genkit's, answers that it found nothing to abort for an unknown ID,
	// a prefix of none included.
	var aborted struct {
		SnapshotID string  `json:"snapshotId"`
		Status     *string `json:"status"`
	}
	if resp := ts.do(t, "POST", "/api/agents/echo/snapshots/ffffffff/abort", nil, &aborted); resp.StatusCode != 200 || aborted.Status != nil {
		t.Errorf("abort of an unknown prefix: %d, status %v; want 200 and none", resp.StatusCode, aborted.Status)
	}
	if _, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/agents/echo/connect?snapshotId=abcdef01", nil); err == nil || resp == nil || resp.StatusCode != 400 {
		t.Errorf("a WebSocket to an ambiguous prefix: %v, %v", resp, err)
	}
	// None of that touched the session, which is still open.
	if n := ts.messagesOf(t, "echo", id); n != 4 {
		t.Errorf("the session holds %d messages, want 4", n)
	}
	if text := ts.mustTurn(t, "echo", id, "three"); text != "echo: three" {
		t.Errorf("the session's next turn answered %q", text)
	}

	// Resumed from its first snapshot by prefix, over a WebSocket (within the session
	// named with it) and in a new session's init.
	if resp := ts.do(t, "DELETE", "/api/agents/echo/sessions/"+id, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("closing the session: %d", resp.StatusCode)
	}
	w := dialWS(t, ts, "echo", "sessionId="+id+"&snapshotId="+snap[:10])
	w.turn(t, "branch")
	w.c.Close(websocket.StatusNormalClosure, "")
	var snaps struct{ Snapshots []deploy.Snapshot }
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id+"/snapshots", nil, &snaps)
	branched := false
	for _, s := range snaps.Snapshots {
		branched = branched || s.Branch && s.ParentID == snap && len(s.State.Messages) == 4
	}
	if !branched {
		t.Errorf("no turn branched from %s after a resume by prefix: %+v", snap, snaps.Snapshots)
	}
	if resp := ts.do(t, "DELETE", "/api/agents/echo/sessions/"+id, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("closing the session: %d", resp.StatusCode)
	}
	if got := ts.newSession(t, "echo", map[string]string{"snapshotId": snap[:8]}); got != id {
		t.Errorf("a session opened from a snapshot prefix is %s, want %s", got, id)
	}
}
