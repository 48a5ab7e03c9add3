package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func reflectionServer(t *testing.T) (*testServer, *httptest.Server) {
	ts := newTestServer(t)
	rs := httptest.NewServer(ts.srv.ReflectionHandler("runtime-1"))
	t.Cleanup(rs.Close)
	return ts, rs
}

func TestReflectionListsActions(t *testing.T) {
	_, rs := reflectionServer(t)
	for id, want := range map[string]int{"": 200, "runtime-1": 200, "other": 503} {
		resp, err := http.Get(rs.URL + "/api/__health?id=" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("health with id %q: %d, want %d", id, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(rs.URL + "/api/actions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var actions map[string]struct {
		Type, Key, Name string
		InputSchema     map[string]any `json:"inputSchema"`
		InitSchema      map[string]any `json:"initSchema"`
		Metadata        map[string]any `json:"metadata"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&actions); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"/session-flow/echo", "/snapshot-store/echo/getSnapshot", "/snapshot-store/echo/listSnapshots",
		"/snapshot-store/echo/abortSnapshot", "/model/test/echo", "/tool/askUser",
		"/session-flow/flights", "/snapshot-store/flights/listSnapshots"} {
		a, ok := actions[key]
		if !ok || a.Key != key || a.Metadata == nil {
			t.Errorf("%s listed as %+v", key, a)
		}
	}
	if flow := actions["/session-flow/echo"]; flow.Type != "session-flow" || flow.InputSchema == nil || flow.InitSchema == nil {
		t.Errorf("the agent's session flow: %+v", flow)
	}
	// Genkit's tools run flows: each agent has one, a turn of it.
	for _, agent := range []string{"echo", "flights"} {
		if flow := actions["/flow/"+agent]; flow.Type != "flow" || flow.InputSchema == nil || flow.Metadata["turnOf"] != "/session-flow/"+agent {
			t.Errorf("agent %s's flow: %+v", agent, flow)
		}
	}
}

// runAction runs an action through the reflection API and returns the streamed chunks
// and the final JSON object.
func runAction(t *testing.T, rs *httptest.Server, body string) ([]string, map[string]any) {
	t.Helper()
	resp, err := http.Post(rs.URL+"/api/runAction?stream=true", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Genkit-Trace-Id") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	data, _ := io.ReadAll(resp.Body)
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	var final map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &final); err != nil {
		t.Fatalf("last piece %q: %v", lines[len(lines)-1], err)
	}
	return lines[:len(lines)-1], final
}

func TestReflectionRunsActions(t *testing.T) {
	_, rs := reflectionServer(t)

	chunks, final := runAction(t, rs, `{"key": "/model/test/echo", "input": {"messages": [{"role": "user", "content": [{"text": "a b"}]}]}}`)
	if len(chunks) != 3 || final["result"].(map[string]any)["message"] == nil {
		t.Errorf("model: chunks %q, final %v", chunks, final)
	}

	chunks, final = runAction(t, rs, `{"key": "/session-flow/echo", "input": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}}`)
	result := final["result"].(map[string]any)
	session := result["sessionId"].(string)
	if !strings.Contains(strings.Join(chunks, "\n"), `"endTurn":true`) || len(result["snapshotIds"].([]any)) != 1 {
		t.Errorf("agent: chunks %q, final %v", chunks, final)
	}
	// With init, the next turn of the same session. The agent keeps its sessions: the
	// output names the snapshot and carries no state.
	_, final = runAction(t, rs, `{"key": "/session-flow/echo", "init": {"sessionId": "`+session+`"}, "input": {"messages": [{"role": "user", "content": [{"text": "again"}]}]}}`)
	result = final["result"].(map[string]any)
	snapshot, _ := result["snapshotId"].(string)
	if result["state"] != nil || snapshot == "" || result["finishReason"] != "stop" {
		t.Errorf("a server-managed output: %v", result)
	}
	_, final = runAction(t, rs, `{"key": "/snapshot-store/echo/getSnapshot", "input": {"snapshotId": "`+snapshot+`"}}`)
	if msgs := final["result"].(map[string]any)["state"].(map[string]any)["messages"].([]any); len(msgs) != 4 {
		t.Errorf("the resumed session holds %d messages", len(msgs))
	}
	// Abort answers the status the snapshot had, and none for an unknown one, as Genkit's.
	_, final = runAction(t, rs, `{"key": "/snapshot-store/echo/abortSnapshot", "input": {"snapshotId": "`+snapshot+`"}}`)
	if res, _ := final["result"].(map[string]any); res["status"] != "completed" || res["snapshotId"] != snapshot {
		t.Errorf("abort of a completed snapshot: %v", final)
	}
	_, final = runAction(t, rs, `{"key": "/snapshot-store/echo/abortSnapshot", "input": {"snapshotId": "x"}}`)
	if res, _ := final["result"].(map[string]any); final["error"] != nil || res["snapshotId"] != "x" || res["status"] != nil {
		t.Errorf("abort of an unknown snapshot: %v", final)
	}
	_, final = runAction(t, rs, `{"key": "/snapshot-store/echo/listSnapshots", "input": {"sessionId": "`+session+`"}}`)
	if snaps := final["result"].([]any); len(snaps) != 2 {
		t.Errorf("listSnapshots: %v", final)
	}

	// An agent's flow runs a turn and answers its text, as Genkit's flow:run shows it.
	chunks, final = runAction(t, rs, `{"key": "/flow/echo", "input": {"text": "hi", "sessionId": "`+session+`"}}`)
	if result := final["result"].(map[string]any); result["text"] != "echo: hi" || result["sessionId"] != session || len(chunks) < 3 {
		t.Errorf("the agent's flow: chunks %q, final %v", chunks, final)
	}

	// A routed agent runs the same way; its state is the route state.
	_, final = runAction(t, rs, `{"key": "/session-flow/flights", "input": {"messages": [{"role": "user", "content": [{"text": "destination=Rome"}]}]}}`)
	_, final = runAction(t, rs, `{"key": "/snapshot-store/flights/getSnapshot", "input": {"snapshotId": "`+final["result"].(map[string]any)["snapshotId"].(string)+`"}}`)
	custom, _ := final["result"].(map[string]any)["state"].(map[string]any)["custom"].(map[string]any)
	if data, _ := custom["dataByRoute"].(map[string]any)["flight"].(map[string]any); data["destination"] != "Rome" {
		t.Errorf("routed agent: %v", final)
	}

	for body, code := range map[string]float64{
		`{"key": "/tool/nope", "input": {}}`:                                         5,
		`{"key": "/tool/askUser", "input": {"question": 3}}`:                         3,
		`{"key": "/model/test/echo", "init": {}, "input": {}}`:                       3,
		`{"key": "/session-flow/echo", "init": {"snapshotId": "nope"}, "input": {}}`: 5,
		`{"key": "/snapshot-store/echo/getSnapshot", "input": {"snapshotId": "x"}}`:  5,
	} {
		_, final := runAction(t, rs, body)
		e, _ := final["error"].(map[string]any)
		if e == nil || e["code"] != code || e["message"] == "" {
			t.Errorf("%s: %v, want code %v", body, final, code)
		}
	}
}

// Issue 28 through the reflection API: a detached run streams nothing and answers its
// pending snapshot, which settles under its own ID.
func TestReflectionDetachedRun(t *testing.T) {
	ts, rs := reflectionServer(t)
	chunks, final := runAction(t, rs, `{"key": "/session-flow/gate", "input": {"messages": [{"role": "user", "content": [{"text": "later"}]}], "detach": true}}`)
	result, _ := final["result"].(map[string]any)
	pending, _ := result["snapshotId"].(string)
	if len(chunks) != 0 || result["finishReason"] != "detached" || pending == "" || result["state"] != nil {
		t.Fatalf("a detached run: chunks %q, final %v", chunks, final)
	}
	<-ts.gate.started
	ts.gate.release <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, final = runAction(t, rs, `{"key": "/snapshot-store/gate/getSnapshot", "input": {"snapshotId": "`+pending+`"}}`)
		snap, _ := final["result"].(map[string]any)
		if snap["status"] == "completed" {
			if snap["snapshotId"] != pending || snap["updatedAt"] == nil {
				t.Errorf("the settled snapshot: %v", snap)
			}
			return
		}
		if snap["status"] != "pending" || time.Now().After(deadline) {
			t.Fatalf("the detached run's snapshot: %v", final)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
