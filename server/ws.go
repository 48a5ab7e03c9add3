package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

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
//	                                                          last has "endTurn": true,
//	                                                          its finishReason, and for
//	                                                          a failed turn its error
//	{"type": "detached", "sessionId": "...", "snapshotId": "..."}
//	                                                          a detached turn's pending
//	                                                          snapshot; the socket ends
//	{"type": "error", "error": {"code": "...", "message": "..."}}
//
// A failed turn (finish reason failed: its model, a tool or a handler failed) leaves
// the socket open for the next turn, which continues from the state before it; so
// does a cancelled one (finish reason aborted) of an agent that keeps its sessions.
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
		Type      string `json:"type"`
		SessionID string `json:"sessionId,omitempty"`
		// SnapshotID is a detached turn's pending snapshot (type detached).
		SnapshotID string            `json:"snapshotId,omitempty"`
		Agent      string            `json:"agent,omitempty"`
		Chunk      *session.AnyChunk `json:"chunk,omitempty"`
		Error      *abi.Error        `json:"error,omitempty"`
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

// wsRoute is the route of the WebSocket: the one route whose handshake may carry its
// API key as a subprotocol.
const wsRoute = "/api/agents/{agent}/connect"

// webSocketKey returns the API key of a WebSocket's handshake: in "Authorization:
// Bearer", or, since a browser can set no header on a WebSocket, as the subprotocol
// bearer.<key> of a genuine handshake. Never from the URL, which access logs, proxies
// and browser histories keep.
func webSocketKey(r *http.Request) string {
	if key := tenant.Bearer(r); key != "" {
		return key
	}
	if !isWebSocketHandshake(r) {
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

// isWebSocketHandshake reports whether r opens a WebSocket as RFC 6455 says one does.
func isWebSocketHandshake(r *http.Request) bool {
	return r.Method == http.MethodGet && hasToken(r.Header, "Connection", "upgrade") && hasToken(r.Header, "Upgrade", "websocket") &&
		r.Header.Get("Sec-WebSocket-Key") != "" && r.Header.Get("Sec-WebSocket-Version") != ""
}

// hasToken reports whether the comma-separated values of a header hold token.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
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
	if init, err = resolveInit(r.Context(), a, init); err != nil {
		writeError(w, r, err)
		return
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
	if !l.tryAttach(s.perSess) {
		writeError(w, r, fmt.Errorf("%w: session %s has %d, the most a session may", ErrTooManyWebSockets, l.id, s.perSess))
		return
	}
	// l is the session the socket holds: follow may replace it before each turn.
	defer func() { l.attach(-1) }()
	if q := scopeOf(r).limiter; q != nil {
		leave, err := q.OpenWebSocket()
		if err != nil {
			writeError(w, r, err)
			return
		}
		defer leave()
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsProtocol}})
	if err != nil {
		return // Accept answered the request
	}
	c.SetReadLimit(s.maxBody)
	ws := s.openSocket(r.Context(), c)
	defer s.closeSocket(ws)
	defer ws.recover(s.log, "serving a WebSocket", "agent", a.Name, "session", l.id)
	if err := ws.send(WSMessage{Type: "session", SessionID: l.id, Agent: a.Name}); err != nil {
		return
	}
	key := webSocketKey(r)
	var turns sync.WaitGroup
	defer turns.Wait()
	for {
		_, data, err := c.Read(ws.ctx)
		if err != nil {
			return
		}
		ws.heard()
		if s.keys != nil {
			// A key revoked since the handshake runs no more turns.
			if _, err := s.keys.Authenticate(key); err != nil {
				ws.fail(fmt.Errorf("%w: the socket's key is no longer valid", ErrUnauthenticated))
				turns.Wait()
				c.Close(websocket.StatusPolicyViolation, "the API key is no longer valid")
				return
			}
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
		in := req.input()
		cur, err := s.sessions.follow(ws.ctx, l)
		if err != nil {
			ws.fail(err)
			continue
		}
		l = cur
		// A turn waiting in its tenant's line holds up reading the socket, for at
		// most the tenant's turnQueueTimeout: its client waits for it anyway.
		done, err := s.sessions.admit(ws.ctx, l.agent)
		if err != nil {
			ws.fail(err)
			continue
		}
		if !ws.startTurn() {
			done()
			ws.fail(ErrShuttingDown)
			return // the drain closes the socket
		}
		if err := s.sessions.claim(l, done); err != nil {
			ws.fail(err)
			if ws.endTurn() {
				return
			}
			continue
		}
		turns.Add(1)
		go func(l *live) {
			defer turns.Done()
			defer ws.recover(s.log, "running a turn on a WebSocket", "agent", a.Name, "session", l.id)
			aborted := false
			ended, out, err := s.sessions.run(l, in, func(c *session.AnyChunk) error {
				aborted = c.EndTurn && c.FinishReason == session.FinishAborted
				return ws.send(WSMessage{Type: "chunk", Chunk: c})
			})
			var te *session.TurnError
			if err != nil && !errors.As(err, &te) {
				// A refusal is in its chunk already, a failed turn in its EndTurn
				// chunk; anything else ends the turn here.
				ws.fail(err)
			}
			switch {
			case ws.endTurn():
				// The server drains: the socket closed, telling the client to
				// reconnect, which the load balancer sends to another host.
			case out != nil && out.FinishReason == session.FinishDetached:
				// A detached turn streams nothing: the socket is told its pending
				// snapshot, and ends with the session's connection.
				ws.send(WSMessage{Type: "detached", SessionID: out.SessionID, SnapshotID: out.SnapshotID})
				c.Close(websocket.StatusNormalClosure, "the session ended")
			case ended && errors.Is(err, session.ErrConflict), ended && aborted && kept(ws.ctx, l):
				// Another host continued the session first, or the client cancelled the
				// turn: the socket stays, and its next turn follows the session from the
				// store's head.
			case ended:
				// Halted, or cancelled where nothing of the session is kept: so is the
				// socket.
				c.Close(websocket.StatusNormalClosure, "the session ended")
			}
		}(l)
	}
}

// kept reports whether the session's agent keeps something of it, to reopen it from.
func kept(ctx context.Context, l *live) bool {
	ok, err := l.agent.HasSession(ctx, l.id)
	return ok && err == nil
}

// wsConn is a WebSocket being served: its messages are written one at a time, each
// within the write timeout; it is closed once idle, and when the server drains, at
// once if no turn runs on it, else as soon as its turn has ended, so that the client
// has the turn's last chunk first.
type wsConn struct {
	c      *websocket.Conn
	ctx    context.Context // the socket's: ends when it is closed
	cancel context.CancelFunc
	write  time.Duration
	idle   time.Duration
	mu     sync.Mutex  // one write at a time
	unhook func() bool // stops the drain's call of drain

	stateMu           sync.Mutex
	running, draining bool        // a turn runs on it; the server drains
	timer             *time.Timer // closes it once idle
}

// openSocket registers a WebSocket just accepted, which the drain closes and Shutdown
// cuts past its deadline.
func (s *Server) openSocket(ctx context.Context, c *websocket.Conn) *wsConn {
	ctx, cancel := context.WithCancel(ctx)
	ws := &wsConn{c: c, ctx: ctx, cancel: cancel, write: s.timeouts.Write, idle: s.timeouts.WebSocketIdle}
	ws.timer = time.AfterFunc(ws.idle, func() {
		c.Close(websocket.StatusGoingAway, fmt.Sprintf("idle for %v", ws.idle))
	})
	ws.unhook = context.AfterFunc(s.drainCtx, ws.drain)
	s.socksMu.Lock()
	s.socks[ws] = struct{}{}
	s.socksMu.Unlock()
	return ws
}

// closeSocket closes a WebSocket at once and forgets it.
func (s *Server) closeSocket(ws *wsConn) {
	s.socksMu.Lock()
	delete(s.socks, ws)
	s.socksMu.Unlock()
	ws.unhook()
	ws.timer.Stop()
	ws.cancel()
	ws.c.CloseNow()
}

// eachSocket calls f on every WebSocket open.
func (s *Server) eachSocket(f func(*wsConn)) {
	s.socksMu.Lock()
	all := make([]*wsConn, 0, len(s.socks))
	for ws := range s.socks {
		all = append(all, ws)
	}
	s.socksMu.Unlock()
	for _, ws := range all {
		f(ws)
	}
}

// heard notes a message from the client: the socket is not idle.
func (w *wsConn) heard() {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	w.timer.Stop()
	if !w.running {
		w.timer.Reset(w.idle)
	}
}

// startTurn marks a turn running on the socket (it is not idle until it ends), or
// reports false when the server drains: the socket is closing, and the turn must not
// start.
func (w *wsConn) startTurn() bool {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	if w.draining {
		return false
	}
	w.running = true
	w.timer.Stop()
	return true
}

// endTurn marks the socket's turn ended, and closes the socket if the server drains;
// it reports whether it did.
func (w *wsConn) endTurn() bool {
	w.stateMu.Lock()
	w.running = false
	w.timer.Reset(w.idle)
	closing := w.draining
	w.stateMu.Unlock()
	if closing {
		w.reconnect()
	}
	return closing
}

// drain is called as the server starts draining.
func (w *wsConn) drain() {
	w.stateMu.Lock()
	w.draining = true
	idle := !w.running
	w.stateMu.Unlock()
	if idle {
		w.reconnect()
	}
}

// reconnect closes the socket telling its client to reconnect.
func (w *wsConn) reconnect() {
	w.c.Close(StatusReconnect, "the server is draining: reconnect and go on with the session")
}

func (w *wsConn) send(m WSMessage) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithTimeout(w.ctx, w.write)
	defer cancel()
	// A write that times out closes the socket: its client stopped reading.
	return w.c.Write(ctx, websocket.MessageText, data)
}

func (w *wsConn) fail(err error) {
	_, body := classify(err)
	w.send(WSMessage{Type: "error", Error: body})
}

// recover, deferred by a goroutine serving the socket, stops a panic there from
// ending the process (or, in net/http's goroutine, from leaving the socket open): it
// is logged, once, with its stack, and the socket closed.
func (w *wsConn) recover(log *slog.Logger, what string, args ...any) {
	if v := recover(); v != nil {
		log.ErrorContext(w.ctx, "panic "+what, append(args, "panic", v, "stack", string(debug.Stack()))...)
		w.c.Close(websocket.StatusInternalError, "internal error")
	}
}
