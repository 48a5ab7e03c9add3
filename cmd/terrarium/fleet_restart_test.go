package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// maxRetries bounds the retries of one turn during a rolling restart: one host is
// away at a time, and a client sends a refused turn (503 shutting_down, a refused
// connection, a WebSocket closed with 1012) to the next host, which is up, unless it
// went away meanwhile too (docs/serving.md, "Draining a host").
const maxRetries = 2

// rollingFleet is three terrarium serve processes on one PostgreSQL database, each
// restarted at its own address.
type rollingFleet struct {
	t    *testing.T
	args []string // every host's, after its -addr
	urls []string
	mu   sync.Mutex
	live []*served
}

func startRollingFleet(t *testing.T, args ...string) *rollingFleet {
	t.Helper()
	f := &rollingFleet{t: t, args: append([]string{"-store", pgtest.URL(t)}, args...)}
	agents := fleetAgents(t)
	for range 3 {
		s := startServe(t, append(slices.Clone(f.args), "-data", t.TempDir(), agents)...)
		f.live = append(f.live, s)
		f.urls = append(f.urls, s.url)
	}
	f.args = append(f.args, agents)
	return f
}

// restart stops host i with sig and starts it again at the same address, waiting until
// it is ready. A host sent SIGTERM must exit 0.
func (f *rollingFleet) restart(i int, sig syscall.Signal) {
	t := f.t
	t.Helper()
	f.mu.Lock()
	h := f.live[i]
	f.mu.Unlock()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-h.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("host %d did not exit within 30 s of %v:\n%s", i, sig, h.stderr)
	}
	if sig == syscall.SIGTERM && err != nil {
		t.Fatalf("host %d after SIGTERM: %v\n%s", i, err, h.stderr)
	}
	addr := strings.TrimPrefix(f.urls[i], "http://")
	var s *served
	for try := 0; ; try++ {
		// The address was the old process's: another may take it first, rarely.
		s, err = startServing(serveCmd(t, append([]string{"-addr", addr, "-data", h.dataDir()}, f.args...)...))
		if err == nil || try == 20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("host %d did not start again at %s: %v", i, addr, err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	f.mu.Lock()
	f.live[i] = s
	f.mu.Unlock()
	if code := s.call(t, "GET", "/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("host %d after its restart: /readyz %d", i, code)
	}
}

// dataDir returns the -data a serve was started with.
func (s *served) dataDir() string {
	args := s.cmd.Args
	for i := len(args) - 2; i >= 0; i-- {
		if args[i] == "-data" {
			return args[i+1]
		}
	}
	return ""
}

// fleetClient sends the turns of one session to the fleet, continuously, until its
// context ends, and keeps what it sent and what was acknowledged.
type fleetClient struct {
	name       string
	session    string
	sent       []string // every turn's text, in order, sent once or more
	acked      []string // the turns answered in full
	maxRetries int
	err        error // what stopped it before its context ended
}

// acknowledged records a turn answered after retries, and reports whether the answer
// was the echo of the turn (else the client stops, saying why).
func (c *fleetClient) acknowledged(text, answer string, retries int) bool {
	if answer != "echo: "+text {
		c.err = fmt.Errorf("turn %q answered %q", text, answer)
		return false
	}
	c.acked = append(c.acked, text)
	c.maxRetries = max(c.maxRetries, retries)
	return true
}

// retryable reports whether a turn's failure means it ran nowhere (or, after a
// SIGKILL, may have) and is to be sent to another host.
func retryable(status int, code string, err error) bool {
	return err != nil || status == http.StatusServiceUnavailable && code == "shutting_down"
}

// runHTTP sends turns over HTTP, each to the next host (no affinity), a refused one
// to the host after, until stop, with which it finishes the turn it is running.
func (c *fleetClient) runHTTP(stop *atomic.Bool, urls []string) {
	host := 0
	for n := 1; !stop.Load(); n++ {
		text := fmt.Sprintf("%s turn %d", c.name, n)
		c.sent = append(c.sent, text)
		for retries := 0; ; retries++ {
			status, answer, err := turnAt(urls[host], c.session, text)
			if err == nil && status == http.StatusOK {
				if !c.acknowledged(text, answer, retries) {
					return
				}
				break
			}
			if !retryable(status, answer, err) || retries == maxRetries {
				c.err = fmt.Errorf("turn %q on %s: status %d %q, %v (retry %d)", text, urls[host], status, answer, err, retries)
				return
			}
			host = (host + 1) % len(urls)
		}
		host = (host + 1) % len(urls)
	}
}

// runWebSocket holds the session on a WebSocket, sending turns one after the other;
// when the socket is closed (1012 from a draining host, or torn down by a killed one)
// it reconnects to the next host and sends again the turn it had not seen answered.
// It stops as runHTTP does; ctx bounds its waits.
func (c *fleetClient) runWebSocket(ctx context.Context, stop *atomic.Bool, urls []string) {
	host := 0
	var conn *websocket.Conn
	defer func() {
		if conn != nil {
			conn.CloseNow()
		}
	}()
	for n := 1; !stop.Load(); n++ {
		text := fmt.Sprintf("%s turn %d", c.name, n)
		c.sent = append(c.sent, text)
		for retries := 0; ; retries++ {
			if conn == nil {
				var err error
				if conn, err = dialSession(ctx, urls[host], c.session); err != nil {
					conn = nil
					if ctx.Err() != nil {
						return
					}
					if retries == maxRetries {
						c.err = fmt.Errorf("connecting to %s: %v (retry %d)", urls[host], err, retries)
						return
					}
					host = (host + 1) % len(urls)
					continue
				}
			}
			answer, err := wsTurn(ctx, conn, text)
			if err == nil {
				if !c.acknowledged(text, answer, retries) {
					return
				}
				break
			}
			conn.CloseNow()
			conn = nil
			var refused *refusal
			if ctx.Err() != nil {
				return
			}
			if errors.As(err, &refused) && refused.Code != "shutting_down" || retries == maxRetries {
				c.err = fmt.Errorf("turn %q on %s: %v (retry %d)", text, urls[host], err, retries)
				return
			}
			host = (host + 1) % len(urls)
		}
	}
}

// refusal is an error message a WebSocket turn got.
type refusal struct{ Code, Message string }

func (r *refusal) Error() string { return r.Code + ": " + r.Message }

// dialSession opens a WebSocket holding the session on the host at url.
func dialSession(ctx context.Context, url, session string) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(url, "http")+"/api/agents/echo/connect?sessionId="+session, nil)
	if err != nil {
		return nil, err
	}
	var first server.WSMessage
	if err := readWS(dctx, conn, &first); err != nil || first.Type != "session" {
		conn.CloseNow()
		return nil, fmt.Errorf("the first message %+v: %v", first, err)
	}
	return conn, nil
}

// wsTurn runs a turn on the socket and returns the model's text; an error message is a
// *refusal, a socket closed before the turn's end another error.
func wsTurn(ctx context.Context, conn *websocket.Conn, text string) (string, error) {
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"text": text})
	if err := conn.Write(tctx, websocket.MessageText, body); err != nil {
		return "", err
	}
	var answer strings.Builder
	for {
		var m server.WSMessage
		if err := readWS(tctx, conn, &m); err != nil {
			return "", err
		}
		switch {
		case m.Type == "error":
			return "", &refusal{Code: string(m.Error.Code), Message: m.Error.Message}
		case m.Chunk == nil:
		case m.Chunk.EndTurn:
			if m.Chunk.FinishReason != "stop" {
				return "", fmt.Errorf("the turn ended %q", m.Chunk.FinishReason)
			}
			return answer.String(), nil
		case m.Chunk.Chunk != nil && m.Chunk.Chunk.Role == "model":
			answer.WriteString(m.Chunk.Chunk.Text())
		}
	}
}

func readWS(ctx context.Context, conn *websocket.Conn, m *server.WSMessage) error {
	_, data, err := conn.Read(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, m)
}

// rollingRestart restarts each host of a fleet in turn with sig while two clients
// send turns over HTTP (moving between hosts every turn) and two over WebSockets, and
// returns the clients once they have gone on past the last restart.
func rollingRestart(t *testing.T, sig syscall.Signal) (*rollingFleet, []*fleetClient) {
	f := startRollingFleet(t, "-drain-timeout", "5s", "-shutdown-timeout", "10s")
	var clients []*fleetClient
	for i, kind := range []string{"http", "http", "ws", "ws"} {
		// A session is in the store, where every host finds it, once its first turn
		// has ended: until then only the host that made it has it.
		c := &fleetClient{name: fmt.Sprintf("%s%d", kind, i), session: newSession(t, f.live[i%3], "echo")}
		text := c.name + " turn 0"
		if got := f.live[i%3].turnText(t, "echo", c.session, text); got != "echo: "+text {
			t.Fatalf("%s: %q", text, got)
		}
		c.sent, c.acked = []string{text}, []string{text}
		clients = append(clients, c)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			if strings.HasPrefix(c.name, "ws") {
				c.runWebSocket(t.Context(), &stop, f.urls)
			} else {
				c.runHTTP(&stop, f.urls)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	for i := range f.live {
		f.restart(i, sig)
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	for _, c := range clients {
		if c.err != nil {
			t.Errorf("client %s: %v", c.name, c.err)
		}
		t.Logf("client %s: %d turns acknowledged, %d sent, at most %d retries for one", c.name, len(c.acked), len(c.sent), c.maxRetries)
	}
	return f, clients
}

// The session's user texts, as any live host of the fleet reads them.
func (f *rollingFleet) history(t *testing.T, session string) []string {
	f.mu.Lock()
	h := f.live[0]
	f.mu.Unlock()
	return h.userTexts(t, "echo", session)
}

// A rolling restart under load: each host of three in turn is sent SIGTERM, drains and
// exits 0, and is started again, while clients send turns over HTTP and WebSockets.
// Every turn a client saw acknowledged is in the store, and no other; no client
// retried a turn more than maxRetries times; no session was lost.
func TestFleetRollingRestart(t *testing.T) {
	f, clients := rollingRestart(t, syscall.SIGTERM)
	for _, c := range clients {
		if len(c.acked) < 5 {
			t.Errorf("client %s had only %d turns acknowledged: the load was not continuous", c.name, len(c.acked))
		}
		if got := f.history(t, c.session); !slices.Equal(got, c.acked) {
			t.Errorf("client %s: the store holds the turns\n%q\nwant the %d acknowledged\n%q", c.name, got, len(c.acked), c.acked)
		}
	}
}

// The same with SIGKILL: a host dies without draining, so a turn it was running may
// be lost, or kept without its client hearing so (the client sends it again); but
// every turn a client saw acknowledged is in the store, in order, and nothing it did
// not send.
func TestFleetRollingKill(t *testing.T) {
	f, clients := rollingRestart(t, syscall.SIGKILL)
	for _, c := range clients {
		got := f.history(t, c.session)
		if !isSubsequence(c.acked, got) {
			t.Errorf("client %s: the store holds the turns\n%q\nwhich lack some of the %d acknowledged\n%q", c.name, got, len(c.acked), c.acked)
		}
		for _, text := range got {
			if !slices.Contains(c.sent, text) {
				t.Errorf("client %s: the store holds %q, never sent", c.name, text)
			}
		}
	}
}

// isSubsequence reports whether sub is in seq, in order, not necessarily adjacent.
func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}
