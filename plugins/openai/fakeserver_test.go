package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// newFakeOpenAI returns a loopback server that answers any reasonable Chat Completions
// request (POST .../chat/completions) plausibly, in OpenAI's wire format. It is not a
// language model; it answers deterministically, by these rules, in order:
//
//  0. a model named "http-<status>" (e.g. "http-429") fails with that status and an
//     OpenAI error body (429 and 503 with retry-after-ms: 10); a request that is not
//     JSON, has no model or no messages fails with 400;
//  1. when the last message has role tool: "Tool results: " followed by the contents
//     of the trailing tool messages, separated by "; ";
//  2. when tools are offered and tool_choice is not "none", and the last user text is
//     "/call <tool> <json>" for an offered tool, or says "use <tool>" (the offered
//     name, or the name before sanitizing: "use math/add" for math__add), or
//     tool_choice is "required" (the first tool) or names a function: a call of that
//     tool, id "call_fake_<n>" (n counts the tool calls of the conversation, from 1),
//     with the given JSON or a minimal instance of its parameters schema, finish
//     reason tool_calls;
//  3. when response_format is json_schema: a minimal instance of its schema as the
//     content (required properties only, filled with "", 0, false, [] or nested
//     values; the first enum value or the const; lengths and bounds respected); when
//     it is json_object: a minimal instance of the JSON schema in the last user
//     text's first code fence (the format instructions Terrarium adds), else {};
//  4. otherwise "echo: " followed by the last user text, plus " [N image(s)]" when
//     the message holds images.
//
// When the body has max_tokens or max_completion_tokens below the answer's word count,
// the text is cut to that many words with finish reason length. When the body sets
// reasoning_effort or reasoning, the message carries "reasoning": "Reasoning about: <last
// user text>". Usage counts words: prompt_tokens those of every message's text,
// completion_tokens those of the answer (the arguments' JSON for a call). The id is
// "chatcmpl-" and a hash of the body, created is 1700000000, system_fingerprint
// "fp_fake".
//
// With "stream": true it answers with server-sent events: a role delta, the reasoning
// and then the text word by word (a tool call: its id and name, then its arguments in
// pieces of 8 bytes), a delta with the finish reason, a usage chunk when
// stream_options.include_usage is set, and [DONE]. Authorization is not checked.
func newFakeOpenAI(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(serveFake))
	t.Cleanup(srv.Close)
	return srv
}

// fakeRequest is what the fake server reads from a request body.
type fakeRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice     any `json:"tool_choice"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	ReasoningEffort     any  `json:"reasoning_effort"`
	Reasoning           any  `json:"reasoning"`
}

// fakeError answers with an error in OpenAI's format.
func fakeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status == 429 || status == 503 {
		w.Header().Set("retry-after-ms", "10")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

func serveFake(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		fakeError(w, 404, "invalid_request_error", "unknown_url", fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		fakeError(w, 405, "invalid_request_error", "method_not_allowed", "Use POST.")
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var req fakeRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		fakeError(w, 400, "invalid_request_error", "invalid_json", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	if req.Model == "" || len(req.Messages) == 0 {
		fakeError(w, 400, "invalid_request_error", "missing_required_parameter", "you must provide a model parameter and at least one message")
		return
	}
	if code, ok := strings.CutPrefix(req.Model, "http-"); ok {
		if status, err := strconv.Atoi(code); err == nil && status >= 400 && status < 600 {
			fakeError(w, status, "fake_error", "http_"+code, fmt.Sprintf("the fake server fails model %s with HTTP %d", req.Model, status))
			return
		}
	}
	a := fakeAnswer(&req)
	h := fnv.New64a()
	h.Write(raw)
	id := fmt.Sprintf("chatcmpl-%016x", h.Sum64())
	promptTokens := 0
	for _, m := range req.Messages {
		text, _ := fakeContent(m.Content)
		promptTokens += len(strings.Fields(text))
	}
	usage := map[string]any{"prompt_tokens": promptTokens, "completion_tokens": a.tokens, "total_tokens": promptTokens + a.tokens}
	if req.Stream {
		fakeStream(w, &req, a, id, usage)
		return
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if a.call == nil {
		msg["content"] = a.text
	} else {
		msg["tool_calls"] = []any{map[string]any{"id": a.call.id, "type": "function", "function": map[string]any{"name": a.call.name, "arguments": a.call.args}}}
	}
	if a.reasoning != "" {
		msg["reasoning"] = a.reasoning
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": "chat.completion", "created": 1700000000, "model": req.Model, "system_fingerprint": "fp_fake",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": a.finish}},
		"usage":   usage,
	})
}

func fakeStream(w http.ResponseWriter, req *fakeRequest, a *fakeReply, id string, usage map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	send := func(choices []any, extra map[string]any) {
		ev := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": req.Model, "system_fingerprint": "fp_fake", "choices": choices}
		for k, v := range extra {
			ev[k] = v
		}
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	delta := func(d map[string]any) {
		send([]any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": nil}}, nil)
	}
	delta(map[string]any{"role": "assistant", "content": ""})
	if a.reasoning != "" {
		for _, word := range fakeWords(a.reasoning) {
			delta(map[string]any{"reasoning": word})
		}
	}
	if c := a.call; c != nil {
		delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": ""}}}})
		for i := 0; i < len(c.args); i += 8 {
			piece := c.args[i:min(i+8, len(c.args))]
			delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": piece}}}})
		}
	} else {
		for _, word := range fakeWords(a.text) {
			delta(map[string]any{"content": word})
		}
	}
	send([]any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": a.finish}}, nil)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send([]any{}, map[string]any{"usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// fakeReply is the fake server's answer: a text or a tool call.
type fakeReply struct {
	text      string
	call      *fakeCall
	reasoning string
	finish    string
	tokens    int
}

type fakeCall struct{ id, name, args string }

// fakeAnswer applies the rules of newFakeOpenAI.
func fakeAnswer(req *fakeRequest) *fakeReply {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	userText, images := "", 0
	calls := 0
	for _, m := range msgs {
		if m.Role == "user" {
			userText, images = fakeContent(m.Content)
		}
		if m.Role == "tool" {
			calls++
		}
	}
	a := &fakeReply{finish: "stop"}
	if req.ReasoningEffort != nil || req.Reasoning != nil {
		a.reasoning = "Reasoning about: " + userText
	}
	switch {
	case last.Role == "tool": // 1.
		var outs []string
		for i := len(msgs) - 1; i >= 0 && msgs[i].Role == "tool"; i-- {
			text, _ := fakeContent(msgs[i].Content)
			outs = append([]string{text}, outs...)
		}
		a.text = "Tool results: " + strings.Join(outs, "; ")
	case fakeToolCall(req, userText, calls+1) != nil: // 2.
		a.call = fakeToolCall(req, userText, calls+1)
		a.finish = "tool_calls"
		a.tokens = len(strings.Fields(a.call.args))
		return a
	case req.ResponseFormat != nil && req.ResponseFormat.Type == "json_schema" && req.ResponseFormat.JSONSchema != nil: // 3.
		b, _ := json.Marshal(fakeMinimal(req.ResponseFormat.JSONSchema.Schema, 0))
		a.text = string(b)
	case req.ResponseFormat != nil && req.ResponseFormat.Type == "json_object":
		a.text = "{}"
		if strings.Contains(userText, "```") {
			var s map[string]any
			if raw, err := abi.ExtractJSON(userText); err == nil && json.Unmarshal(raw, &s) == nil {
				b, _ := json.Marshal(fakeMinimal(s, 0))
				a.text = string(b)
			}
		}
	default: // 4.
		a.text = "echo: " + userText
		if images == 1 {
			a.text += " [1 image]"
		} else if images > 1 {
			a.text += fmt.Sprintf(" [%d images]", images)
		}
	}
	words := fakeWords(a.text)
	limit := -1
	if req.MaxTokens != nil {
		limit = *req.MaxTokens
	}
	if req.MaxCompletionTokens != nil {
		limit = *req.MaxCompletionTokens
	}
	if limit >= 0 && len(words) > limit {
		a.text = strings.TrimRightFunc(strings.Join(words[:limit], ""), unicode.IsSpace)
		a.finish = "length"
		words = words[:limit]
	}
	a.tokens = len(words)
	return a
}

// fakeToolCall finds the tool the request asks to call (rule 2), nil when none.
func fakeToolCall(req *fakeRequest, text string, n int) *fakeCall {
	if len(req.Tools) == 0 || req.ToolChoice == "none" {
		return nil
	}
	type tool struct {
		name   string
		params map[string]any
	}
	var tools []tool
	for _, t := range req.Tools {
		if t.Type == "function" && t.Function.Name != "" {
			tools = append(tools, tool{t.Function.Name, t.Function.Parameters})
		}
	}
	if len(tools) == 0 {
		return nil
	}
	call := func(t tool, args any) *fakeCall {
		if args == nil {
			args = fakeMinimal(t.params, 0)
		}
		b, _ := json.Marshal(args)
		return &fakeCall{id: fmt.Sprintf("call_fake_%d", n), name: t.name, args: string(b)}
	}
	// "/call <tool> <json>"
	if rest, ok := strings.CutPrefix(strings.TrimSpace(text), "/call "); ok {
		name, input, _ := strings.Cut(strings.TrimSpace(rest), " ")
		for _, t := range tools {
			if t.name == name || t.name == (provider.NameRule{}).Sanitize(name) {
				var v any
				if json.Unmarshal([]byte(input), &v) == nil {
					return call(t, v)
				}
				return call(t, nil)
			}
		}
	}
	// "use <tool>", with the API's name or the name before sanitizing.
	lower := strings.ToLower(text)
	for rest := lower; ; {
		i := strings.Index(rest, "use ")
		if i < 0 {
			break
		}
		rest = rest[i+4:]
		word, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		word = strings.TrimRight(word, ":,.;!?")
		for _, t := range tools {
			if name := strings.ToLower(t.name); word == name || (provider.NameRule{}).Sanitize(word) == name {
				return call(t, nil)
			}
		}
	}
	switch c := req.ToolChoice.(type) {
	case string:
		if c == "required" {
			return call(tools[0], nil)
		}
	case map[string]any:
		name, _ := c["function"].(map[string]any)["name"].(string)
		for _, t := range tools {
			if t.name == name {
				return call(t, nil)
			}
		}
	}
	return nil
}

// fakeContent reads a message's content: its text, and how many images it holds.
func fakeContent(raw json.RawMessage) (string, int) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, 0
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var texts []string
	images := 0
	for _, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image_url":
			images++
		}
	}
	return strings.Join(texts, "\n"), images
}

// fakeWords splits text into words, each keeping the spaces after it.
func fakeWords(text string) []string {
	var out []string
	start, inSpace := 0, false
	for i, r := range text {
		sp := unicode.IsSpace(r)
		if !sp && inSpace {
			out = append(out, text[start:i])
			start = i
		}
		inSpace = sp
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// fakeMinimal returns a small JSON value matching schema (see newFakeOpenAI, rule 3).
func fakeMinimal(schema map[string]any, depth int) any {
	if schema == nil || depth > 16 {
		return nil
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
				return fakeMinimal(s, depth+1)
			}
		}
	}
	num := func(k string) (float64, bool) { f, ok := schema[k].(float64); return f, ok }
	typ, _ := schema["type"].(string)
	if ts, ok := schema["type"].([]any); ok {
		for _, t := range ts {
			if s, _ := t.(string); s != "null" {
				typ = s
				break
			}
		}
	}
	if _, ok := schema["properties"]; ok && typ == "" {
		typ = "object"
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		req, _ := schema["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			p, _ := props[name].(map[string]any)
			obj[name] = fakeMinimal(p, depth+1)
		}
		return obj
	case "array":
		n, _ := num("minItems")
		items, _ := schema["items"].(map[string]any)
		arr := make([]any, int(n))
		for i := range arr {
			arr[i] = fakeMinimal(items, depth+1)
		}
		return arr
	case "string":
		switch schema["format"] {
		case "date-time":
			return "1970-01-01T00:00:00Z"
		case "date":
			return "1970-01-01"
		}
		n, _ := num("minLength")
		return strings.Repeat("a", int(n))
	case "integer", "number":
		if m, ok := num("minimum"); ok && m > 0 {
			if typ == "integer" {
				return int64(m + 0.999999)
			}
			return m
		}
		if m, ok := num("maximum"); ok && m < 0 {
			if typ == "integer" {
				return int64(m)
			}
			return m
		}
		return 0
	case "boolean":
		return false
	}
	return nil
}

// TestFakeServer drives the plugin against the fake server through the host: each rule
// of newFakeOpenAI, streamed and not.
func TestFakeServer(t *testing.T) {
	srv := newFakeOpenAI(t)
	r, _ := loadPlugin(t, srv.URL+"/v1", "fake-model,http-429")
	ctx := t.Context()
	gen := func(opts ...agent.GenerateOption) *abi.GenerateResponse {
		t.Helper()
		resp, err := agent.Generate(ctx, r, append([]agent.GenerateOption{agent.WithModelName("openai/fake-model")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	stream := func(opts ...agent.GenerateOption) (chunks int, final *abi.GenerateResponse) {
		t.Helper()
		for v, err := range agent.GenerateStream(ctx, r, append([]agent.GenerateOption{agent.WithModelName("openai/fake-model")}, opts...)...) {
			if err != nil {
				t.Fatal(err)
			}
			if v.Done {
				final = v.Response
			} else {
				chunks++
			}
		}
		return chunks, final
	}

	// Echo, with usage; the same request gets the same answer.
	resp := gen(agent.WithSystem("Be nice."), agent.WithPrompt("Hello there friend"))
	if resp.Text() != "echo: Hello there friend" || resp.FinishReason != abi.FinishStop || resp.Usage.InputTokens != 5 || resp.Usage.OutputTokens != 4 {
		t.Errorf("echo = %s", mustJSON(resp))
	}
	if again := gen(agent.WithSystem("Be nice."), agent.WithPrompt("Hello there friend")); mustJSON(again.Custom) != mustJSON(resp.Custom) {
		t.Errorf("not deterministic: %v then %v", resp.Custom, again.Custom)
	}
	n, final := stream(agent.WithPrompt("Count from one to five."))
	if n != 6 || final.Text() != "echo: Count from one to five." || final.Usage.TotalTokens != 11 {
		t.Errorf("streamed echo: %d chunks, %s", n, mustJSON(final))
	}

	// Images, reasoning, the token limit.
	resp = gen(agent.WithMessages(abi.NewUserMessage(abi.NewTextPart("What color?"), abi.NewMediaPart("image/png", "data:image/png;base64,iVBORw0KGgo="))))
	if resp.Text() != "echo: What color? [1 image]" {
		t.Errorf("image: %q", resp.Text())
	}
	resp = gen(agent.WithPrompt("Why?"), agent.WithConfig(map[string]any{"reasoning_effort": "low", "maxOutputTokens": 1}))
	if resp.Reasoning() != "Reasoning about: Why?" || resp.Text() != "echo:" || resp.FinishReason != abi.FinishLength {
		t.Errorf("reasoning and limit: %s", mustJSON(resp))
	}
	_, final = stream(agent.WithPrompt("Why?"), agent.WithConfig(map[string]any{"reasoning_effort": "low"}))
	if final.Reasoning() != "Reasoning about: Why?" || final.Text() != "echo: Why?" {
		t.Errorf("streamed reasoning: %s", mustJSON(final))
	}

	// Tools: "use <tool>" with the tool's own name, then the follow-up.
	var calls []addInput
	resp = gen(agent.WithPrompt("Please use math/add now."), agent.WithTools(addTool(&calls)))
	if resp.Text() != "Tool results: 0" || len(calls) != 1 || resp.Request.Messages[1].ToolRequests()[0].Ref != "call_fake_1" {
		t.Errorf("tool flow: %s, calls %v", mustJSON(resp), calls)
	}
	_, final = stream(agent.WithPrompt(`/call math/add {"a": 20, "b": 22}`), agent.WithTools(addTool(&calls)))
	if final.Text() != "Tool results: 42" || len(calls) != 2 || calls[1] != (addInput{20, 22}) {
		t.Errorf("streamed tool flow: %s, calls %v", mustJSON(final), calls)
	}
	resp = gen(agent.WithPrompt("What is the weather?"), agent.WithTools(addTool(&calls)), agent.WithToolChoice(abi.ToolChoiceRequired), agent.WithReturnToolRequests(true))
	if trs := resp.ToolRequests(); len(trs) != 1 || trs[0].Name != "math/add" || mustJSON(trs[0].Input) != `{"a":0,"b":0}` {
		t.Errorf("required tool: %s", mustJSON(resp.Message))
	}
	resp = gen(agent.WithPrompt("use math/add"), agent.WithTools(addTool(&calls)), agent.WithToolChoice(abi.ToolChoiceNone))
	if resp.Text() != "echo: use math/add" {
		t.Errorf("tool choice none: %q", resp.Text())
	}

	// JSON: a minimal instance of the schema, constrained natively or not.
	for _, constrained := range []bool{true, false} {
		out, resp, err := agent.GenerateData[forecast](ctx, r, agent.WithModelName("openai/fake-model"), agent.WithPrompt("Weather?"), agent.WithConstrained(constrained))
		if err != nil || *out != (forecast{}) || resp.Request.Output.Constrained != constrained {
			t.Errorf("json (constrained %v): %v %v", constrained, out, err)
		}
	}

	// An error on demand.
	_, err := agent.Generate(ctx, r, agent.WithModelName("openai/http-429"), agent.WithPrompt("hi"))
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Code != abi.CodeLimitExceeded || ae.Status != 429 || ae.RetryAfter != 0.01 {
		t.Errorf("http-429: %v", err)
	}
}
