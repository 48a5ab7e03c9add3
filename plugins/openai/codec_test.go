package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider/providertest"
)

// codec is the Chat Completions API as a server sees it (POST .../chat/completions),
// for providertest's fake server. Besides what the API checks (a model, messages, tool
// messages answering the calls of the assistant message before them), it wants JSON
// in and, for a stream, Accept: text/event-stream. Errors carry retry-after-ms.
type codec struct{}

// chatRequest is what the codec reads of a request.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []toolCall      `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice     any `json:"tool_choice"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Stream              bool `json:"stream"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	Stop                any  `json:"stop"`
	ReasoningEffort     any  `json:"reasoning_effort"`
	Reasoning           any  `json:"reasoning"`
}

func (codec) Decode(r *http.Request, body []byte) (*providertest.Request, error) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") || r.Method != http.MethodPost {
		return nil, &providertest.HTTPError{Status: 404, Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)}
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return nil, fmt.Errorf("Content-Type %q: want application/json", ct)
	}
	var c chatRequest
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("We could not parse the JSON body of your request: %v", err)
	}
	if c.Model == "" || len(c.Messages) == 0 {
		return nil, fmt.Errorf("you must provide a model parameter and at least one message")
	}
	if accept := r.Header.Get("Accept"); c.Stream != (accept == "text/event-stream") {
		return nil, fmt.Errorf("stream %v with Accept %q", c.Stream, accept)
	}
	var raw map[string]any
	json.Unmarshal(body, &raw)
	req := &providertest.Request{Model: c.Model, Stream: c.Stream, Header: r.Header, Body: raw, Reasoning: c.ReasoningEffort != nil || c.Reasoning != nil}
	calls := map[string]string{} // the names of the last assistant message's calls, by id
	for i, m := range c.Messages {
		var msg *abi.Message
		switch m.Role {
		case "system", "developer":
			msg = &abi.Message{Role: abi.RoleSystem, Content: content(m.Content)}
		case "user":
			msg = &abi.Message{Role: abi.RoleUser, Content: content(m.Content)}
		case "assistant":
			msg = &abi.Message{Role: abi.RoleModel, Content: content(m.Content)}
			clear(calls)
			for _, tc := range m.ToolCalls {
				var input any
				json.Unmarshal([]byte(tc.Function.Arguments), &input)
				msg.Content = append(msg.Content, abi.NewToolRequestPart(&abi.ToolRequest{Ref: tc.ID, Name: tc.Function.Name, Input: input}))
				calls[tc.ID] = tc.Function.Name
			}
		case "tool":
			name, ok := calls[m.ToolCallID]
			if !ok {
				return nil, fmt.Errorf("messages.[%d]: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id %q)", i, m.ToolCallID)
			}
			var text string
			if json.Unmarshal(m.Content, &text) != nil {
				text = abi.NewModelMessage(content(m.Content)...).Text()
			}
			msg = abi.NewToolMessage(&abi.ToolResponse{Ref: m.ToolCallID, Name: name, Output: text})
		default:
			return nil, fmt.Errorf("messages.[%d].role: %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range c.Tools {
		if t.Type == "function" {
			req.Tools = append(req.Tools, &abi.ToolDefinition{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
		}
	}
	switch tc := c.ToolChoice.(type) {
	case string:
		req.ToolChoice = abi.ToolChoice(tc)
	case map[string]any:
		req.Tool, _ = providertest.Field(tc, "function", "name").(string)
	}
	if rf := c.ResponseFormat; rf != nil {
		req.JSON = rf.Type == "json_object"
		if rf.Type == "json_schema" && rf.JSONSchema != nil {
			req.Schema = rf.JSONSchema.Schema
		}
	}
	for _, n := range []*int{c.MaxTokens, c.MaxCompletionTokens} {
		if n != nil {
			req.MaxTokens = *n
		}
	}
	switch s := c.Stop.(type) {
	case string:
		req.StopSequences = []string{s}
	case []any:
		for _, v := range s {
			if v, ok := v.(string); ok {
				req.StopSequences = append(req.StopSequences, v)
			}
		}
	}
	return req, nil
}

// content reads a message's content: a string, or a list of parts (images as media).
func content(raw json.RawMessage) []*abi.Part {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []*abi.Part{abi.NewTextPart(s)}
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	json.Unmarshal(raw, &parts)
	var out []*abi.Part
	for _, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, abi.NewTextPart(p.Text))
		case "image_url":
			out = append(out, abi.NewMediaPart("", p.ImageURL.URL))
		}
	}
	return out
}

func (codec) Write(w http.ResponseWriter, req *providertest.Request, a *providertest.Answer) {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if a.Call == nil {
		msg["content"] = a.Text
	} else {
		msg["tool_calls"] = []any{map[string]any{"id": a.Call.ID, "type": "function", "function": map[string]any{"name": a.Call.Name, "arguments": a.Call.Args}}}
	}
	if a.Reasoning != "" {
		msg["reasoning"] = a.Reasoning
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-" + a.ID, "object": "chat.completion", "created": 1700000000, "model": req.Model, "system_fingerprint": "fp_fake",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": wireFinish(a)}},
		"usage":   usageOf(a),
	})
}

func wireFinish(a *providertest.Answer) string {
	switch {
	case a.Call != nil:
		return "tool_calls"
	case a.Finish == abi.FinishLength:
		return "length"
	}
	return "stop"
}

func usageOf(a *providertest.Answer) map[string]any {
	return map[string]any{"prompt_tokens": a.InputTokens, "completion_tokens": a.OutputTokens, "total_tokens": a.InputTokens + a.OutputTokens}
}

func (codec) Stream(w http.ResponseWriter, req *providertest.Request, a *providertest.Answer) providertest.Events {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	s := &streamWriter{w: w, req: req, a: a}
	s.delta(map[string]any{"role": "assistant", "content": ""})
	return s
}

// streamWriter writes the chunks of a streamed completion.
type streamWriter struct {
	w   http.ResponseWriter
	req *providertest.Request
	a   *providertest.Answer
}

func (s *streamWriter) send(choices []any, extra map[string]any) {
	ev := map[string]any{"id": "chatcmpl-" + s.a.ID, "object": "chat.completion.chunk", "created": 1700000000, "model": s.req.Model, "system_fingerprint": "fp_fake", "choices": choices}
	for k, v := range extra {
		ev[k] = v
	}
	fmt.Fprintf(s.w, "data: %s\n\n", providertest.JSON(ev))
}

func (s *streamWriter) delta(d map[string]any) {
	s.send([]any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": nil}}, nil)
}

func (s *streamWriter) Reasoning(piece string) { s.delta(map[string]any{"reasoning": piece}) }
func (s *streamWriter) Text(piece string)      { s.delta(map[string]any{"content": piece}) }

func (s *streamWriter) Call(c *providertest.Call) {
	s.delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}})
}

func (s *streamWriter) Args(piece string) {
	s.delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": piece}}}})
}

// Error writes the error object OpenRouter sends mid-stream.
func (s *streamWriter) Error(status int, message string) {
	fmt.Fprintf(s.w, "data: %s\n\n", providertest.JSON(map[string]any{"error": map[string]any{"code": status, "message": message}}))
}

func (s *streamWriter) End() {
	s.send([]any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": wireFinish(s.a)}}, nil)
	if providertest.Field(s.req.Body, "stream_options", "include_usage") == true {
		s.send([]any{}, map[string]any{"usage": usageOf(s.a)})
	}
	fmt.Fprint(s.w, "data: [DONE]\n\n")
}

func (codec) Error(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter > 0 {
		w.Header().Set("retry-after-ms", strconv.FormatInt(retryAfter.Milliseconds(), 10))
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": "fake_error", "param": nil, "code": fmt.Sprintf("http_%d", status)}})
}
