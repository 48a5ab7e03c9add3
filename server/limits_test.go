package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/server"
)

// limitAgents are the agents of the tests of slow and silent peers and of failures:
// gate holds a turn running, flood streams more than socket buffers hold, unencodable
// streams a chunk the server panics encoding.
var limitAgents = map[string]string{
	"gate.yaml":        "name: gate\nmodel: {name: test/gate}\nsnapshots: {store: memory}\n",
	"flood.yaml":       "name: flood\nmodel: {name: test/flood}\nsnapshots: {store: memory}\n",
	"unencodable.yaml": "name: unencodable\nmodel: {name: test/unencodable}\nsnapshots: {store: memory}\n",
}

// shortTimeouts are timeouts a test sees pass.
var shortTimeouts = server.Timeouts{ReadHeader: 200 * time.Millisecond, Read: 200 * time.Millisecond,
	Write: 200 * time.Millisecond, Idle: 200 * time.Millisecond, WebSocketIdle: 200 * time.Millisecond}

// bound is how long a test waits for what a timeout of shortTimeouts ends: long past
// the timeout, so that a loaded machine does not fail it, but not for ever, which is
// what these tests guard against.
const bound = 20 * time.Second

// newLimitServer serves limitAgents through the http.Server the server configures.
func newLimitServer(t *testing.T, opts ...server.Option) *testServer {
	t.Helper()
	ts := newServerOf(t, limitAgents, nil, append([]server.Option{server.WithTimeouts(shortTimeouts)}, opts...)...)
	hs := httptest.NewUnstartedServer(ts.srv.Handler())
	hs.Config = ts.srv.HTTPServer(ts.srv.Handler())
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // net/http's report of a handler's panic
	hs.Start()
	t.Cleanup(hs.Close)
	ts.Server = hs
	return ts
}

// smallBuffers dials with a small receive buffer, as a client that reads little
// does, so that a server writing to it fills what lies between soon.
var smallBuffers = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var err error
	c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	return err
}}

// dialRaw opens a TCP connection to the server, with a small receive buffer.
func dialRaw(t *testing.T, ts *testServer) net.Conn {
	t.Helper()
	c, err := smallBuffers.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ended waits, within bound, for the server to end the connection (or answer and
// end it), and fails the test if it does not.
func ended(t *testing.T, c net.Conn, what string) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(bound))
	data, err := io.ReadAll(c)
	var ne net.Error
	if err != nil && (errorsAs(err, &ne) && ne.Timeout()) {
		t.Fatalf("%s: the connection is still open after %v", what, bound)
	}
	return string(data)
}

func errorsAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// A body that never comes is not waited for past the read timeout, with or without a
// key: the connection ends, answered.
func TestSlowBodyIsCutOff(t *testing.T) {
	ts := newLimitServer(t)
	c := dialRaw(t, ts)
	fmt.Fprint(c, "POST /api/agents/gate/sessions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	ended(t, c, "a body of 1 byte of 100")
}

// A keep-alive connection waiting for its next request is closed once idle.
func TestIdleConnectionIsClosed(t *testing.T) {
	ts := newLimitServer(t)
	c := dialRaw(t, ts)
	fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v, %v", resp, err)
	}
	resp.Body.Close()
	ended(t, c, "an idle keep-alive connection")
}

// running reports whether a turn runs on the session.
func running(t *testing.T, ts *testServer, agent, id string) bool {
	t.Helper()
	var info server.SessionInfo
	ts.do(t, "GET", "/api/agents/"+agent+"/sessions/"+id, nil, &info)
	return info.Running
}

// waitIdle waits, within bound, for the session's turn to end.
func waitIdle(t *testing.T, ts *testServer, agent, id, what string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for running(t, ts, agent, id) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the turn still runs after %v", what, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client that stops reading a turn's server-sent events loses its stream once a
// write waits past the write timeout: the turn runs on to its end, unseen, and frees
// its session (and its tenant's place).
func TestSSEClientThatStopsReadingLosesItsStream(t *testing.T) {
	ts := newLimitServer(t)
	id := ts.newSession(t, "flood", nil)
	c := dialRaw(t, ts)
	body := `{"text": "flood me"}`
	fmt.Fprintf(c, "POST /api/agents/flood/sessions/%s/turns HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", id, len(body), body)
	// It reads nothing, ever.
	waitIdle(t, ts, "flood", id, "a client that stopped reading")
}

// A WebSocket client that stops reading is closed once a write waits past the write
// timeout; its turn runs on to its end.
func TestWebSocketClientThatStopsReadingIsClosed(t *testing.T) {
	ts := newLimitServer(t)
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/agents/flood/connect"
	c, _, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: smallBuffers.DialContext}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	w := &wsClient{c: c}
	id := w.next(t).SessionID
	w.send(t, map[string]any{"text": "flood me"})
	// It reads nothing more.
	waitIdle(t, ts, "flood", id, "a WebSocket that stopped reading")
}

// A WebSocket on which nothing happens is closed once idle; one whose turn runs long
// is not.
func TestIdleWebSocketIsClosed(t *testing.T) {
	ts := newLimitServer(t)
	w := dialWS(t, ts, "gate", "")
	w.send(t, map[string]any{"text": "held"})
	<-ts.gate.started
	time.Sleep(3 * shortTimeouts.WebSocketIdle) // a turn running is not idleness
	ts.gate.release <- struct{}{}
	for {
		m := w.next(t)
		if m.Chunk != nil && m.Chunk.EndTurn {
			break
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	_, _, err := w.c.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("an idle WebSocket: %v, want it closed as going away", err)
	}
}

// A session is held by at most WithWebSocketsPerSession sockets: one more is refused
// with 429, and the place frees as one closes.
func TestWebSocketsPerSessionAreBounded(t *testing.T) {
	ts := newLimitServer(t, server.WithWebSocketsPerSession(2))
	first := dialWS(t, ts, "gate", "")
	q := "sessionId=" + first.sessionID
	dialWS(t, ts, "gate", q)
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/agents/gate/connect?" + q
	_, resp, err := websocket.Dial(t.Context(), url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third WebSocket on a session: %v, %v, want 429", resp, err)
	}
	first.c.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(bound)
	for {
		c, _, err := websocket.Dial(t.Context(), url, nil)
		if err == nil {
			c.CloseNow()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a WebSocket once one closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Shutdown ends by its deadline, even with a client that stopped reading its stream
// (its writes not timing out before) and a WebSocket with nothing running, which it
// closes.
func TestShutdownEndsByItsDeadline(t *testing.T) {
	ts := newLimitServer(t, server.WithTimeouts(server.Timeouts{Write: time.Hour, WebSocketIdle: time.Hour}))
	idle := dialWS(t, ts, "gate", "")
	id := ts.newSession(t, "flood", nil)
	c := dialRaw(t, ts)
	body := `{"text": "flood me"}`
	fmt.Fprintf(c, "POST /api/agents/flood/sessions/%s/turns HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", id, len(body), body)
	for !running(t, ts, "flood", id) {
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- ts.srv.Shutdown(ctx) }()
	select {
	case err := <-stopped:
		if err == nil {
			t.Error("Shutdown past its deadline reported no error")
		}
	case <-time.After(bound):
		t.Fatalf("Shutdown with a deadline of 200ms still runs after %v", bound)
	}
	rctx, rcancel := context.WithTimeout(t.Context(), bound)
	defer rcancel()
	if _, _, err := idle.c.Read(rctx); websocket.CloseStatus(err) != server.StatusReconnect && !strings.Contains(fmt.Sprint(err), "EOF") {
		t.Errorf("an idle WebSocket at shutdown: %v, want it closed with 1012, to reconnect", err)
	}
}

// A panic in the server's goroutine serving a turn (here, encoding a chunk for its
// client) ends that connection only: it is logged once, with its stack, the session
// and its turn's place are free again, and the server serves on.
func TestPanicServingATurnEndsItsConnectionOnly(t *testing.T) {
	var logs syncBuffer
	ts := newLimitServer(t, server.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	w := dialWS(t, ts, "unencodable", "")
	w.send(t, map[string]any{"text": "hi"})
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	for {
		_, _, err := w.c.Read(ctx)
		if err == nil {
			continue
		}
		if websocket.CloseStatus(err) != websocket.StatusInternalError {
			t.Fatalf("the socket whose turn panicked: %v, want it closed with an internal error", err)
		}
		break
	}
	if n := strings.Count(logs.String(), "panic running a turn on a WebSocket"); n != 1 || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("the panic was logged %d times, want once with its stack:\n%s", n, logs.String())
	}
	waitIdle(t, ts, "unencodable", w.sessionID, "the session whose turn panicked")

	// Over HTTP, net/http's goroutine panics: the session is freed all the same.
	id := ts.newSession(t, "unencodable", nil)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/api/agents/unencodable/sessions/"+id+"/turns", strings.NewReader(`{"text": "hi"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if resp, err := ts.Client().Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	waitIdle(t, ts, "unencodable", id, "the session whose turn panicked over HTTP")

	// The server serves on, the sessions too.
	other := dialWS(t, ts, "gate", "")
	other.send(t, map[string]any{"text": "still here"})
	<-ts.gate.started
	ts.gate.release <- struct{}{}
	for m := other.next(t); m.Chunk == nil || !m.Chunk.EndTurn; m = other.next(t) {
	}
}
