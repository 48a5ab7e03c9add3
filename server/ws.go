package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/tenant"
)

// The WebSocket protocol of /api/agents/{agent}/connect. The query may name the
// session to resume (sessionId) or the snapshot (snapshotId); neither starts a new
// session. Errors before the upgrade (an unknown agent or snapshot) are ordinary HTTP
// errors. Then each message is a JSON object.
//
// The server sends:
//
//	{"type": "session", "sessionId": "...", "agent": "..."}   first, once
//	{"type": "chunk", "chunk": <stream chunk>}                each chunk of a turn; the
//	                                                          last has "endTurn": true
//	{"type": "error", "error": {"code": "...", "message": "..."}}
//
// The client sends turns, one at a time, as the HTTP API's TurnRequest ({"text": ...},
// {"messages": [...]}, {"resume": {...}}, "detach": true, "customPatches": true to
// stream the turn's custom-state changes), or {"cancel": true} to
// cancel the running turn. A client offering subprotocols offers terrarium.v1 (the
// server picks it); a browser, which cannot set the Authorization header on a
// WebSocket, offers its API key as a second one, bearer.<key>, never echoed. A turn sent while one runs is answered with the error
// session_busy. Each turn continues the session's latest snapshot, even one another
// host sharing the store committed meanwhile; a turn that lost a race with another
// host's is answered with the error conflict, and the socket stays open for the next.
// Chunks are written as the flow makes them, each waiting for the socket: a client
// that reads slowly slows the agent down, never the server's memory.
type (
	// WSMessage is what the server sends on a WebSocket.
	WSMessage struct {
		Type      string            `json:"type"`
		SessionID string            `json:"sessionId,omitempty"`
		Agent     string            `json:"agent,omitempty"`
		Chunk     *session.AnyChunk `json:"chunk,omitempty"`
		Error     *abi.Error        `json:"error,omitempty"`
	}
	// WSRequest is what a client sends on a WebSocket: a turn, or a cancel.
	WSRequest struct {
		TurnRequest
		Cancel bool `json:"cancel,omitempty"`
	}
)

// Subprotocols of the WebSocket: the one the server picks, and the prefix of the one
// carrying an API key.
const (
	wsProtocol  = "terrarium.v1"
	wsKeyPrefix = "bearer."
)

// requestKey returns the API key a request carries: in "Authorization: Bearer", or on
// a WebSocket handshake as the subprotocol bearer.<key>. Never from the URL, which
// access logs, proxies and browser histories keep.
func requestKey(r *http.Request) string {
	if key := tenant.Bearer(r); key != "" {
		return key
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return ""
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			if key, ok := strings.CutPrefix(strings.TrimSpace(p), wsKeyPrefix); ok {
				return key
			}
		}
	}
	return ""
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	var init json.RawMessage
	if ids := (initIDs{SessionID: q.Get("sessionId"), SnapshotID: q.Get("snapshotId")}); ids != (initIDs{}) {
		init, _ = json.Marshal(ids)
	}
	s.sockets.Add(1)
	defer s.sockets.Done()
	if s.draining.Load() {
		writeError(w, r, ErrShuttingDown)
		return
	}
	l, err := s.sessions.start(a, init)
	if err != nil {
		writeError(w, r, err)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsProtocol}})
	if err != nil {
		return // Accept answered the request
	}
	c.SetReadLimit(s.maxBody)
	l.attach(1)
	// l is the session the socket holds: follow may replace it before each turn.
	defer func() { l.attach(-1) }()

	ws := &wsConn{c: c, ctx: r.Context()}
	defer c.CloseNow()
	sock := &wsDrain{c: c}
	defer context.AfterFunc(s.drainCtx, sock.drain)()
	if err := ws.send(WSMessage{Type: "session", SessionID: l.id, Agent: a.Name}); err != nil {
		return
	}
	var turns sync.WaitGroup
	defer turns.Wait()
	for {
		_, data, err := c.Read(r.Context())
		if err != nil {
			return
		}
		var req WSRequest
		if err := decodeStrict(data, &req); err != nil {
			ws.fail(err)
			continue
		}
		if req.Cancel {
			if err := s.sessions.cancelTurn(l); err != nil {
				ws.fail(err)
			}
			continue
		}
		in, err := req.input()
		if err != nil {
			ws.fail(err)
			continue
		}
		cur, err := s.sessions.follow(r.Context(), l)
		if err != nil {
			ws.fail(err)
			continue
		}
		l = cur
		// A turn waiting in its tenant's line holds up reading the socket, for at
		// most the tenant's turnQueueTimeout: its client waits for it anyway.
		done, err := s.sessions.admit(r.Context(), l.agent)
		if err != nil {
			ws.fail(err)
			continue
		}
		if !sock.startTurn() {
			done()
			ws.fail(ErrShuttingDown)
			return // the drain closes the socket
		}
		if err := s.sessions.claim(l, done); err != nil {
			ws.fail(err)
			if sock.endTurn() {
				return
			}
			continue
		}
		turns.Add(1)
		go func(l *live) {
			defer turns.Done()
			ended, err := s.sessions.run(l, in, func(c *session.AnyChunk) error {
				return ws.send(WSMessage{Type: "chunk", Chunk: c})
			})
			var te *session.TurnError
			if err != nil && !errors.As(err, &te) {
				// A refusal is in its chunk already; anything else ends the turn here.
				ws.fail(err)
			}
			switch {
			case sock.endTurn():
				// The server drains: the socket closed, telling the client to
				// reconnect, which the load balancer sends to another host.
			case ended && errors.Is(err, session.ErrConflict):
				// Another host continued the session first: the socket stays, and its
				// next turn follows the session from the store's head.
			case ended:
				// Detached, halted, cancelled: so is the socket.
				c.Close(websocket.StatusNormalClosure, "the session ended")
			}
		}(l)
	}
}

// wsConn writes messages to a WebSocket, one at a time.
type wsConn struct {
	c   *websocket.Conn
	ctx context.Context
	mu  sync.Mutex
}

func (w *wsConn) send(m WSMessage) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.Write(w.ctx, websocket.MessageText, data)
}

func (w *wsConn) fail(err error) {
	_, body := classify(err)
	w.send(WSMessage{Type: "error", Error: body})
}
