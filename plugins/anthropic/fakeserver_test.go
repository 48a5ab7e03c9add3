package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// newFakeAnthropic returns a loopback server answering the Messages API
// (POST .../messages) plausibly, in Anthropic's wire format, and deterministically. It
// is not a language model. It checks what the real API checks, answering 400
// invalid_request_error when a request breaks a rule: a POST with an x-api-key,
// anthropic-version 2023-06-01 and a JSON body naming a model, with max_tokens of at
// least 1 and messages that start with a user message, alternate between user and
// assistant, are not empty, hold no empty text block, and answer every tool_use of an
// assistant message with a tool_result (first in the next user message) whose
// tool_use_id matches; tool names must match ^[a-zA-Z0-9_-]{1,64}$. Without an
// x-api-key it answers 401 authentication_error, on another path 404 not_found_error.
//
// It answers by these rules, in order, from the last user message:
//
//  1. text "/status NNN": that HTTP error, in the API's error format (429 and 529 with
//     retry-after: 1);
//  2. tool_result blocks: "Tool results: " and their texts, joined with "; ";
//  3. text "use <tool> [json]" naming an offered tool (by its name, or the name with
//     "/", "." and ":" sanitized; trailing punctuation ignored), or tool_choice any/tool: a tool_use of that tool (or the
//     first offered, or the one tool_choice names) with the JSON object given, or a
//     minimal instance of its input_schema; id "toolu_fake_<number of messages>";
//  4. format instructions holding a JSON Schema in a ``` fence ("Output should be in
//     JSON format and conform to the following schema"): a minimal instance of the
//     schema, as JSON text; "Output should be JSON.": {};
//  5. otherwise "echo: " and the message's text (parts joined with a space).
//
// With "thinking": {"type": "enabled"} the answer starts with a thinking block
// ("Thinking about: <text>", signature "fake-signature"). Text is cut at the first
// stop sequence found (stop_reason stop_sequence) or after max_tokens words
// (max_tokens; thinking is not counted). Usage counts words: input_tokens those of the system and messages,
// output_tokens those of the answer. With "stream": true the answer is streamed as
// server-sent events (message_start, ping, content_block_start/delta/stop with text
// word by word, thinking and signature deltas, input_json_delta in pieces,
// message_delta, message_stop), each flushed as it is written.
func newFakeAnthropic(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(fakeAnthropic))
	t.Cleanup(srv.Close)
	return srv
}

// fakeErrorTypes are the API's error types by status.
var fakeErrorTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
	413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error",
}

func fakeError(w http.ResponseWriter, status int, format string, args ...any) {
	typ, ok := fakeErrorTypes[status]
	if !ok {
		typ = "api_error"
	}
	if status == 429 || status == 529 || status == 503 {
		w.Header().Set("retry-after", "1")
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": fmt.Sprintf(format, args...)},
		"request_id": "req_fake",
	})
	w.Write(b)
}

// fakeRequest is what the fake reads of a request.
type fakeRequest struct {
	Model         string           `json:"model"`
	MaxTokens     *float64         `json:"max_tokens"`
	System        any              `json:"system"`
	Messages      []fakeMessage    `json:"messages"`
	Tools         []map[string]any `json:"tools"`
	ToolChoice    map[string]any   `json:"tool_choice"`
	Stream        bool             `json:"stream"`
	StopSequences []string         `json:"stop_sequences"`
	Thinking      map[string]any   `json:"thinking"`
}

type fakeMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	blocks  []map[string]any
}

// fakeBlock is one content block of the fake's answer.
type fakeBlock struct {
	typ, text, id, name string
	input               map[string]any
}

var validToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func fakeAnthropic(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/messages") {
		fakeError(w, 404, "Not found: %s", r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		fakeError(w, 405, "method %s not allowed", r.Method)
		return
	}
	if r.Header.Get("x-api-key") == "" {
		fakeError(w, 401, "x-api-key header is required")
		return
	}
	if v := r.Header.Get("anthropic-version"); v != apiVersion {
		fakeError(w, 400, "anthropic-version: %q is not a supported version", v)
		return
	}
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fakeError(w, 400, "the body is not valid JSON: %v", err)
		return
	}
	if msg := req.validate(); msg != "" {
		fakeError(w, 400, "%s", msg)
		return
	}
	last := req.Messages[len(req.Messages)-1]
	text := blocksText(last.blocks)
	if m := regexp.MustCompile(`^/status (\d{3})$`).FindStringSubmatch(strings.TrimSpace(text)); m != nil {
		status, _ := strconv.Atoi(m[1])
		fakeError(w, status, "fake error %d as asked", status)
		return
	}
	answer := req.answer(last, text)
	inputTokens := words(systemText(req.System))
	for _, m := range req.Messages {
		inputTokens += words(blocksText(m.blocks))
	}
	stop := "end_turn"
	var stopSeq any
	outputTokens := 0
	budget := int(*req.MaxTokens)
	for i, b := range answer {
		switch b.typ {
		case "tool_use":
			stop = "tool_use"
			outputTokens += 10
		case "text":
			for _, s := range req.StopSequences {
				if j := strings.Index(answer[i].text, s); s != "" && j >= 0 {
					answer[i].text, stop, stopSeq = answer[i].text[:j], "stop_sequence", s
				}
			}
			fields := strings.Fields(answer[i].text)
			if len(fields) > budget-outputTokens {
				answer[i].text, stop = strings.Join(fields[:max(budget-outputTokens, 0)], " "), "max_tokens"
			}
			outputTokens += words(answer[i].text)
		}
	}
	for _, b := range answer {
		if b.typ == "thinking" {
			outputTokens += words(b.text) // thinking does not count against the text's budget here
		}
	}
	msgID := fmt.Sprintf("msg_fake_%d", len(req.Messages))
	if req.Stream {
		fakeStream(w, req.Model, msgID, answer, stop, stopSeq, inputTokens, outputTokens)
		return
	}
	content := []map[string]any{}
	for _, b := range answer {
		content = append(content, b.json())
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("request-id", "req_fake")
	json.NewEncoder(w).Encode(map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model, "content": content,
		"stop_reason": stop, "stop_sequence": stopSeq,
		"usage": map[string]any{"input_tokens": inputTokens, "output_tokens": outputTokens, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
	})
}

func (b fakeBlock) json() map[string]any {
	switch b.typ {
	case "thinking":
		return map[string]any{"type": "thinking", "thinking": b.text, "signature": "fake-signature"}
	case "tool_use":
		return map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
	}
	return map[string]any{"type": "text", "text": b.text}
}

// validate checks the request as the API does; it returns the error message or "".
func (req *fakeRequest) validate() string {
	if req.Model == "" {
		return "model: Field required"
	}
	if req.MaxTokens == nil {
		return "max_tokens: Field required"
	}
	if *req.MaxTokens < 1 {
		return "max_tokens: must be at least 1"
	}
	if len(req.Messages) == 0 {
		return "messages: at least one message is required"
	}
	for i, t := range req.Tools {
		name, _ := t["name"].(string)
		if !validToolName.MatchString(name) {
			return fmt.Sprintf("tools.%d.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
		if _, server := t["type"]; !server {
			if s, ok := t["input_schema"].(map[string]any); !ok || s["type"] != "object" {
				return fmt.Sprintf("tools.%d.input_schema.type: Input should be 'object'", i)
			}
		}
	}
	if len(req.ToolChoice) > 0 && len(req.Tools) == 0 {
		return "tool_choice may only be specified while providing tools"
	}
	var pendingUses []string
	for i := range req.Messages {
		m := &req.Messages[i]
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			if i == 0 {
				return "messages: first message must use the \"user\" role"
			}
			return "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"" + m.Role + "\" roles in a row"
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			m.blocks = []map[string]any{{"type": "text", "text": s}}
		} else if err := json.Unmarshal(m.Content, &m.blocks); err != nil {
			return fmt.Sprintf("messages.%d.content: Input should be a valid list", i)
		}
		if len(m.blocks) == 0 {
			return fmt.Sprintf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		results := map[string]bool{}
		seenOther := false
		var uses []string
		for j, b := range m.blocks {
			switch b["type"] {
			case "text":
				if t, _ := b["text"].(string); t == "" {
					return fmt.Sprintf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
				}
				seenOther = true
			case "tool_use":
				if m.Role != "assistant" {
					return fmt.Sprintf("messages.%d.content.%d: tool_use blocks are only allowed in assistant messages", i, j)
				}
				id, _ := b["id"].(string)
				if _, ok := b["input"].(map[string]any); !ok || id == "" {
					return fmt.Sprintf("messages.%d.content.%d: a tool_use needs an id and an object input", i, j)
				}
				uses = append(uses, id)
			case "tool_result":
				if m.Role != "user" {
					return fmt.Sprintf("messages.%d.content.%d: tool_result blocks are only allowed in user messages", i, j)
				}
				if seenOther {
					return fmt.Sprintf("messages.%d: tool_result blocks must come first in the message content", i)
				}
				id, _ := b["tool_use_id"].(string)
				results[id] = true
			case "thinking":
				if m.Role != "assistant" || b["signature"] == nil {
					return fmt.Sprintf("messages.%d.content.%d.thinking.signature: Field required", i, j)
				}
			case "image", "document":
				src, _ := b["source"].(map[string]any)
				if src == nil || (src["type"] != "base64" && src["type"] != "url" && src["type"] != "text") {
					return fmt.Sprintf("messages.%d.content.%d.source: invalid source", i, j)
				}
				seenOther = true
			default:
				seenOther = true
			}
		}
		if m.Role == "user" {
			for id := range results {
				if !contains(pendingUses, id) {
					return fmt.Sprintf("messages.%d: unexpected tool_use_id found in tool_result blocks: %s. Each tool_result block must have a corresponding tool_use block in the previous message.", i, id)
				}
			}
			for _, id := range pendingUses {
				if !results[id] {
					return fmt.Sprintf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, id)
				}
			}
		}
		pendingUses = uses
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// answer applies the rules of newFakeAnthropic's doc to the last message.
func (req *fakeRequest) answer(last fakeMessage, text string) []fakeBlock {
	var out []fakeBlock
	if req.Thinking["type"] == "enabled" {
		out = append(out, fakeBlock{typ: "thinking", text: "Thinking about: " + text})
	}
	// 2. Tool results.
	var results []string
	for _, b := range last.blocks {
		if b["type"] == "tool_result" {
			results = append(results, toolResultText(b["content"]))
		}
	}
	if len(results) > 0 {
		return append(out, fakeBlock{typ: "text", text: "Tool results: " + strings.Join(results, "; ")})
	}
	// 3. A tool call.
	if tool, input := req.toolCall(text); tool != nil {
		name, _ := tool["name"].(string)
		if input == nil {
			schema, _ := tool["input_schema"].(map[string]any)
			input, _ = minimalInstance(schema, 0).(map[string]any)
			if input == nil {
				input = map[string]any{}
			}
		}
		return append(out, fakeBlock{typ: "tool_use", id: fmt.Sprintf("toolu_fake_%d", len(req.Messages)), name: name, input: input})
	}
	// 4. Format instructions.
	if i := strings.Index(text, "conform to the following schema"); i >= 0 {
		var schema map[string]any
		rest := text[i:]
		if a := strings.Index(rest, "```"); a >= 0 {
			rest = rest[a+3:]
			rest = rest[strings.IndexByte(rest, '\n')+1:]
			if b := strings.Index(rest, "```"); b >= 0 {
				json.Unmarshal([]byte(rest[:b]), &schema)
			}
		}
		v, _ := json.Marshal(minimalInstance(schema, 0))
		return append(out, fakeBlock{typ: "text", text: string(v)})
	}
	if strings.Contains(text, "Output should be JSON.") {
		return append(out, fakeBlock{typ: "text", text: "{}"})
	}
	// 5. Echo.
	return append(out, fakeBlock{typ: "text", text: "echo: " + text})
}

// toolCall finds the tool the request asks for, and the input given with it (nil: none).
func (req *fakeRequest) toolCall(text string) (map[string]any, map[string]any) {
	if len(req.Tools) == 0 || req.ToolChoice["type"] == "none" {
		return nil, nil
	}
	sanitize := strings.NewReplacer("/", "__", ".", "_", ":", "_")
	for _, t := range req.Tools {
		name, _ := t["name"].(string)
		for i := 0; ; {
			j := strings.Index(text[i:], "use ")
			if j < 0 {
				break
			}
			i += j + 4
			rest := text[i:]
			called, args, _ := strings.Cut(rest, " ")
			if trimmed := strings.TrimRight(called, ":,;.!?"); called != name && sanitize.Replace(called) != name {
				if trimmed == called || (trimmed != name && sanitize.Replace(trimmed) != name) {
					continue
				}
			}
			var input map[string]any
			if args = strings.TrimSpace(args); strings.HasPrefix(args, "{") {
				json.NewDecoder(strings.NewReader(args)).Decode(&input)
			}
			return t, input
		}
	}
	switch req.ToolChoice["type"] {
	case "any":
		return req.Tools[0], nil
	case "tool":
		for _, t := range req.Tools {
			if t["name"] == req.ToolChoice["name"] {
				return t, nil
			}
		}
	}
	return nil, nil
}

// toolResultText is the text of a tool_result's content.
func toolResultText(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var texts []string
		for _, b := range c {
			if m, ok := b.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					texts = append(texts, t)
				} else {
					texts = append(texts, "["+fmt.Sprint(m["type"])+"]")
				}
			}
		}
		return strings.Join(texts, " ")
	}
	return ""
}

func blocksText(blocks []map[string]any) string {
	var texts []string
	for _, b := range blocks {
		if t, ok := b["text"].(string); ok && b["type"] == "text" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, " ")
}

func systemText(system any) string {
	switch s := system.(type) {
	case string:
		return s
	case []any:
		var texts []string
		for _, b := range s {
			if m, ok := b.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					texts = append(texts, t)
				}
			}
		}
		return strings.Join(texts, " ")
	}
	return ""
}

func words(s string) int { return len(strings.Fields(s)) }

// minimalInstance returns a small value matching a JSON Schema: required properties
// filled, the first enum value, minimum lengths and bounds respected.
func minimalInstance(schema map[string]any, depth int) any {
	if schema == nil || depth > 16 {
		return map[string]any{}
	}
	if c, ok := schema["const"]; ok {
		return c
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := schema[k].([]any); ok && len(alts) > 0 {
			if s, ok := alts[0].(map[string]any); ok {
				return minimalInstance(s, depth+1)
			}
		}
	}
	typ, _ := schema["type"].(string)
	if list, ok := schema["type"].([]any); ok {
		for _, x := range list {
			if s, ok := x.(string); ok && s != "null" {
				typ = s
				break
			}
		}
	}
	num := func(k string) float64 { f, _ := schema[k].(float64); return f }
	switch typ {
	case "array":
		items, _ := schema["items"].(map[string]any)
		out := []any{}
		for range int(num("minItems")) {
			out = append(out, minimalInstance(items, depth+1))
		}
		return out
	case "string":
		switch schema["format"] {
		case "date-time":
			return "1970-01-01T00:00:00Z"
		case "date":
			return "1970-01-01"
		}
		return strings.Repeat("a", int(num("minLength")))
	case "integer", "number":
		if m := num("minimum"); m > 0 {
			return m
		}
		if m := num("maximum"); m < 0 {
			return m
		}
		return 0
	case "boolean":
		return false
	case "null":
		return nil
	}
	obj := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	req, _ := schema["required"].([]any)
	names := make([]string, 0, len(req))
	for _, r := range req {
		if s, ok := r.(string); ok {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		p, _ := props[n].(map[string]any)
		obj[n] = minimalInstance(p, depth+1)
	}
	return obj
}

// fakeStream writes the answer as server-sent events, flushing each.
func fakeStream(w http.ResponseWriter, model, id string, answer []fakeBlock, stop string, stopSeq any, in, out int) {
	w.Header().Set("content-type", "text/event-stream")
	w.Header().Set("cache-control", "no-cache")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
	}})
	send("ping", map[string]any{})
	for i, b := range answer {
		switch b.typ {
		case "thinking":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "thinking", "thinking": ""}})
			for _, piece := range pieces(b.text) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": piece}})
			}
			send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "signature_delta", "signature": "fake-signature"}})
		case "tool_use":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}})
			js, _ := json.Marshal(b.input)
			send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
			for k := 0; k < len(js); k += 8 {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(js[k:min(k+8, len(js))])}})
			}
		default:
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, piece := range pieces(b.text) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
			}
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": stopSeq}, "usage": map[string]any{"output_tokens": out}})
	send("message_stop", map[string]any{})
}

// pieces splits text into words, each keeping the spaces after it.
func pieces(text string) []string {
	var out []string
	for text != "" {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		j := i
		for j < len(text) && text[j] == ' ' {
			j++
		}
		out = append(out, text[:j])
		text = text[j:]
	}
	return out
}
