package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// chatCompletion is the part of a chat.completion the tests read.
type chatCompletion struct {
	Object  string `json:"object"`
	Choices []struct {
		Message struct {
			Role      string     `json:"role"`
			Content   *string    `json:"content"`
			Refusal   *string    `json:"refusal"`
			ToolCalls []toolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// chat posts a chat completion request, with the session header when session is not
// empty, and decodes the answer into out.
func (ts *testServer) chat(t *testing.T, session string, body any, out any) *http.Response {
	t.Helper()
	resp := ts.postChat(t, session, body)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
	}
	return resp
}

// postChat posts a chat completion request (a string is sent as it is), with the
// session header when session is not empty.
func (ts *testServer) postChat(t *testing.T, session string, body any) *http.Response {
	t.Helper()
	data, _ := json.Marshal(body)
	if s, ok := body.(string); ok {
		data = []byte(s)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/v1/chat/completions", strings.NewReader(string(data)))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Terrarium-Session-Id", session)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// chunk is a chat.completion.chunk as the tests read it.
type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Index int `json:"index"`
				toolCall
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	// HasUsage says the chunk has a usage field, null or not.
	HasUsage bool `json:"-"`
}

// streamChat posts a streamed request and returns its chunks, checking that the
// stream ends with [DONE].
func (ts *testServer) streamChat(t *testing.T, session string, body map[string]any) []chunk {
	t.Helper()
	body["stream"] = true
	resp := ts.postChat(t, session, body)
	defer resp.Body.Close()
	events := readEvents(t, resp.Body)
	if len(events) == 0 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("the stream does not end with [DONE]: %+v", events)
	}
	var out []chunk
	for _, e := range events[:len(events)-1] {
		var c chunk
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(e.data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("event %q: %v", e.data, err)
		}
		json.Unmarshal([]byte(e.data), &fields)
		_, c.HasUsage = fields["usage"]
		out = append(out, c)
	}
	return out
}

// gathered gathers a stream's text, tool calls and finish reason.
func gathered(chunks []chunk) (text string, calls []toolCall, finish string) {
	for _, c := range chunks {
		if len(c.Choices) == 0 {
			continue
		}
		text += c.Choices[0].Delta.Content
		for _, tc := range c.Choices[0].Delta.ToolCalls {
			calls = append(calls, tc.toolCall)
		}
		if f := c.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	return text, calls, finish
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

func TestOpenAIChatCompletions(t *testing.T) {
	ts := newTestServer(t)
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	ts.do(t, "GET", "/v1/models", nil, &models)
	if len(models.Data) != len(testAgents) || models.Data[0].ID != "client" {
		t.Errorf("models %+v", models)
	}
	var model struct{ ID, Object string }
	if resp := ts.do(t, "GET", "/v1/models/echo", nil, &model); resp.StatusCode != 200 || model.ID != "echo" || model.Object != "model" {
		t.Errorf("GET /v1/models/echo: %d %+v", resp.StatusCode, model)
	}

	var out chatCompletion
	resp := ts.chat(t, "", `{"model": "echo", "n": 1, "messages": [{"role": "user", "content": "hi"}]}`, &out)
	c := out.Choices[0]
	if resp.StatusCode != 200 || out.Object != "chat.completion" || *c.Message.Content != "echo: hi" || c.FinishReason != "stop" ||
		c.Message.Refusal != nil || c.Message.ToolCalls != nil {
		t.Fatalf("%d %+v", resp.StatusCode, out)
	}
	id := resp.Header.Get("X-Terrarium-Session-Id")
	if id == "" {
		t.Fatal("no session header")
	}

	// Naming the session continues it: the agent keeps the history.
	text, calls, finish := gathered(ts.streamChat(t, id, map[string]any{"model": "echo",
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "again"}}}}}))
	if text != "echo: again" || finish != "stop" || calls != nil {
		t.Errorf("streamed %q, finish %q, calls %v", text, finish, calls)
	}
	var snaps struct{ Snapshots []json.RawMessage }
	ts.do(t, "GET", "/api/agents/echo/sessions/"+id+"/snapshots", nil, &snaps)
	if len(snaps.Snapshots) != 2 {
		t.Errorf("the session has %d snapshots, want one per request", len(snaps.Snapshots))
	}

	// An agent whose clients keep the state gets the earlier messages as its state.
	ts.chat(t, "", `{"model": "client", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}`, &out)
	if *out.Choices[0].Message.Content != "echo: c" {
		t.Errorf("client-kept agent: %+v", out)
	}
}

// An interrupt comes back as a tool call; the client's tool message, without the
// session header, resumes the interrupted turn in the same session.
func TestOpenAIInterruptIsAToolCall(t *testing.T) {
	ts := newTestServer(t)
	ask := user("ask your name?")
	for _, stream := range []bool{false, true} {
		var calls []toolCall
		var session string
		if stream {
			var finish string
			_, calls, finish = gathered(ts.streamChat(t, "", map[string]any{"model": "echo", "messages": []any{ask}}))
			if finish != "tool_calls" {
				t.Errorf("streamed finish %q", finish)
			}
		} else {
			var out chatCompletion
			resp := ts.chat(t, "", map[string]any{"model": "echo", "messages": []any{ask}}, &out)
			session = resp.Header.Get("X-Terrarium-Session-Id")
			if c := out.Choices[0]; c.FinishReason != "tool_calls" || c.Message.Content != nil {
				t.Errorf("finish %q, content %v", c.FinishReason, c.Message.Content)
			}
			calls = out.Choices[0].Message.ToolCalls
		}
		if len(calls) != 1 || calls[0].Type != "function" || calls[0].Function.Name != "askUser" ||
			calls[0].Function.Arguments != `{"question":"your name?"}` || calls[0].ID == "" {
			t.Fatalf("stream %v: tool calls %+v", stream, calls)
		}
		var out chatCompletion
		resp := ts.chat(t, "", map[string]any{"model": "echo", "messages": []any{ask,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": calls},
			map[string]any{"role": "tool", "tool_call_id": calls[0].ID, "content": "Ada"}}}, &out)
		if resp.StatusCode != 200 || *out.Choices[0].Message.Content != `answer: "Ada"` || out.Choices[0].FinishReason != "stop" {
			t.Fatalf("stream %v: the answer resumes the turn: %d %+v", stream, resp.StatusCode, out)
		}
		if session != "" && resp.Header.Get("X-Terrarium-Session-Id") != session {
			t.Errorf("the answer ran in session %s, not %s", resp.Header.Get("X-Terrarium-Session-Id"), session)
		}
	}

	// A tool message alone continues the session its id names; one whose id names
	// another session than the header is refused.
	var out chatCompletion
	resp := ts.chat(t, "", map[string]any{"model": "echo", "messages": []any{ask}}, &out)
	id := out.Choices[0].Message.ToolCalls[0].ID
	tool := map[string]any{"role": "tool", "tool_call_id": id, "content": "Bo"}
	var refused openAIError
	if r := ts.chat(t, "other", map[string]any{"model": "echo", "messages": []any{tool}}, &refused); r.StatusCode != 400 || *refused.Error.Param != "messages" {
		t.Errorf("another session's header: %d %+v", r.StatusCode, refused)
	}
	ts.chat(t, resp.Header.Get("X-Terrarium-Session-Id"), map[string]any{"model": "echo", "messages": []any{tool}}, &out)
	if *out.Choices[0].Message.Content != `answer: "Bo"` {
		t.Errorf("the tool message alone: %+v", out)
	}
}

// The client's tools are offered beside the agent's; a call of one comes back to the
// client, whose result continues the turn.
func TestOpenAIClientTools(t *testing.T) {
	ts := newServerOf(t, map[string]string{
		"echo.yaml":    testAgents["echo.yaml"],
		"client.yaml":  testAgents["client.yaml"],
		"closed.yaml":  "name: closed\nmodel: {name: test/echo}\nclientTools: false\n",
		"flights.yaml": flightsAgent,
	}, nil)
	lookup := map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "description": "Looks a word up.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"word": map[string]any{"type": "string"}}}, "strict": true}}
	ask := user(`call lookup {"word": "terrarium"}`)
	for _, agent := range []string{"echo", "client"} {
		var out chatCompletion
		ts.chat(t, "", map[string]any{"model": agent, "tools": []any{lookup}, "messages": []any{ask}}, &out)
		calls := out.Choices[0].Message.ToolCalls
		if out.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "lookup" || calls[0].Function.Arguments != `{"word":"terrarium"}` {
			t.Fatalf("%s: %+v", agent, out)
		}
		resp := ts.chat(t, "", map[string]any{"model": agent, "tools": []any{lookup}, "messages": []any{ask,
			map[string]any{"role": "assistant", "tool_calls": calls},
			map[string]any{"role": "tool", "tool_call_id": calls[0].ID, "content": []any{map[string]any{"type": "text", "text": "a glass garden"}}}}}, &out)
		if resp.StatusCode != 200 || *out.Choices[0].Message.Content != `answer: "a glass garden"` {
			t.Errorf("%s: the result continues the turn: %d %+v", agent, resp.StatusCode, out)
		}
	}
	// tool_choice none offers none: the model is told to call a tool it is not offered.
	var out chatCompletion
	ts.chat(t, "", map[string]any{"model": "echo", "tools": []any{lookup}, "tool_choice": "none", "messages": []any{ask}}, &out)
	if out.Choices[0].FinishReason != "stop" {
		t.Errorf("tool_choice none: %+v", out)
	}

	for _, c := range []struct {
		name, agent, param, code, says string
		tools                          []any
	}{
		{"forbidden by the agent file", "closed", "tools", "unsupported_parameter", "agent closed takes no client tools", []any{lookup}},
		{"a routed agent", "flights", "tools", "unsupported_parameter", "agent flights takes no client tools", []any{lookup}},
		{"the name of the agent's tool", "echo", "tools[0].function.name", "invalid_value", `agent echo has a tool of its own named "upper"`,
			[]any{map[string]any{"type": "function", "function": map[string]any{"name": "upper"}}}},
		{"a name OpenAI refuses", "echo", "tools[0].function.name", "invalid_value", "want 1 to 64 letters",
			[]any{map[string]any{"type": "function", "function": map[string]any{"name": "a/b"}}}},
		{"a custom tool", "echo", "tools[0].type", "unsupported_value", `"custom" is not supported`,
			[]any{map[string]any{"type": "custom", "custom": map[string]any{"name": "x"}}}},
	} {
		var e openAIError
		resp := ts.chat(t, "", map[string]any{"model": c.agent, "tools": c.tools, "messages": []any{ask}}, &e)
		if resp.StatusCode != 400 || e.Error.Param == nil || *e.Error.Param != c.param || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.says) {
			t.Errorf("%s: %d %+v", c.name, resp.StatusCode, e)
		}
	}
	var sessions struct{ Sessions []json.RawMessage }
	ts.do(t, "GET", "/api/agents/closed/sessions", nil, &sessions)
	if len(sessions.Sessions) != 0 {
		t.Errorf("a refused request left %d sessions", len(sessions.Sessions))
	}
}

// response_format asks for JSON, checked before it is returned: the content is the
// JSON alone.
func TestOpenAIResponseFormat(t *testing.T) {
	ts := newTestServer(t)
	city := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "city", "strict": true, "schema": map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}, "additionalProperties": false}}}
	var out chatCompletion
	resp := ts.chat(t, "", map[string]any{"model": "echo", "response_format": city, "messages": []any{user(`{"city": "Oslo"}`)}}, &out)
	if resp.StatusCode != 200 || *out.Choices[0].Message.Content != `{"city": "Oslo"}` {
		t.Errorf("json_schema: %d %+v", resp.StatusCode, out)
	}
	text, _, _ := gathered(ts.streamChat(t, "", map[string]any{"model": "echo", "response_format": city, "messages": []any{user(`{"city": "Lisbon"}`)}}))
	if text != `{"city": "Lisbon"}` {
		t.Errorf("streamed json_schema: %q", text)
	}
	ts.chat(t, "", map[string]any{"model": "echo", "response_format": map[string]any{"type": "json_object"}, "messages": []any{user(`[1, 2]`)}}, &out)
	if *out.Choices[0].Message.Content != `[1, 2]` {
		t.Errorf("json_object: %+v", out)
	}
	for name, body := range map[string]map[string]any{
		"off the schema": {"model": "echo", "response_format": city, "messages": []any{user(`{"city": 3}`)}},
		"not JSON":       {"model": "echo", "response_format": map[string]any{"type": "json_object"}, "messages": []any{user("plain")}},
	} {
		var e openAIError
		if resp := ts.chat(t, "", body, &e); resp.StatusCode != 502 || e.Error.Code != "invalid_output" || e.Error.Type != "server_error" {
			t.Errorf("%s: %d %+v", name, resp.StatusCode, e)
		}
	}
}

// Usage is the turn's, summed over its model calls, in the answer and, asked for, in a
// last streamed chunk.
func TestOpenAIUsage(t *testing.T) {
	ts := newTestServer(t)
	// Two model calls: the call of upper (1 message in, 1 out), then the answer
	// (3 messages in, 2 words out).
	turn := []any{user(`call upper {"text": "hi"}`)}
	var out chatCompletion
	ts.chat(t, "", map[string]any{"model": "echo", "messages": turn}, &out)
	if u := out.Usage; u == nil || u.PromptTokens != 4 || u.CompletionTokens != 3 || u.TotalTokens != 7 || *out.Choices[0].Message.Content != `answer: "HI"` {
		t.Errorf("usage %+v of %+v", u, out)
	}
	chunks := ts.streamChat(t, "", map[string]any{"model": "echo", "messages": turn, "stream_options": map[string]any{"include_usage": true}})
	last := chunks[len(chunks)-1]
	var u usage
	if len(last.Choices) != 0 || json.Unmarshal(last.Usage, &u) != nil || u.PromptTokens != 4 || u.CompletionTokens != 3 || u.TotalTokens != 7 {
		t.Errorf("the last chunk: %+v", last)
	}
	for _, c := range chunks[:len(chunks)-1] {
		if !c.HasUsage || string(c.Usage) != "null" {
			t.Errorf("a chunk before the last has usage %s (present %v), want null", c.Usage, c.HasUsage)
		}
	}
	for _, c := range ts.streamChat(t, "", map[string]any{"model": "echo", "messages": turn}) {
		if c.HasUsage {
			t.Errorf("usage streamed unasked: %s", c.Usage)
		}
	}
}

// Every parameter Terrarium cannot honour is refused with 400, naming it, as OpenAI's
// API refuses what it does not support; so are malformed requests.
func TestOpenAIRefusals(t *testing.T) {
	ts := newTestServer(t)
	msgs := `"messages": [{"role": "user", "content": "hi"}]`
	for _, c := range []struct {
		body, param, code string
	}{
		{`{"model": "echo", "n": 2, ` + msgs + `}`, "n", "unsupported_value"},
		{`{"model": "echo", "logprobs": true, ` + msgs + `}`, "logprobs", "unsupported_value"},
		{`{"model": "echo", "top_logprobs": 2, ` + msgs + `}`, "top_logprobs", "unsupported_parameter"},
		{`{"model": "echo", "audio": {"voice": "alloy", "format": "mp3"}, ` + msgs + `}`, "audio", "unsupported_parameter"},
		{`{"model": "echo", "modalities": ["text", "audio"], ` + msgs + `}`, "modalities", "unsupported_value"},
		{`{"model": "echo", "temperature": 0.2, ` + msgs + `}`, "temperature", "unsupported_parameter"},
		{`{"model": "echo", "max_tokens": 10, ` + msgs + `}`, "max_tokens", "unsupported_parameter"},
		{`{"model": "echo", "parallel_tool_calls": false, ` + msgs + `}`, "parallel_tool_calls", "unsupported_value"},
		{`{"model": "echo", "store": true, ` + msgs + `}`, "store", "unsupported_value"},
		{`{"model": "echo", "service_tier": "flex", ` + msgs + `}`, "service_tier", "unsupported_value"},
		{`{"model": "echo", "functions": [], ` + msgs + `}`, "functions", "unsupported_parameter"},
		{`{"model": "echo", "tool_choice": "required", ` + msgs + `}`, "tool_choice", "unsupported_value"},
		{`{"model": "echo", "stream_options": {"include_usage": true}, ` + msgs + `}`, "stream_options", "invalid_value"},
		{`{"model": "echo", "tempature": 1, ` + msgs + `}`, "tempature", "unknown_parameter"},
		{`{"model": "echo", "stream": "yes", ` + msgs + `}`, "stream", "invalid_type"},
		{`{"model": "echo", "response_format": {"type": "yaml"}, ` + msgs + `}`, "response_format.type", "invalid_value"},
		{`{"model": "echo", "response_format": {"type": "json_schema"}, ` + msgs + `}`, "response_format.json_schema", "missing_required_parameter"},
		{`{"model": "echo", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 7}}}, ` + msgs + `}`, "response_format.json_schema.schema", "invalid_value"},
		{`{"model": "echo", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "nothing"}}}], ` + msgs + `}`, "tools[0].function.parameters", "invalid_value"},
		{`{` + msgs + `}`, "model", "missing_required_parameter"},
		{`{"model": "", ` + msgs + `}`, "model", "missing_required_parameter"},
		{`{"model": "echo"}`, "messages", "missing_required_parameter"},
		{`{"model": "echo", "messages": []}`, "messages", "invalid_value"},
		{`{"model": "echo", "messages": [{"role": "assistant", "content": "hi"}]}`, "messages[0].role", "invalid_value"},
		{`{"model": "echo", "messages": [{"role": "user", "content": "hi", "name": "ada"}]}`, "messages[0].name", "unsupported_parameter"},
		{`{"model": "echo", "messages": [{"role": "user", "content": 3}]}`, "messages[0].content", "invalid_type"},
		{`{"model": "echo", "messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]}`, "messages[0].content[0].type", "unsupported_value"},
		{`{"model": "echo", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "high"}}]}]}`, "messages[0].content[0].image_url.detail", "unsupported_value"},
		{`{"model": "echo", "messages": [{"role": "robot", "content": "hi"}, {"role": "user", "content": "hi"}]}`, "messages[0].role", "invalid_value"},
		{`{"model": "echo", "messages": [{"role": "tool", "tool_call_id": "x", "content": "a"}, {"role": "user", "content": "hi"}]}`, "messages[0].tool_call_id", "invalid_value"},
		{`{"model": "echo", "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "a"}]}`, "messages[1].tool_call_id", "invalid_value"},
		{`{"model": "echo", "messages": [{"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{"}}]}, {"role": "user", "content": "hi"}]}`, "messages[0].tool_calls[0].function.arguments", "invalid_value"},
		{`{"model": "echo", "messages": [{"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}, {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "a", "content": "x"}]}`, "messages[0].tool_calls", "invalid_value"},
		{`{"model": "echo", "messages": [{"role": "user", "content": "hi", "extra": 1}]}`, "messages[0]", "invalid_type"},
		// Nulls where a message, a content or a part is wanted.
		{`{"model": "echo", "messages": [null]}`, "messages[0]", "invalid_type"},
		{`{"model": "echo", "messages": [{"role": "user", "content": null}]}`, "messages[0].content", "invalid_type"},
		{`{"model": "echo", "messages": [{"role": "system"}, {"role": "user", "content": "hi"}]}`, "messages[0].content", "invalid_type"},
		{`{"model": "echo", "messages": [{"role": "user", "content": [null, {"type": "text", "text": "hi"}]}]}`, "messages[0].content[0]", "invalid_type"},
	} {
		var e openAIError
		resp := ts.chat(t, "", c.body, &e)
		if resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != c.param ||
			e.Error.Code != c.code || !strings.HasPrefix(e.Error.Message, c.param+": ") {
			t.Errorf("%s: %d %+v, want param %s, code %s", c.body, resp.StatusCode, e, c.param, c.code)
		}
	}
	// What asks for what Terrarium does anyway passes; so do nulls, as OpenAI's API
	// takes them.
	var out chatCompletion
	body := `{"model": "echo", "n": 1, "logprobs": false, "parallel_tool_calls": true, "store": false, "service_tier": "auto",
		"modalities": ["text"], "temperature": null, "tools": null, "user": "u-1", "safety_identifier": "s-1", "tool_choice": "auto", ` + msgs + `}`
	if resp := ts.chat(t, "", body, &out); resp.StatusCode != 200 || *out.Choices[0].Message.Content != "echo: hi" {
		t.Errorf("accepted values: %d %+v", resp.StatusCode, out)
	}
}

// Other errors are OpenAI's error objects too: an unknown model, an unknown route.
func TestOpenAIErrors(t *testing.T) {
	ts := newTestServer(t)
	var e openAIError
	resp := ts.chat(t, "", `{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}`, &e)
	if resp.StatusCode != 404 || e.Error.Code != "model_not_found" || *e.Error.Param != "model" || e.Error.Type != "invalid_request_error" {
		t.Errorf("unknown model: %d %+v", resp.StatusCode, e)
	}
	e = openAIError{}
	if resp := ts.do(t, "GET", "/v1/models/nope", nil, &e); resp.StatusCode != 404 || e.Error.Code != "model_not_found" {
		t.Errorf("GET /v1/models/nope: %d %+v", resp.StatusCode, e)
	}
	e = openAIError{}
	if resp := ts.do(t, "GET", "/v1/embeddings", nil, &e); resp.StatusCode != 404 || e.Error.Type != "invalid_request_error" || e.Error.Param != nil {
		t.Errorf("an unknown route: %d %+v", resp.StatusCode, e)
	}
	e = openAIError{}
	if resp := ts.chat(t, "", `{"model": `, &e); resp.StatusCode != 400 || e.Error.Code != "invalid_json" {
		t.Errorf("malformed JSON: %d %+v", resp.StatusCode, e)
	}
}
