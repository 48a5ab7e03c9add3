package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/server"
)

// flightsAgent is a routed agent of one route, whose steps collect a destination and
// a number of passengers (one or more). It is strict: data its route refuses fails
// the turn (a forgiving agent drops it with a warning).
const flightsAgent = `name: flights
description: Books flights.
model: {name: test/form}
identity: I am Skye.
strict: true
routes:
  - id: flight
    title: Book a flight
    schema:
      type: object
      properties:
        destination: {type: string}
        passengers: {type: integer, minimum: 1}
    steps:
      - id: ask_destination
        prompt: Ask the destination
        collect: [destination]
      - id: ask_passengers
        prompt: Ask the number of passengers
        collect: [passengers]
`

var (
	assignment = regexp.MustCompile(`(\w+)=(\w+)`)
	doNow      = regexp.MustCompile(`Do now: (.*)`)
)

// formModel answers the calls of a routed agent of one route: the step's instruction
// as the message, and the fields to collect that the user's last message gives as
// name=value.
func formModel(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
	out := map[string]any{"message": "How can I help?"}
	if m := doNow.FindStringSubmatch(req.Messages[0].Text()); m != nil {
		out["message"] = m[1]
	}
	msgs := abi.WithoutInjected(req.Messages)
	props, _ := req.Output.Schema["properties"].(map[string]any)
	for _, m := range assignment.FindAllStringSubmatch(msgs[len(msgs)-1].Text(), -1) {
		if _, ok := props[m[1]]; ok {
			out[m[1]] = m[2]
			if n, err := strconv.Atoi(m[2]); err == nil {
				out[m[1]] = n
			}
		}
	}
	text, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &abi.GenerateResponse{Message: abi.NewModelTextMessage(string(text)), FinishReason: abi.FinishStop}, nil
}

// statusOf returns the route status a turn's events report.
func statusOf(t *testing.T, events []event) routes.Status {
	t.Helper()
	var st routes.Status
	for _, e := range events {
		var c struct {
			Status *routes.Status `json:"status"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err == nil && c.Status != nil {
			st = *c.Status
		}
	}
	return st
}

// routeState decodes a snapshot's custom state, a routed agent's route state.
func routeState(t *testing.T, custom json.RawMessage) routes.State {
	t.Helper()
	var st routes.State
	if err := json.Unmarshal(custom, &st); err != nil {
		t.Fatalf("custom state %s: %v", custom, err)
	}
	return st
}

func TestRoutedAgentOverHTTP(t *testing.T) {
	ts := newTestServer(t)
	var info server.AgentInfo
	ts.do(t, "GET", "/api/agents/flights", nil, &info)
	if strings.Join(info.Routes, ",") != "flight" || info.StateManagement != "server" || info.Model != "test/form" {
		t.Errorf("agent info %+v", info)
	}

	id := ts.newSession(t, "flights", nil)
	resp, events := ts.streamTurn(t, "flights", id, map[string]any{"text": "I want to fly, destination=Lisbon"})
	if st := statusOf(t, events); resp.StatusCode != 200 || textOf(t, events) != "Ask the destination" || st.Route != "flight" || st.Step != "ask_destination" {
		t.Fatalf("first turn: %d %q %+v", resp.StatusCode, textOf(t, events), st)
	}
	// Data the route refuses is the client's mistake, not the server's.
	var e abi.Error
	if resp := ts.do(t, "POST", "/api/agents/flights/sessions/"+id+"/turns", `{"text": "passengers=0"}`, &e); resp.StatusCode != http.StatusUnprocessableEntity || e.Code != "invalid_data" {
		t.Errorf("invalid data: %d %+v", resp.StatusCode, e)
	}
	_, events = ts.streamTurn(t, "flights", id, map[string]any{"text": "passengers=2"})
	if st := statusOf(t, events); textOf(t, events) != "Ask the number of passengers" || st.Step != "ask_passengers" {
		t.Errorf("second turn: %q %+v", textOf(t, events), st)
	}

	// The snapshots hold the route state; the first one resumes as a branch.
	var snaps struct {
		Snapshots []*struct{ SnapshotID string }
	}
	ts.do(t, "GET", "/api/agents/flights/sessions/"+id+"/snapshots", nil, &snaps)
	if len(snaps.Snapshots) < 2 {
		t.Fatalf("%d snapshots", len(snaps.Snapshots))
	}
	var sess server.SessionInfo
	ts.do(t, "GET", "/api/agents/flights/sessions/"+id, nil, &sess)
	if st := routeState(t, sess.Snapshot.State.Custom); st.DataFor("flight")["passengers"] != float64(2) || st.CurrentStep.ID != "ask_passengers" {
		t.Errorf("latest snapshot's route state %+v", st)
	}
	first := snaps.Snapshots[0].SnapshotID
	if resp := ts.do(t, "DELETE", "/api/agents/flights/sessions/"+id, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("closing the session: %d", resp.StatusCode)
	}
	if got := ts.newSession(t, "flights", map[string]any{"snapshotId": first}); got != id {
		t.Fatalf("resumed session %s, want %s", got, id)
	}
	_, events = ts.streamTurn(t, "flights", id, map[string]any{"text": "passengers=3"})
	if st := statusOf(t, events); st.Step != "ask_passengers" {
		t.Errorf("after resuming: %+v", st)
	}
	ts.do(t, "GET", "/api/agents/flights/sessions/"+id, nil, &sess)
	if st := routeState(t, sess.Snapshot.State.Custom); st.DataFor("flight")["passengers"] != float64(3) || !sess.Snapshot.Branch {
		t.Errorf("the branch's snapshot: branch %v, state %+v", sess.Snapshot.Branch, st)
	}
}

func TestRoutedAgentOverOpenAIAndWebSocket(t *testing.T) {
	ts := newTestServer(t)
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	resp := ts.do(t, "POST", "/v1/chat/completions", `{"model": "flights", "messages": [{"role": "user", "content": "destination=Oslo"}]}`, &out)
	if resp.StatusCode != 200 || out.Choices[0].Message.Content != "Ask the destination" {
		t.Fatalf("%d %+v", resp.StatusCode, out)
	}
	id := resp.Header.Get(server.SessionHeader)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/v1/chat/completions",
		strings.NewReader(`{"model": "flights", "stream": true, "messages": [{"role": "user", "content": "passengers=1"}]}`))
	req.Header.Set(server.SessionHeader, id)
	req.Header.Set("Content-Type", "application/json")
	sresp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := readEvents(t, sresp.Body)
	sresp.Body.Close()
	if !strings.Contains(events[1].data, `"content":"Ask the number of passengers"`) || events[len(events)-1].data != "[DONE]" {
		t.Errorf("streamed %v", events)
	}

	// The WebSocket continues the same session, and streams the route's status.
	w := dialWS(t, ts, "flights", "sessionId="+id)
	w.send(t, map[string]any{"text": "that is all"})
	var st routes.Status
	for m := w.next(t); !m.Chunk.EndTurn; m = w.next(t) {
		if m.Chunk.Status != nil {
			json.Unmarshal(m.Chunk.Status, &st)
		}
	}
	if !st.RouteComplete || st.Step != routes.EndRouteID {
		t.Errorf("the route did not complete: %+v", st)
	}
}
