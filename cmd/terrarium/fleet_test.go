package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// fleetAgents writes an agent file of the offline echo model, with no store named:
// with -store, its sessions are kept in PostgreSQL.
func fleetAgents(t testing.TB) string {
	t.Helper()
	offline, err := filepath.Abs("../../plugins/offline")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := "name: echo\nmodel: {name: offline/echo}\nplugins:\n  - path: " + offline + "\n"
	if err := os.WriteFile(filepath.Join(dir, "echo.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startFleet starts n terrarium serve processes on one PostgreSQL database.
func startFleet(t *testing.T, n int) []*served {
	t.Helper()
	url, agents := pgtest.URL(t), fleetAgents(t)
	hosts := make([]*served, n)
	for i := range hosts {
		hosts[i] = startServe(t, "-store", url, "-data", t.TempDir(), agents)
	}
	return hosts
}

// turnStatus runs a turn and returns its status and the model's text, or the error's
// code; unlike turnText it does not fail the test, so that it can run in a goroutine.
func (s *served) turnStatus(session, text string) (status int, answer string, err error) {
	return turnAt(s.url, session, text)
}

// turnAt is turnStatus on the host at url.
func turnAt(url, session, text string) (status int, answer string, err error) {
	body, _ := json.Marshal(map[string]string{"text": text})
	resp, err := http.Post(url+"/api/agents/echo/sessions/"+session+"/turns", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var out turnAnswer
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return resp.StatusCode, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, out.Code, nil
	}
	return resp.StatusCode, out.modelText(), nil
}

// userTexts returns the user messages of the session's latest snapshot, in order.
func (s *served) userTexts(t *testing.T, agent, session string) []string {
	t.Helper()
	var info struct {
		Snapshot struct {
			State struct {
				Messages []struct {
					Role    string `json:"role"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"messages"`
			} `json:"state"`
		} `json:"snapshot"`
	}
	if code := s.call(t, "GET", "/api/agents/"+agent+"/sessions/"+session, "", &info); code != http.StatusOK {
		t.Fatalf("session %s: status %d", session, code)
	}
	var out []string
	for _, m := range info.Snapshot.State.Messages {
		if m.Role == "user" && len(m.Content) > 0 {
			out = append(out, m.Content[0].Text)
		}
	}
	return out
}

// Three hosts serve one session in turn; one is killed without warning right after
// acknowledging a turn, and the others go on with nothing acknowledged lost.
func TestFleetTakesTurnsAcrossHosts(t *testing.T) {
	hosts := startFleet(t, 3)
	for i, h := range hosts {
		if code := h.call(t, "GET", "/readyz", "", nil); code != http.StatusOK {
			t.Fatalf("host %d: /readyz %d", i, code)
		}
	}
	id := newSession(t, hosts[0], "echo")
	var acked []string
	turn := func(h int) {
		t.Helper()
		text := fmt.Sprintf("turn %d on host %d", len(acked), h)
		if got := hosts[h].turnText(t, "echo", id, text); got != "echo: "+text {
			t.Fatalf("%s: %q", text, got)
		}
		acked = append(acked, text)
	}
	for i := range 6 {
		turn(i % 3)
	}
	turn(1)
	hosts[1].stop(t, syscall.SIGKILL)
	for i := range 4 {
		turn([]int{2, 0}[i%2])
	}
	for _, h := range []int{0, 2} {
		if got := hosts[h].userTexts(t, "echo", id); strings.Join(got, "|") != strings.Join(acked, "|") {
			t.Fatalf("host %d holds the turns\n%q\nwant the %d acknowledged\n%q", h, got, len(acked), acked)
		}
	}
}

// Two hosts are sent a turn of one session at the same moment, again and again. When
// both ran it from the same snapshot, exactly one wins and the other answers 409; no
// turn is lost and none is kept that was refused.
func TestFleetRacingTurns(t *testing.T) {
	hosts := startFleet(t, 2)
	id := newSession(t, hosts[0], "echo")
	hosts[0].turnText(t, "echo", id, "start")
	acked := []string{"start"}
	conflicts := 0
	for round := range 10 {
		type result struct {
			text, answer string
			status       int
			err          error
		}
		results := make([]result, len(hosts))
		var ready, wg sync.WaitGroup
		start := make(chan struct{})
		ready.Add(len(hosts))
		for i, h := range hosts {
			wg.Go(func() {
				text := fmt.Sprintf("round %d host %d", round, i)
				ready.Done()
				<-start
				status, answer, err := h.turnStatus(id, text)
				results[i] = result{text, answer, status, err}
			})
		}
		ready.Wait()
		close(start)
		wg.Wait()
		var won []string
		for i, r := range results {
			switch {
			case r.err != nil:
				t.Fatalf("round %d, host %d: %v", round, i, r.err)
			case r.status == http.StatusOK:
				won = append(won, r.text)
			case r.status == http.StatusConflict && r.answer == "conflict":
				conflicts++
			default:
				t.Fatalf("round %d, host %d: status %d %q, want 200 or 409 conflict", round, i, r.status, r.answer)
			}
		}
		if len(won) == 0 {
			t.Fatalf("round %d: no host won", round)
		}
		// Both win only when one host ran its turn after the other's commit.
		history := hosts[0].userTexts(t, "echo", id)
		added := slices.Clone(history[min(len(acked), len(history)):])
		slices.Sort(added)
		slices.Sort(won)
		if !slices.Equal(history[:min(len(acked), len(history))], acked) || !slices.Equal(added, won) {
			t.Fatalf("round %d: the session holds\n%q\nwant\n%q and then the winners %q", round, history, acked, won)
		}
		acked = history
	}
	t.Logf("%d of 10 turns of 10 rounds were refused as conflicts", conflicts)
}

// -store takes a PostgreSQL URL only: anything else is a usage error before anything
// is loaded, not a store quietly chosen otherwise.
func TestServeStoreWantsAPostgresURL(t *testing.T) {
	for _, arg := range []string{"badger", "/var/lib/terrarium", "mysql://db/terrarium"} {
		code, _, stderr := terrarium(t, "serve", "-store", arg, t.TempDir())
		if code != exitUsage || !strings.Contains(stderr, "want a postgres:// URL") {
			t.Errorf("-store %s: exit %d, %s", arg, code, stderr)
		}
	}
}

// holdText is the turn fakeOpenAI streams a first chunk of and then never finishes.
const holdText = "hold"

// slowPrefix starts a turn that fakeOpenAI streams a first chunk of and finishes after
// the duration that follows ("sleep 2s").
const slowPrefix = "sleep "

// fakeOpenAI serves a Chat Completions API on loopback for the openai plugin. It
// answers "echo: <the last user text>"; a turn of holdText streams "partial" and then
// hangs until its caller goes away (or the test ends), so that a host can be killed
// mid-turn; a turn "sleep <duration>" streams "partial", then the rest of its answer
// once the duration has passed.
func fakeOpenAI(t *testing.T) *httptest.Server {
	t.Helper()
	ended := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "want a chat completion request", http.StatusBadRequest)
			return
		}
		var text string
		if last := req.Messages[len(req.Messages)-1]; json.Unmarshal(last.Content, &text) != nil {
			var parts []struct{ Text string }
			json.Unmarshal(last.Content, &parts)
			for _, p := range parts {
				text += p.Text
			}
		}
		if !req.Stream {
			json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{
				"index": 0, "message": map[string]any{"role": "assistant", "content": "echo: " + text}, "finish_reason": "stop"}}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		delta := func(content string, finish any) {
			data, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{
				"index": 0, "delta": map[string]any{"role": "assistant", "content": content}, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", data)
			w.(http.Flusher).Flush()
		}
		if text == holdText {
			delta("partial", nil)
			select {
			case <-r.Context().Done():
			case <-ended:
			}
			return
		}
		if d, err := time.ParseDuration(strings.TrimPrefix(text, slowPrefix)); err == nil && strings.HasPrefix(text, slowPrefix) {
			delta("partial", nil)
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			case <-ended:
				return
			}
			delta(" echo: "+text, "stop")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		delta("echo: "+text, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(ended) }) // first: Close waits for the handlers
	return ts
}

// modelAgents writes the agent file echo of the openai plugin's model fake, served
// by model.
func modelAgents(t *testing.T, model *httptest.Server) string {
	t.Helper()
	openai, err := filepath.Abs("../../plugins/openai")
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(model.URL, "http://")
	dir := t.TempDir()
	src := fmt.Sprintf(`name: echo
model: {name: openai/fake}
plugins:
  - path: %s
    grants:
      http: [%q]
      config: {baseURL: "%s/v1", models: fake, apiKeySecret: ""}
`, openai, addr, model.URL)
	if err := os.WriteFile(filepath.Join(dir, "echo.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// headOf returns the ID of the session's latest snapshot.
func (s *served) headOf(t *testing.T, session string) string {
	t.Helper()
	var info struct{ Snapshot struct{ SnapshotID string } }
	if code := s.call(t, "GET", "/api/agents/echo/sessions/"+session, "", &info); code != http.StatusOK {
		t.Fatalf("session %s: status %d", session, code)
	}
	return info.Snapshot.SnapshotID
}

// A host is killed without warning while a turn runs on it (the model has streamed
// part of its answer to the client): the turn was never acknowledged, so it leaves
// nothing in the store. The session's head on the other hosts is still the last
// acknowledged turn's snapshot, its history is intact, and it goes on there.
func TestFleetHostKilledMidTurn(t *testing.T) {
	url, agents := pgtest.URL(t), modelAgents(t, fakeOpenAI(t))
	hosts := make([]*served, 2)
	for i := range hosts {
		hosts[i] = startServe(t, "-store", url, "-data", t.TempDir(), agents)
	}
	id := newSession(t, hosts[0], "echo")
	acked := []string{"one on host 0", "two on host 1"}
	for i, text := range acked {
		if got := hosts[i].turnText(t, "echo", id, text); got != "echo: "+text {
			t.Fatalf("%s: %q", text, got)
		}
	}
	head := hosts[0].headOf(t, id)

	hosts[1].streamRunning(t, id, holdText, "partial")
	hosts[1].stop(t, syscall.SIGKILL)

	if got := hosts[0].headOf(t, id); got != head {
		t.Fatalf("after the kill the session's head is %s, want %s (the last acknowledged turn's)", got, head)
	}
	if got := hosts[0].userTexts(t, "echo", id); !slices.Equal(got, acked) {
		t.Fatalf("after the kill the session holds the turns %q, want %q", got, acked)
	}
	if got := hosts[0].turnText(t, "echo", id, "three on host 0"); got != "echo: three on host 0" {
		t.Fatalf("the turn after the kill: %q", got)
	}
	if got, want := hosts[0].userTexts(t, "echo", id), append(acked, "three on host 0"); !slices.Equal(got, want) {
		t.Fatalf("after the next turn the session holds %q, want %q", got, want)
	}
}
