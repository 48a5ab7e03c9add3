package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// fleetAgents writes an agent file of the offline echo model, with no store named:
// with -store, its sessions are kept in PostgreSQL.
func fleetAgents(t *testing.T) string {
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
	body, _ := json.Marshal(map[string]string{"text": text})
	resp, err := http.Post(s.url+"/api/agents/echo/sessions/"+session+"/turns", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var out struct {
		Code   string `json:"code"`
		Chunks []struct {
			Chunk *struct {
				Role    string `json:"role"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"chunk"`
		} `json:"chunks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return resp.StatusCode, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, out.Code, nil
	}
	var b strings.Builder
	for _, c := range out.Chunks {
		if c.Chunk != nil && c.Chunk.Role == "model" {
			for _, p := range c.Chunk.Content {
				b.WriteString(p.Text)
			}
		}
	}
	return resp.StatusCode, b.String(), nil
}

// userTexts returns the user messages of the session's latest snapshot, in order.
func (s *served) userTexts(t *testing.T, session string) []string {
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
	if code := s.call(t, "GET", "/api/agents/echo/sessions/"+session, "", &info); code != http.StatusOK {
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
		if got := hosts[h].userTexts(t, id); strings.Join(got, "|") != strings.Join(acked, "|") {
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
		history := hosts[0].userTexts(t, id)
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
