package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// streamedTurn is how a turn sent by streamRunning ended.
type streamedTurn struct {
	text, snapshot, finishReason string
	err                          error
}

// streamRunning sends a turn as server-sent events and returns once the client has
// read the chunk want: the turn is running on the host. The channel gives how it ended.
func (s *served) streamRunning(t *testing.T, session, text, want string) <-chan streamedTurn {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.url+"/api/agents/echo/sessions/"+session+"/turns?stream=true", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	started := make(chan bool, 1) // whether want streamed
	out := make(chan streamedTurn, 1)
	go func() {
		var r streamedTurn
		saw := false
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			data, ok := strings.CutPrefix(lines.Text(), "data: ")
			if !ok {
				continue
			}
			var c struct {
				Chunk *struct {
					Content []struct{ Text string }
				}
				SnapshotCreated string
				EndTurn         bool
				FinishReason    string
			}
			if r.err = json.Unmarshal([]byte(data), &c); r.err != nil {
				break
			}
			if c.Chunk != nil && len(c.Chunk.Content) > 0 {
				r.text += c.Chunk.Content[0].Text
				if c.Chunk.Content[0].Text == want && !saw {
					saw = true
					started <- true
				}
			}
			if c.SnapshotCreated != "" {
				r.snapshot = c.SnapshotCreated
			}
			if c.EndTurn {
				r.finishReason = c.FinishReason
			}
		}
		if !saw {
			started <- false
		}
		out <- r
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatalf("turn %q ended (%+v) before %q streamed", text, <-out, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("turn %q: %q did not stream within 30 s", text, want)
	}
	return out
}

// ended waits at most 30 s for a turn to end.
func ended(t *testing.T, turn <-chan streamedTurn) streamedTurn {
	t.Helper()
	select {
	case r := <-turn:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the turn did not end within 30 s")
		return streamedTurn{}
	}
}

// exited waits at most 30 s for a host to exit and returns its error (nil: exit 0).
func (s *served) exitedWithin(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.exited:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("the host did not exit within 30 s:\n%s", s.stderr)
		return nil
	}
}

// twoModelHosts starts two hosts of the echo agent of the openai plugin's fake model
// on one database, the first with the flags given, and a session with one turn.
func twoModelHosts(t *testing.T, flags ...string) (a, b *served, session string) {
	t.Helper()
	url, agents := pgtest.URL(t), modelAgents(t, fakeOpenAI(t))
	a = startServe(t, append(append([]string{"-store", url, "-data", t.TempDir()}, flags...), agents)...)
	b = startServe(t, "-store", url, "-data", t.TempDir(), agents)
	session = newSession(t, a, "echo")
	a.turnText(t, "echo", session, "first")
	return a, b, session
}

// SIGTERM while a long turn runs: the host stops being ready and refuses new turns
// with 503 and a Retry-After, the turn finishes and is kept, and the host exits 0.
func TestServeDrainLetsALongTurnFinish(t *testing.T) {
	a, b, id := twoModelHosts(t, "-drain-timeout", "30s", "-shutdown-timeout", "40s")
	other := newSession(t, a, "echo")
	turn := a.streamRunning(t, id, slowPrefix+"3s", "partial")
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(a.url + "/readyz")
		if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
			resp.Body.Close()
			break
		}
		if err == nil {
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz did not fail within 10 s of SIGTERM")
		}
	}
	resp, err := http.Post(a.url+"/api/agents/echo/sessions/"+other+"/turns", "application/json", strings.NewReader(`{"text": "refused"}`))
	if err != nil {
		t.Fatalf("a new turn while draining: %v (the listener must answer during the drain)", err)
	}
	var e struct{ Code string }
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || e.Code != "shutting_down" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a new turn while draining: %d %q, Retry-After %q; want 503 shutting_down with a Retry-After", resp.StatusCode, e.Code, resp.Header.Get("Retry-After"))
	}
	r := ended(t, turn)
	if r.err != nil || r.finishReason != "stop" || r.snapshot == "" || !strings.Contains(r.text, "echo: "+slowPrefix+"3s") {
		t.Errorf("the long turn ended %+v, want stop, its answer and its snapshot", r)
	}
	if err := a.exitedWithin(t); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, a.stderr)
	}
	if got, want := b.userTexts(t, "echo", id), []string{"first", slowPrefix + "3s"}; !slices.Equal(got, want) {
		t.Errorf("the other host reads the turns %q, want %q", got, want)
	}
}

// SIGTERM while a turn runs longer than -drain-timeout: its client gets the pending
// snapshot (detached), the turn finishes in the background and settles in the store
// before the host exits 0, and the session goes on on another host.
func TestServeDetachesATurnPastTheDrainDeadline(t *testing.T) {
	a, b, id := twoModelHosts(t, "-drain-timeout", "200ms", "-shutdown-timeout", "40s")
	turn := a.streamRunning(t, id, slowPrefix+"3s", "partial")
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := ended(t, turn)
	if r.err != nil || r.finishReason != "detached" || r.snapshot == "" {
		t.Fatalf("the turn past the drain's deadline ended %+v, want detached with its pending snapshot", r)
	}
	if err := a.exitedWithin(t); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, a.stderr)
	}
	var snap struct{ Status string }
	if code := b.call(t, "GET", "/api/agents/echo/snapshots/"+r.snapshot, "", &snap); code != http.StatusOK || snap.Status != "completed" {
		t.Errorf("the detached turn's snapshot on the other host: %d %q, want it settled, completed", code, snap.Status)
	}
	if got := b.turnText(t, "echo", id, "after"); got != "echo: after" {
		t.Errorf("the next turn on the other host: %q", got)
	}
	if got, want := b.userTexts(t, "echo", id), []string{"first", slowPrefix + "3s", "after"}; !slices.Equal(got, want) {
		t.Errorf("the session holds the turns %q, want %q", got, want)
	}
}
