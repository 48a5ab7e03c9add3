package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestOpenAIChatCompletions(t *testing.T) {
	ts := newTestServer(t)
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	ts.do(t, "GET", "/v1/models", nil, &models)
	if len(models.Data) != 4 || models.Data[0].ID != "client" {
		t.Errorf("models %+v", models)
	}

	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
	}
	resp := ts.do(t, "POST", "/v1/chat/completions", `{"model": "echo", "temperature": 0.5, "messages": [{"role": "user", "content": "hi"}]}`, &out)
	if resp.StatusCode != 200 || out.Object != "chat.completion" || out.Choices[0].Message.Content != "echo: hi" || out.Choices[0].FinishReason != "stop" {
		t.Fatalf("%d %+v", resp.StatusCode, out)
	}
	id := resp.Header.Get("X-Terrarium-Session-Id")
	if id == "" {
		t.Fatal("no session header")
	}

	// Naming the session continues it: the agent keeps the history.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/v1/chat/completions",
		strings.NewReader(`{"model": "echo", "stream": true, "messages": [{"role": "user", "content": [{"type": "text", "text": "again"}]}]}`))
	req.Header.Set("X-Terrarium-Session-Id", id)
	req.Header.Set("Content-Type", "application/json")
	sresp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := readEvents(t, sresp.Body)
	sresp.Body.Close()
	var text strings.Builder
	var finish string
	for _, e := range events[:len(events)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("event %q: %v", e.data, err)
		}
		text.WriteString(c.Choices[0].Delta.Content)
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if text.String() != "echo: again" || finish != "stop" || events[len(events)-1].data != "[DONE]" {
		t.Errorf("streamed %q, finish %q, last %q", text.String(), finish, events[len(events)-1].data)
	}
	var snaps struct{ Snapshots []json.RawMessage }
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id+"/snapshots", nil, &snaps)
	if len(snaps.Snapshots) != 2 {
		t.Errorf("the session has %d snapshots, want one per request", len(snaps.Snapshots))
	}

	// An agent whose clients keep the state gets the earlier messages as its state.
	ts.do(t, "POST", "/v1/chat/completions", `{"model": "client", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}`, &out)
	if out.Choices[0].Message.Content != "echo: c" {
		t.Errorf("client-kept agent: %+v", out)
	}
}

func TestOpenAIErrors(t *testing.T) {
	ts := newTestServer(t)
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"unknown model", `{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}`, 404, "agent_not_found"},
		{"no user message last", `{"model": "echo", "messages": [{"role": "assistant", "content": "hi"}]}`, 400, "invalid_json"},
		{"malformed", `{"model": `, 400, "invalid_json"},
		{"unknown role", `{"model": "echo", "messages": [{"role": "tool", "content": "x"}, {"role": "user", "content": "hi"}]}`, 400, "invalid_json"},
	} {
		var e struct {
			Error struct{ Message, Type, Code string } `json:"error"`
		}
		resp := ts.do(t, "POST", "/v1/chat/completions", tc.body, &e)
		if resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
			t.Errorf("%s: %d %+v", tc.name, resp.StatusCode, e)
		}
	}
}
