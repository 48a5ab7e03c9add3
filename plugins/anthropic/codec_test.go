package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider/providertest"
)

// codec is the Messages API as a server sees it (POST .../messages), for
// providertest's fake server. It refuses with 400 invalid_request_error what the API
// refuses: another anthropic-version than 2023-06-01 or a body that is not JSON; no
// model, no max_tokens of at least 1, no messages; tools whose names break
// ^[a-zA-Z0-9_-]{1,64}$ or whose input_schema is not an object; a tool_choice without
// tools; messages that do not start with user and alternate, empty ones, empty text
// blocks; tool_use outside assistant messages, tool_result outside user messages or
// after other blocks, a tool_use not answered by a tool_result in the next message or
// a tool_result answering none; thinking without a signature; media with a source of
// another type than base64, url or text.
type codec struct{}

// errorTypes are the API's error types by status.
var errorTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
	413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error",
}

func errorType(status int) string {
	if t, ok := errorTypes[status]; ok {
		return t
	}
	return "api_error"
}

var validToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// messagesRequest is what the codec reads of a request.
type messagesRequest struct {
	Model     string   `json:"model"`
	MaxTokens *float64 `json:"max_tokens"`
	System    any      `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Type        string         `json:"type"`
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	} `json:"tools"`
	ToolChoice    map[string]any `json:"tool_choice"`
	Stream        bool           `json:"stream"`
	StopSequences []string       `json:"stop_sequences"`
	Thinking      map[string]any `json:"thinking"`
}

// reqBlock is a content block of a request.
type reqBlock struct {
	Type      string         `json:"type"`
	Text      string         `json:"text"`
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Input     any            `json:"input"`
	ToolUseID string         `json:"tool_use_id"`
	Content   any            `json:"content"`
	Signature *string        `json:"signature"`
	Thinking  string         `json:"thinking"`
	Source    map[string]any `json:"source"`
}

func (codec) Decode(r *http.Request, body []byte) (*providertest.Request, error) {
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		return nil, &providertest.HTTPError{Status: 404, Message: "Not found: " + r.Method + " " + r.URL.Path}
	}
	if v := r.Header.Get("anthropic-version"); v != apiVersion {
		return nil, fmt.Errorf("anthropic-version: %q is not a supported version", v)
	}
	if ct := r.Header.Get("content-type"); ct != "application/json" {
		return nil, fmt.Errorf("content-type %q: want application/json", ct)
	}
	var m messagesRequest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("the body is not valid JSON: %v", err)
	}
	switch {
	case m.Model == "":
		return nil, fmt.Errorf("model: Field required")
	case m.MaxTokens == nil || *m.MaxTokens < 1:
		return nil, fmt.Errorf("max_tokens: Field required, at least 1")
	case len(m.Messages) == 0:
		return nil, fmt.Errorf("messages: at least one message is required")
	case len(m.ToolChoice) > 0 && len(m.Tools) == 0:
		return nil, fmt.Errorf("tool_choice may only be specified while providing tools")
	}
	var raw map[string]any
	json.Unmarshal(body, &raw)
	req := &providertest.Request{Model: m.Model, Stream: m.Stream, MaxTokens: int(*m.MaxTokens), StopSequences: m.StopSequences,
		Reasoning: m.Thinking["type"] == "enabled", Header: r.Header, Body: raw}
	switch s := m.System.(type) {
	case string:
		req.Messages = append(req.Messages, abi.NewSystemTextMessage(s))
	case []any:
		var parts []*abi.Part
		for _, b := range s {
			if text, ok := providertest.Field(b, "text").(string); ok {
				parts = append(parts, abi.NewTextPart(text))
			}
		}
		req.Messages = append(req.Messages, &abi.Message{Role: abi.RoleSystem, Content: parts})
	}
	for i, t := range m.Tools {
		if !validToolName.MatchString(t.Name) {
			return nil, fmt.Errorf("tools.%d.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
		if t.Type == "" && t.InputSchema["type"] != "object" {
			return nil, fmt.Errorf("tools.%d.input_schema.type: Input should be 'object'", i)
		}
		req.Tools = append(req.Tools, &abi.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	switch m.ToolChoice["type"] {
	case "auto":
		req.ToolChoice = abi.ToolChoiceAuto
	case "any":
		req.ToolChoice = abi.ToolChoiceRequired
	case "none":
		req.ToolChoice = abi.ToolChoiceNone
	case "tool":
		req.Tool, _ = m.ToolChoice["name"].(string)
	}
	var pending map[string]string // the tool_use ids of the last assistant message, with their names
	for i, msg := range m.Messages {
		if want := []string{"user", "assistant"}[i%2]; msg.Role != want {
			return nil, fmt.Errorf("messages.%d: roles must alternate between \"user\" and \"assistant\", starting with \"user\"", i)
		}
		var blocks []reqBlock
		var s string
		if json.Unmarshal(msg.Content, &s) == nil {
			blocks = []reqBlock{{Type: "text", Text: s}}
		} else if err := json.Unmarshal(msg.Content, &blocks); err != nil {
			return nil, fmt.Errorf("messages.%d.content: Input should be a valid list", i)
		}
		if len(blocks) == 0 {
			return nil, fmt.Errorf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		parts, uses, err := decodeBlocks(i, msg.Role, blocks, pending)
		if err != nil {
			return nil, err
		}
		if msg.Role == "user" {
			for id := range pending {
				if !slices.ContainsFunc(parts, func(p *abi.Part) bool { return p.IsToolResponse() && p.ToolResponse.Ref == id }) {
					return nil, fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, id)
				}
			}
		}
		pending = uses
		role := abi.RoleUser
		if msg.Role == "assistant" {
			role = abi.RoleModel
		}
		req.Messages = append(req.Messages, &abi.Message{Role: role, Content: parts})
	}
	return req, nil
}

// decodeBlocks reads the blocks of message i, whose tool_result blocks must answer the
// tool_use blocks pending; it returns their parts and the tool_use blocks they hold.
func decodeBlocks(i int, role string, blocks []reqBlock, pending map[string]string) ([]*abi.Part, map[string]string, error) {
	var parts []*abi.Part
	uses := map[string]string{}
	for j, b := range blocks {
		at := fmt.Sprintf("messages.%d.content.%d", i, j)
		switch b.Type {
		case "text":
			if b.Text == "" {
				return nil, nil, fmt.Errorf("%s.text: text content blocks must be non-empty", at)
			}
			parts = append(parts, abi.NewTextPart(b.Text))
		case "image", "document":
			p, err := media(at, b.Source)
			if err != nil {
				return nil, nil, err
			}
			parts = append(parts, p)
		case "tool_use":
			if _, object := b.Input.(map[string]any); role != "assistant" || b.ID == "" || !object {
				return nil, nil, fmt.Errorf("%s: a tool_use needs an id and an object input, in an assistant message", at)
			}
			uses[b.ID] = b.Name
			parts = append(parts, abi.NewToolRequestPart(&abi.ToolRequest{Ref: b.ID, Name: b.Name, Input: b.Input}))
		case "tool_result":
			name, ok := pending[b.ToolUseID]
			if role != "user" || len(parts) > len(toolResponses(parts)) || !ok {
				return nil, nil, fmt.Errorf("%s: a tool_result must come first in a user message and answer a tool_use of the message before (%s)", at, b.ToolUseID)
			}
			tr := &abi.ToolResponse{Ref: b.ToolUseID, Name: name}
			switch c := b.Content.(type) {
			case string:
				tr.Output = c
			case []any:
				var inner []reqBlock
				json.Unmarshal([]byte(providertest.JSON(c)), &inner)
				content, _, err := decodeBlocks(i, role, inner, nil)
				if err != nil {
					return nil, nil, err
				}
				tr.Content = content
			}
			parts = append(parts, abi.NewToolResponsePart(tr))
		case "thinking":
			if role != "assistant" || b.Signature == nil {
				return nil, nil, fmt.Errorf("%s.thinking.signature: Field required", at)
			}
			parts = append(parts, abi.NewReasoningPart(b.Thinking))
		}
	}
	return parts, uses, nil
}

func toolResponses(parts []*abi.Part) []*abi.Part {
	return slices.DeleteFunc(slices.Clone(parts), func(p *abi.Part) bool { return !p.IsToolResponse() })
}

// media reads the source of an image or document reqBlock.
func media(at string, src map[string]any) (*abi.Part, error) {
	mediaType, _ := src["media_type"].(string)
	switch src["type"] {
	case "base64":
		return abi.NewMediaPart(mediaType, fmt.Sprintf("data:%s;base64,%s", mediaType, src["data"])), nil
	case "url":
		url, _ := src["url"].(string)
		return abi.NewMediaPart("", url), nil
	case "text":
		return abi.NewTextPart(fmt.Sprint(src["data"])), nil
	}
	return nil, fmt.Errorf("%s.source: invalid source", at)
}

// stopReason is the API's stop_reason for an answer.
func stopReason(a *providertest.Answer) string {
	switch {
	case a.Call != nil:
		return "tool_use"
	case a.Finish == abi.FinishLength:
		return "max_tokens"
	case a.StopSequence != "":
		return "stop_sequence"
	}
	return "end_turn"
}

func stopSequence(a *providertest.Answer) any {
	if a.StopSequence == "" {
		return nil
	}
	return a.StopSequence
}

func (codec) Write(w http.ResponseWriter, req *providertest.Request, a *providertest.Answer) {
	var content []any
	if a.Reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": a.Reasoning, "signature": "fake-signature"})
	}
	if c := a.Call; c != nil {
		var input any
		json.Unmarshal([]byte(c.Args), &input)
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input})
	} else {
		content = append(content, map[string]any{"type": "text", "text": a.Text})
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("request-id", "req_fake")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_" + a.ID, "type": "message", "role": "assistant", "model": req.Model, "content": content,
		"stop_reason": stopReason(a), "stop_sequence": stopSequence(a),
		"usage": map[string]any{"input_tokens": a.InputTokens, "output_tokens": a.OutputTokens + a.ReasoningTokens, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
	})
}

func (codec) Stream(w http.ResponseWriter, req *providertest.Request, a *providertest.Answer) providertest.Events {
	w.Header().Set("content-type", "text/event-stream")
	w.Header().Set("cache-control", "no-cache")
	s := &streamWriter{w: w, a: a, index: -1}
	s.send("message_start", map[string]any{"message": map[string]any{
		"id": "msg_" + a.ID, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": a.InputTokens, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
	}})
	s.send("ping", map[string]any{})
	return s
}

// streamWriter writes the events of a streamed message, a content reqBlock at a time.
type streamWriter struct {
	w     http.ResponseWriter
	a     *providertest.Answer
	index int    // the open reqBlock's
	open  string // its type, "" when none is open
}

func (s *streamWriter) send(typ string, data map[string]any) {
	data["type"] = typ
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, providertest.JSON(data))
}

// reqBlock makes a reqBlock of the given type the open one.
func (s *streamWriter) reqBlock(typ string, start map[string]any) {
	if s.open == typ {
		return
	}
	s.close()
	s.index++
	s.open = typ
	s.send("content_block_start", map[string]any{"index": s.index, "content_block": start})
}

func (s *streamWriter) close() {
	switch s.open {
	case "":
		return
	case "thinking":
		s.delta(map[string]any{"type": "signature_delta", "signature": "fake-signature"})
	}
	s.send("content_block_stop", map[string]any{"index": s.index})
	s.open = ""
}

func (s *streamWriter) delta(d map[string]any) {
	s.send("content_block_delta", map[string]any{"index": s.index, "delta": d})
}

func (s *streamWriter) Reasoning(piece string) {
	s.reqBlock("thinking", map[string]any{"type": "thinking", "thinking": ""})
	s.delta(map[string]any{"type": "thinking_delta", "thinking": piece})
}

func (s *streamWriter) Text(piece string) {
	s.reqBlock("text", map[string]any{"type": "text", "text": ""})
	s.delta(map[string]any{"type": "text_delta", "text": piece})
}

func (s *streamWriter) Call(c *providertest.Call) {
	s.reqBlock("tool_use", map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}})
	s.Args("")
}

func (s *streamWriter) Args(piece string) {
	s.delta(map[string]any{"type": "input_json_delta", "partial_json": piece})
}

func (s *streamWriter) Error(status int, message string) {
	s.send("error", map[string]any{"error": map[string]any{"type": errorType(status), "message": message}})
}

func (s *streamWriter) End() {
	s.close()
	s.send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stopReason(s.a), "stop_sequence": stopSequence(s.a)},
		"usage": map[string]any{"output_tokens": s.a.OutputTokens + s.a.ReasoningTokens}})
	s.send("message_stop", map[string]any{})
}

func (codec) Error(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	if retryAfter > 0 {
		w.Header().Set("retry-after", strconv.FormatFloat(retryAfter.Seconds(), 'g', -1, 64))
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": errorType(status), "message": message}, "request_id": "req_fake"})
}

// TestCodecRefuses checks that the fake refuses requests the API refuses, so that a
// plugin sending them fails its tests.
func TestCodecRefuses(t *testing.T) {
	decode := func(body string) error {
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
		r.Header.Set("anthropic-version", apiVersion)
		r.Header.Set("content-type", "application/json")
		_, err := (codec{}).Decode(r, []byte(body))
		return err
	}
	if err := decode(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`); err != nil {
		t.Fatalf("a valid request: %v", err)
	}
	for name, body := range map[string]string{
		"no max_tokens":          `{"model":"m","messages":[{"role":"user","content":"a"}]}`,
		"two user messages":      `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
		"a bad tool name":        `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"}],"tools":[{"name":"math/add","input_schema":{"type":"object"}}]}`,
		"tool_choice, no tools":  `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"auto"}}`,
		"an unanswered tool_use": `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":"b"}]}`,
		"thinking unsigned":      `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm"}]}]}`,
	} {
		if err := decode(body); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
