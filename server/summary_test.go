package server_test

import (
	"testing"

	"github.com/terrarium-ai/terrarium/server"
)

// TestSessionListIsNewestFirstWithTitles: the list says when each session was last
// used and how it began, newest first; a session not yet kept comes first, bare.
func TestSessionListIsNewestFirstWithTitles(t *testing.T) {
	ts := newTestServer(t)
	older := ts.newSession(t, "echo", nil)
	newer := ts.newSession(t, "echo", nil)
	ts.streamTurn(t, "echo", older, map[string]any{"text": "Plan a   trip to Lisbon in May, with a day in Sintra and a night of fado"})
	ts.streamTurn(t, "echo", newer, map[string]any{"text": "hello"})
	ts.streamTurn(t, "echo", older, map[string]any{"text": "and Porto?"})
	fresh := ts.newSession(t, "echo", nil)
	var list struct{ Sessions []server.SessionInfo }
	ts.do(t, "GET", "/api/agents/echo/sessions", nil, &list)
	if len(list.Sessions) != 3 {
		t.Fatalf("listed %+v", list.Sessions)
	}
	got := list.Sessions
	if got[0].SessionID != fresh || !got[0].UpdatedAt.IsZero() || got[0].Title != "" || !got[0].Open {
		t.Errorf("first %+v, want the new session %s, bare", got[0], fresh)
	}
	if got[1].SessionID != older || got[1].Title != "Plan a trip to Lisbon in May, with a day in Sintra and a…" {
		t.Errorf("second %+v, want %s, last used, with its first words", got[1], older)
	}
	if got[2].SessionID != newer || got[2].Title != "hello" || !got[2].UpdatedAt.Before(got[1].UpdatedAt) {
		t.Errorf("third %+v, want %s, used before %v", got[2], newer, got[1].UpdatedAt)
	}
}
