package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/server"
)

// The soak of issue 27: 1,000 turns over the HTTP surfaces (JSON, server-sent events,
// WebSockets, the OpenAI endpoint) against agents whose model fails one turn in ten
// and whose tool fails one call in five, decided by a seeded generator: no session is
// lost, the server drops no connection, every failure is a failed turn with its code
// (a tool's only under toolErrors: fail; by default the model hears of it), and every
// success is stored. A bounded count of turns, not a timed run.
func TestSoakFailingModelAndTool(t *testing.T) {
	const sessions, turns = 20, 50
	type fate struct{ modelFails, toolFails bool }
	rng := rand.New(rand.NewPCG(27, 2025))
	fates := map[string]fate{}
	for s := range sessions {
		for i := range turns {
			fates[soakText(s, i)] = fate{modelFails: rng.IntN(10) == 0, toolFails: rng.IntN(5) == 0}
		}
	}
	r := agent.NewRegistry()
	agent.DefineModel(r, "soak/model", &abi.ModelInfo{Supports: &abi.ModelSupports{Multiturn: true, Tools: true}}, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == abi.RoleTool {
			out := last.Content[0].ToolResponse.Output
			if e, ok := out.(map[string]any); ok && e["code"] != nil {
				out = fmt.Sprintf("tool error %v", e["code"])
			}
			return &abi.GenerateResponse{Message: abi.NewModelTextMessage(fmt.Sprintf("done: %v", out))}, nil
		}
		text := last.Text()
		if fates[text].modelFails {
			return nil, &abi.Error{Code: abi.CodeUnavailable, Message: "the model is down", Status: 503}
		}
		return &abi.GenerateResponse{Message: abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Name: "soak/tool", Ref: "1", Input: map[string]any{"text": text}}))}, nil
	})
	agent.DefineTool(r, "soak/tool", "looks a text up", func(ctx context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		if fates[in.Text].toolFails {
			return "", &abi.Error{Code: abi.CodeInvalidInput, Message: "the tool refuses"}
		}
		return "looked up " + in.Text, nil
	})
	agents := map[string]string{
		"strict.yaml":  "name: strict\nmodel: {name: soak/model}\ntools: [soak/tool]\ntoolErrors: fail\nsnapshots: {store: memory}\n",
		"lenient.yaml": "name: lenient\nmodel: {name: soak/model}\ntools: [soak/tool]\nsnapshots: {store: memory}\n",
	}
	mp, h, err := server.NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	ts := newServerOf(t, agents, []deploy.Option{deploy.WithRegistry(r)}, server.WithMetrics(mp, h))

	var mu sync.Mutex
	failed := map[abi.ErrorCode]int{}
	byAgent := map[string]int{} // "<agent> <code>": failed turns
	t.Run("sessions", func(t *testing.T) {
		for s := range sessions {
			t.Run(fmt.Sprint(s), func(t *testing.T) {
				t.Parallel()
				soakSession(t, ts, s, turns, func(text string) (modelFails, toolFails bool) {
					f := fates[text]
					return f.modelFails, f.toolFails
				}, func(agent string, code abi.ErrorCode) {
					mu.Lock()
					failed[code]++
					byAgent[agent+" "+string(code)]++
					mu.Unlock()
				})
			})
		}
	})
	t.Logf("failed turns by code: %v", failed)
	if failed[abi.CodeUnavailable] == 0 || failed[abi.CodeInvalidInput] == 0 {
		t.Errorf("the soak failed too few turns to mean anything: %v", failed)
	}
	// The server counted the failed turns by agent and code, as they happened.
	if got := failedTurnMetrics(t, ts); !maps.Equal(got, byAgent) {
		t.Errorf("the metrics count failed turns %v, want %v", got, byAgent)
	}
}

// failedTurnMetrics reads the server's count of failed turns by "<agent> <code>".
func failedTurnMetrics(t *testing.T, ts *testServer) map[string]int {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	line := regexp.MustCompile(`(?m)^terrarium_turns_total\{agent="([^"]*)",code="([^"]*)",[^}]*outcome="failed"[^}]*\} (\d+)$`)
	got := map[string]int{}
	for _, m := range line.FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.Atoi(m[3])
		got[m[1]+" "+m[2]] += n
	}
	return got
}

// soakSession runs one session's turns of the soak, on the surface its number picks,
// and checks it afterwards; count counts its failed turns by code.
func soakSession(t *testing.T, ts *testServer, s, turns int, fate func(string) (modelFails, toolFails bool), count func(agent string, code abi.ErrorCode)) {
	agentName := []string{"strict", "lenient"}[s%2]
	var sf surface
	switch s % 4 {
	case 0:
		sf = &jsonSurface{ts: ts, agent: agentName, id: ts.newSession(t, agentName, nil)}
	case 1:
		sf = &sseSurface{ts: ts, agent: agentName, id: ts.newSession(t, agentName, nil)}
	case 2:
		sf = &wsSurface{w: dialWS(t, ts, agentName, "")}
	case 3:
		sf = &openAISurface{ts: ts, agent: agentName}
	}
	var want []string
	failures := 0
	for i := range turns {
		text := soakText(s, i)
		modelFails, toolFails := fate(text)
		got := sf.turn(t, text)
		var code abi.ErrorCode
		switch {
		case modelFails:
			code = abi.CodeUnavailable
		case toolFails && agentName == "strict":
			code = abi.CodeInvalidInput
		}
		if code != "" {
			if got.failure == nil || got.failure.Code != code {
				t.Errorf("%s %q: %+v (%+v), want a failed turn with code %s", agentName, text, got, got.failure, code)
			}
			failures++
			count(agentName, code)
			continue
		}
		answer := "done: looked up " + text
		if toolFails {
			answer = "done: tool error invalid_input"
		}
		if got.failure != nil || got.text != answer {
			t.Errorf("%s %q: %+v (%+v), want %q", agentName, text, got, got.failure, answer)
		}
		want = append(want, text)
	}
	checkUserTurns(t, ts, agentName, sf.session(), want, failures)
}

func soakText(session, turn int) string { return fmt.Sprintf("s%02d t%02d", session, turn) }

// checkUserTurns checks a session after the soak: found (not lost), its history holding
// exactly the user messages of its successful turns, with failures failed snapshots.
func checkUserTurns(t *testing.T, ts *testServer, agent, id string, want []string, failures int) {
	t.Helper()
	var info server.SessionInfo
	if resp := ts.do(t, "GET", "/api/agents/"+agent+"/sessions/"+id, nil, &info); resp.StatusCode != http.StatusOK || info.Snapshot == nil {
		t.Errorf("session %s was lost: %d %+v", id, resp.StatusCode, info)
		return
	}
	var got []string
	for _, m := range info.Snapshot.State.Messages {
		if m.Role == abi.RoleUser {
			got = append(got, m.Text())
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("session %s holds the turns %q, want the successful %q", id, got, want)
	}
	var snaps struct{ Snapshots []struct{ Status string } }
	ts.do(t, "GET", "/api/agents/"+agent+"/sessions/"+id+"/snapshots", nil, &snaps)
	n := 0
	for _, s := range snaps.Snapshots {
		if s.Status == "failed" {
			n++
		}
	}
	if n != failures {
		t.Errorf("session %s: %d failed snapshots, want %d", id, n, failures)
	}
}

// jsonSurface runs turns over the HTTP API, answered as one JSON document each.
type jsonSurface struct {
	ts        *testServer
	agent, id string
}

func (s *jsonSurface) session() string { return s.id }

func (s *jsonSurface) turn(t *testing.T, text string) outcome {
	t.Helper()
	var res server.TurnResult
	if resp := s.ts.do(t, "POST", "/api/agents/"+s.agent+"/sessions/"+s.id+"/turns", map[string]any{"text": text}, &res); resp.StatusCode != http.StatusOK {
		t.Fatalf("%q: %d", text, resp.StatusCode)
	}
	var o outcome
	for _, c := range res.Chunks {
		o.add(c)
	}
	if n := len(res.Chunks); n == 0 || !res.Chunks[n-1].EndTurn || res.FinishReason != res.Chunks[n-1].FinishReason {
		b, _ := json.Marshal(res)
		t.Fatalf("%q: %s", text, b)
	}
	return o
}
