package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/server"
)

type wsClient struct {
	c *websocket.Conn
	// sessionID is the socket's session, from the server's first message.
	sessionID string
}

// dialWS opens a WebSocket to an agent, with query (sessionId=..., snapshotId=...).
func dialWS(t *testing.T, ts *testServer, agent, query string) *wsClient {
	t.Helper()
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/agents/" + agent + "/connect?" + query
	c, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	w := &wsClient{c: c}
	m := w.next(t)
	if m.Type != "session" || m.SessionID == "" {
		t.Fatalf("first message %+v", m)
	}
	w.sessionID = m.SessionID
	return w
}

func (w *wsClient) send(t *testing.T, v any) {
	t.Helper()
	data, _ := json.Marshal(v)
	if err := w.c.Write(t.Context(), websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
}

func (w *wsClient) next(t *testing.T) server.WSMessage {
	t.Helper()
	_, data, err := w.c.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var m server.WSMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// turn sends a turn and returns its text, reading to the end of the turn.
func (w *wsClient) turn(t *testing.T, text string) string {
	t.Helper()
	w.send(t, map[string]any{"text": text})
	var b strings.Builder
	for {
		m := w.next(t)
		if m.Type != "chunk" {
			t.Fatalf("turn %q: %s %+v", text, m.Type, m.Error)
		}
		if m.Chunk.Chunk != nil {
			b.WriteString(m.Chunk.Chunk.Text())
		}
		if m.Chunk.EndTurn {
			return b.String()
		}
	}
}

func TestWebSocketHoldsAMultiTurnSession(t *testing.T) {
	ts := newTestServer(t)
	w := dialWS(t, ts, "echo", "")
	for _, text := range []string{"one", "two", "three"} {
		if got := w.turn(t, text); got != "echo: "+text {
			t.Errorf("turn %q answered %q", text, got)
		}
	}
	w.send(t, map[string]any{"txt": "typo"})
	if m := w.next(t); m.Type != "error" || m.Error.Code != "invalid_json" {
		t.Errorf("a malformed message: %+v", m)
	}
	if got := w.turn(t, "four"); got != "echo: four" {
		t.Errorf("after an error the socket answered %q", got)
	}
}

func TestWebSocketSharesSessionsWithHTTP(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "echo", nil)
	ts.streamTurn(t, "echo", id, map[string]any{"text": "over http"})
	w := dialWS(t, ts, "echo", "sessionId="+id)
	w.turn(t, "over a socket")
	var info server.SessionInfo
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id, nil, &info)
	if info.Snapshot == nil || len(info.Snapshot.State.Messages) != 4 {
		t.Errorf("the session holds %+v", info.Snapshot)
	}
}

func TestWebSocketToAnUnknownSnapshotIsAnHTTPError(t *testing.T) {
	ts := newTestServer(t)
	_, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/agents/echo/connect?snapshotId=nope", nil)
	if err == nil || resp == nil || resp.StatusCode != 404 {
		t.Errorf("dial: %v, %v", resp, err)
	}
}

// A browser offering subprotocols fails a WebSocket whose server picks none of
// them: the page offers terrarium.v1, and the server picks it.
func TestWebSocketPicksItsSubprotocol(t *testing.T) {
	ts := newTestServer(t)
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/agents/echo/connect",
		&websocket.DialOptions{Subprotocols: []string{"terrarium.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "terrarium.v1" {
		t.Errorf("subprotocol %q, want terrarium.v1", c.Subprotocol())
	}
}

// A cancelled turn ends aborted, and the socket stays for the next turn, which goes on
// from the session's last snapshot.
func TestWebSocketAfterACancel(t *testing.T) {
	ts := newTestServer(t)
	w := dialWS(t, ts, "gate", "")
	go func() { <-ts.gate.started; ts.gate.release <- struct{}{} }()
	w.turn(t, "first")
	w.send(t, map[string]any{"text": "held"})
	<-ts.gate.started
	w.send(t, map[string]any{"cancel": true})
	for {
		m := w.next(t)
		if m.Type != "chunk" {
			t.Fatalf("after the cancel: %s %+v", m.Type, m.Error)
		}
		if m.Chunk.EndTurn {
			if m.Chunk.FinishReason != "aborted" || m.Chunk.Error != nil {
				t.Errorf("the cancelled turn ended %+v", m.Chunk)
			}
			break
		}
	}
	go func() { <-ts.gate.started; ts.gate.release <- struct{}{} }()
	if got := w.turn(t, "again"); got != "released" {
		t.Errorf("the turn after the cancel answered %q", got)
	}
}

// A turn that ends the session's connection (here, detached) ends the socket too,
// once it names the pending snapshot: a detached turn streams nothing.
func TestWebSocketClosesWhenTheSessionEnds(t *testing.T) {
	ts := newTestServer(t)
	w := dialWS(t, ts, "gate", "")
	w.send(t, map[string]any{"text": "in the background", "detach": true})
	if m := w.next(t); m.Type != "detached" || m.SnapshotID == "" || m.SessionID == "" {
		t.Fatalf("a detached turn's message: %+v", m)
	}
	<-ts.gate.started
	for {
		_, _, err := w.c.Read(t.Context())
		if err == nil {
			t.Error("the socket sent more after the detach")
			continue
		}
		if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
			t.Fatalf("the socket ended with %v, want a normal closure", err)
		}
		break
	}
	ts.gate.release <- struct{}{}
}
