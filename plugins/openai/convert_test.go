package main

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// jsonEqual compares two values by their JSON.
func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var gv, wv any
	if err := json.Unmarshal(g, &gv); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &wv); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(gv, wv) {
		t.Errorf("%s =\n%s\nwant\n%s", what, g, want)
	}
}

func TestBuildRequest(t *testing.T) {
	req := &abi.GenerateRequest{
		Messages: []*abi.Message{
			abi.NewSystemTextMessage("Be brief."),
			abi.NewUserMessage(abi.NewTextPart("What is in this picture? Then add 2 and 3."),
				abi.NewMediaPart("image/png", "data:image/png;base64,iVBORw0KGgo="),
				abi.NewMediaPart("", "https://example.com/cat.jpg")),
			abi.NewModelMessage(abi.NewReasoningPart("thinking..."), abi.NewTextPart("A cat. "),
				abi.NewToolRequestPart(&abi.ToolRequest{Ref: "call_a", Name: "calculator/calc", Input: map[string]any{"expression": "2+3"}}),
				abi.NewToolRequestPart(&abi.ToolRequest{Name: "echo", Input: "hi"})),
			abi.NewToolMessage(
				&abi.ToolResponse{Ref: "call_a", Name: "calculator/calc", Output: map[string]any{"value": 5}},
				&abi.ToolResponse{Name: "echo", Output: "hi", Content: []*abi.Part{abi.NewMediaPart("image/jpeg", "https://example.com/echo.jpg")}}),
			abi.NewUserTextMessage("Thanks"),
		},
		Tools: []*abi.ToolDefinition{
			{Name: "calculator/calc", Description: "Evaluates.", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}}},
			{Name: "echo", Description: "Echoes a string.", InputSchema: map[string]any{"type": "string"}},
			{Name: "now"},
		},
		ToolChoice: abi.ToolChoiceRequired,
		Config: map[string]any{
			"temperature": 0.2, "topP": 0.9, "topK": 40.0, "maxOutputTokens": 100.0, "stopSequences": []any{"END"},
			"seed": 7.0, "parallel_tool_calls": false, "messages": "ignored", "stream": true,
			"tools": []any{map[string]any{"type": "web_search"}},
		},
		Output: &abi.OutputConfig{Format: "json", Schema: map[string]any{"type": "object"}, Constrained: true},
	}
	body, names, err := buildRequest("gpt-4o", req, true)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "body", body, `{
		"model": "gpt-4o",
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": [
				{"type": "text", "text": "What is in this picture? Then add 2 and 3."},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
				{"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]},
			{"role": "assistant", "content": "A cat. ", "tool_calls": [
				{"id": "call_a", "type": "function", "function": {"name": "calculator__calc", "arguments": "{\"expression\":\"2+3\"}"}},
				{"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": "{\"input\":\"hi\"}"}}]},
			{"role": "tool", "tool_call_id": "call_a", "content": "{\"value\":5}"},
			{"role": "tool", "tool_call_id": "call_1", "content": "hi"},
			{"role": "user", "content": [
				{"type": "text", "text": "The tools returned these files:"},
				{"type": "image_url", "image_url": {"url": "https://example.com/echo.jpg"}}]},
			{"role": "user", "content": "Thanks"}
		],
		"tools": [
			{"type": "function", "function": {"name": "calculator__calc", "description": "Evaluates.",
				"parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}},
			{"type": "function", "function": {"name": "echo", "description": "Echoes a string.",
				"parameters": {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}}},
			{"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}},
			{"type": "web_search"}
		],
		"tool_choice": "required",
		"temperature": 0.2, "top_p": 0.9, "top_k": 40, "max_tokens": 100, "stop": ["END"],
		"seed": 7, "parallel_tool_calls": false,
		"response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": {"type": "object"}, "strict": false}},
		"stream": true, "stream_options": {"include_usage": true}
	}`)
	if names.Original("calculator__calc") != "calculator/calc" || !names.wrapped["echo"] {
		t.Errorf("names = %+v", names)
	}
}

func TestBuildRequestVariants(t *testing.T) {
	user := []*abi.Message{abi.NewUserTextMessage("hi")}
	for _, tc := range []struct {
		name  string
		model string
		req   *abi.GenerateRequest
		want  string // a subset of the body's keys
	}{
		{"plain", "m", &abi.GenerateRequest{Messages: user},
			`{"model": "m", "messages": [{"role": "user", "content": "hi"}]}`},
		{"json without constraint", "m", &abi.GenerateRequest{Messages: user, Output: &abi.OutputConfig{Format: "json", Schema: map[string]any{"type": "object"}}}, ""},
		{"version and max_completion_tokens", "m", &abi.GenerateRequest{Messages: user, Config: map[string]any{"version": "gpt-4.1", "maxOutputTokens": 5.0, "maxTokensField": "max_completion_tokens"}},
			`{"model": "gpt-4.1", "max_completion_tokens": 5}`},
		{"reasoning model", "o3-mini", &abi.GenerateRequest{Messages: user, Config: map[string]any{"maxOutputTokens": 5.0}},
			`{"model": "o3-mini", "max_completion_tokens": 5}`},
		{"tool choice without tools", "m", &abi.GenerateRequest{Messages: user, ToolChoice: abi.ToolChoiceNone},
			`{"model": "m"}`},
		{"passthrough overrides", "m", &abi.GenerateRequest{Messages: user, Output: &abi.OutputConfig{Format: "json"},
			Config: map[string]any{"response_format": map[string]any{"type": "text"}, "reasoning_effort": "low", "temperature": nil}},
			`{"response_format": {"type": "text"}, "reasoning_effort": "low"}`},
		{"struct config", "m", &abi.GenerateRequest{Messages: user, Config: struct {
			Temperature float64 `json:"temperature"`
		}{0.5}}, `{"temperature": 0.5}`},
		{"model message with only tool calls", "m", &abi.GenerateRequest{Messages: []*abi.Message{
			abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Ref: "c1", Name: "t"})),
			abi.NewToolMessage(&abi.ToolResponse{Name: "t"}),
		}}, `{"messages": [
			{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
			{"role": "tool", "tool_call_id": "c1", "content": "null"}]}`},
		{"audio and pdf", "m", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserMessage(
			abi.NewMediaPart("", "data:audio/mpeg;base64,SUQz"),
			abi.NewMediaPart("audio/wav", "data:audio/wav,abc"),
			abi.NewMediaPart("application/pdf", "data:application/pdf;base64,JVBERi0="),
			abi.NewDataPart(map[string]any{"k": "v"}))}},
			`{"messages": [{"role": "user", "content": [
				{"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
				{"type": "input_audio", "input_audio": {"data": "YWJj", "format": "wav"}},
				{"type": "file", "file": {"filename": "file.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
				{"type": "text", "text": "{\"k\":\"v\"}"}]}]}`},
	} {
		body, _, err := buildRequest(tc.model, tc.req, false)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if _, ok := body["stream"]; ok {
			t.Errorf("%s: stream set", tc.name)
		}
		if tc.want == "" {
			jsonEqual(t, tc.name, body["response_format"], `{"type": "json_object"}`)
			continue
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
			t.Fatal(err)
		}
		for k := range want {
			w, _ := json.Marshal(want[k])
			jsonEqual(t, tc.name+": "+k, body[k], string(w))
		}
		if tc.name == "tool choice without tools" {
			if _, ok := body["tool_choice"]; ok {
				t.Errorf("tool_choice sent without tools")
			}
		}
		if tc.name == "passthrough overrides" {
			if _, ok := body["temperature"]; ok {
				t.Errorf("a null temperature was sent")
			}
		}
	}
}

func TestBuildRequestErrors(t *testing.T) {
	for name, req := range map[string]*abi.GenerateRequest{
		"config not an object": {Config: "hot"},
		"config tools":         {Config: map[string]any{"tools": "x"}},
		"tool choice":          {Tools: []*abi.ToolDefinition{{Name: "t"}}, ToolChoice: "sometimes"},
		"max tokens field":     {Config: map[string]any{"maxOutputTokens": 1.0, "maxTokensField": "tokens"}},
		"unanswerable":         {Messages: []*abi.Message{abi.NewToolMessage(&abi.ToolResponse{Name: "t"})}},
		"bad data URI":         {Messages: []*abi.Message{abi.NewUserMessage(abi.NewMediaPart("image/png", "data:image/png;base64,!!!"))}},
	} {
		_, _, err := buildRequest("m", req, false)
		var ae *abi.Error
		if !errors.As(err, &ae) || ae.Code != abi.CodeInvalidInput {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

var testCall = &callInfo{Settings: provider.Settings{BaseURL: "http://x/v1", KeySecret: "OPENAI_API_KEY"}, model: "gpt-4o", url: "http://x/v1/chat/completions"}

func TestHTTPError(t *testing.T) {
	for _, tc := range []struct {
		status int
		header map[string]string
		body   string
		code   abi.ErrorCode
		retry  float64
		msg    []string
	}{
		{401, nil, `{"error": {"message": "Incorrect API key provided: sk-te***st.", "type": "invalid_request_error", "code": "invalid_api_key"}}`,
			abi.CodePermissionDenied, 0, []string{"Incorrect API key provided", "invalid_api_key", "OPENAI_API_KEY"}},
		{403, nil, `{"error": "forbidden"}`, abi.CodePermissionDenied, 0, []string{"forbidden"}},
		{404, nil, `{"error": {"message": "The model ` + "`gpt-4o`" + ` does not exist or you do not have access to it.", "code": "model_not_found"}}`,
			abi.CodeNotFound, 0, []string{`model "gpt-4o" not found`, "does not exist"}},
		{404, nil, `{"error": "model 'gpt-4o' not found, try pulling it first"}`, abi.CodeNotFound, 0, []string{`model "gpt-4o" not found`, "try pulling"}},
		{404, nil, `404 page not found`, abi.CodeNotFound, 0, []string{"check the config baseURL", "404 page not found"}},
		{429, map[string]string{"retry-after": "7"}, `{"error": {"message": "Rate limit reached", "type": "requests"}}`, abi.CodeLimitExceeded, 7, []string{"rate limited", "Rate limit reached"}},
		{429, map[string]string{"retry-after-ms": "1500", "retry-after": "9"}, `{}`, abi.CodeLimitExceeded, 1.5, nil},
		{429, nil, `{"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}`,
			abi.CodePermissionDenied, 0, []string{"quota is used up", "check your plan"}},
		{402, nil, `{"error": {"message": "Insufficient credits", "code": 402}}`, abi.CodePermissionDenied, 0, []string{"wants payment", "Insufficient credits"}},
		{409, nil, `conflict`, abi.CodeUnavailable, 0, nil},
		{418, nil, `teapot`, abi.CodeInvalidInput, 0, []string{"rejected the request", "teapot"}},
		{400, nil, `{"error": {"message": "Invalid value for 'temperature'", "param": "temperature"}}`, abi.CodeInvalidInput, 0, []string{"Invalid value"}},
		{422, nil, `{"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}`, abi.CodeInvalidInput, 0, []string{"field required"}},
		{413, nil, `too big`, abi.CodeLimitExceeded, 0, nil},
		{500, nil, `{"message": "internal"}`, abi.CodeUnavailable, 0, []string{"internal"}},
		{503, map[string]string{"retry-after": "2"}, `<html>Service Unavailable</html>`, abi.CodeUnavailable, 2, []string{"Service Unavailable"}},
	} {
		e := httpError(tc.status, tc.header, []byte(tc.body), testCall)
		if e.Code != tc.code || e.Status != tc.status || e.RetryAfter != tc.retry {
			t.Errorf("%d %s: %+v", tc.status, tc.body, e)
		}
		for _, m := range tc.msg {
			if !strings.Contains(e.Message, m) {
				t.Errorf("%d: message %q lacks %q", tc.status, e.Message, m)
			}
		}
	}
	noKey := *testCall
	noKey.KeySecret = ""
	if e := httpError(401, nil, nil, &noKey); !strings.Contains(e.Message, "no API key was sent") {
		t.Errorf("401 without key: %v", e)
	}
}

func TestParseResponse(t *testing.T) {
	names := newToolNames()
	names.API("calculator/calc")
	names.API("echo")
	names.wrapped["echo"] = true
	body := `{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_1",
		"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Let me compute.",
			"reasoning_content": "2+3 needs the calculator",
			"tool_calls": [
				{"id": "call_x", "type": "function", "function": {"name": "calculator__calc", "arguments": "{\"expression\":\"2+3\"}"}},
				{"id": "call_y", "type": "function", "function": {"name": "echo", "arguments": {"input": "hi"}}},
				{"type": "function", "function": {"name": "web_search", "arguments": ""}}]}}],
		"usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
			"prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 3}}
	}`
	resp, err := parseResponse([]byte(body), names, testCall)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "response", resp, `{
		"message": {"role": "model", "content": [
			{"reasoning": "2+3 needs the calculator"},
			{"text": "Let me compute."},
			{"toolRequest": {"ref": "call_x", "name": "calculator/calc", "input": {"expression": "2+3"}}},
			{"toolRequest": {"ref": "call_y", "name": "echo", "input": "hi"}},
			{"toolRequest": {"ref": "call_2", "name": "web_search"}}]},
		"finishReason": "stop",
		"usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15, "cachedContentTokens": 4, "thoughtsTokens": 3},
		"custom": {"id": "chatcmpl-1", "model": "gpt-4o-2024-08-06", "systemFingerprint": "fp_1"}
	}`)

	for reason, want := range map[string]abi.FinishReason{"stop": abi.FinishStop, "length": abi.FinishLength, "content_filter": abi.FinishBlocked, "eos": abi.FinishOther} {
		resp, err := parseResponse([]byte(`{"choices": [{"index": 0, "finish_reason": "`+reason+`", "message": {"role": "assistant", "content": [{"type": "text", "text": "x"}], "reasoning": "r"}}]}`), names, testCall)
		if err != nil || resp.FinishReason != want || resp.Text() != "x" || resp.Reasoning() != "r" {
			t.Errorf("%s: %+v %v", reason, resp, err)
		}
	}
	resp, err = parseResponse([]byte(`{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}}]}`), names, testCall)
	if err != nil || resp.FinishReason != abi.FinishBlocked || !strings.Contains(resp.FinishMessage, "can't help") || resp.Message == nil {
		t.Errorf("refusal: %+v %v", resp, err)
	}
	for name, body := range map[string]string{
		"not JSON":   `<html>`,
		"no choices": `{"choices": []}`,
		"error":      `{"error": {"message": "upstream failed", "code": 502}}`,
	} {
		_, err := parseResponse([]byte(body), names, testCall)
		var ae *abi.Error
		if !errors.As(err, &ae) || ae.Code != abi.CodeUnavailable {
			t.Errorf("%s: %v", name, err)
		}
		if name == "error" && (ae.Status != 502 || !strings.Contains(ae.Message, "upstream failed")) {
			t.Errorf("error in body: %+v", ae)
		}
	}
}

// sseBody writes events as a server sends them.
func sseBody(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

func TestReadStream(t *testing.T) {
	names := newToolNames()
	names.API("calculator/calc")
	stream := sseBody(
		`{"id":"chatcmpl-2","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"reasoning":"Think"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"reasoning":"ing."},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"content":"Sure"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"content":", computing."},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"calculator__calc","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"expr"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ession\": \"6*"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"calculator__calc","arguments":"{\"expression\":"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"7\"}"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":" \"1+1\"}"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-2","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}}`,
		`[DONE]`,
	)
	var chunks []string
	resp, err := readStream(strings.NewReader(stream), names, testCall, func(c *abi.GenerateResponseChunk) error {
		b, _ := json.Marshal(c.Content)
		chunks = append(chunks, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`[{"reasoning":"Think"}]`,
		`[{"reasoning":"ing."}]`,
		`[{"text":"Sure"}]`,
		`[{"text":", computing."}]`,
		`[{"toolRequest":{"ref":"call_a","name":"calculator/calc","partial":true}}]`,
		`[{"toolRequest":{"ref":"call_a","name":"calculator/calc","input":{},"partial":true}}]`,
		`[{"toolRequest":{"ref":"call_a","name":"calculator/calc","input":{"expression":"6*"},"partial":true}}]`,
		`[{"toolRequest":{"ref":"call_b","name":"calculator/calc","input":{},"partial":true}}]`,
		`[{"toolRequest":{"ref":"call_a","name":"calculator/calc","input":{"expression":"6*7"},"partial":true}}]`,
		`[{"toolRequest":{"ref":"call_b","name":"calculator/calc","input":{"expression":"1+1"},"partial":true}}]`,
		`[{"toolRequest":{"ref":"call_a","name":"calculator/calc","input":{"expression":"6*7"}}},{"toolRequest":{"ref":"call_b","name":"calculator/calc","input":{"expression":"1+1"}}}]`,
	}
	if !reflect.DeepEqual(chunks, want) {
		t.Errorf("chunks:\n%s\nwant\n%s", strings.Join(chunks, "\n"), strings.Join(want, "\n"))
	}
	jsonEqual(t, "response", resp, `{
		"message": {"role": "model", "content": [
			{"reasoning": "Thinking."},
			{"text": "Sure, computing."},
			{"toolRequest": {"ref": "call_a", "name": "calculator/calc", "input": {"expression": "6*7"}}},
			{"toolRequest": {"ref": "call_b", "name": "calculator/calc", "input": {"expression": "1+1"}}}]},
		"finishReason": "stop",
		"usage": {"inputTokens": 3, "outputTokens": 9, "totalTokens": 12},
		"custom": {"id": "chatcmpl-2", "model": "gpt-4o"}
	}`)

	// Ollama-style: whole tool calls in one delta, without an index; reasoning_content.
	resp, err = readStream(strings.NewReader(sseBody(
		`{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"name":"calculator__calc","arguments":"{\"expression\":\"1\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c2","function":{"name":"calculator__calc","arguments":"{\"expression\":\"2\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	)), names, testCall, nil)
	if err != nil {
		t.Fatal(err)
	}
	if trs := resp.ToolRequests(); len(trs) != 2 || trs[0].Ref != "c1" || trs[1].Input.(map[string]any)["expression"] != "2" || resp.Reasoning() != "hm" {
		t.Errorf("ollama stream: %+v", resp.Message.Content)
	}

	// A stream cut off before its end, and an error inside the stream.
	for name, body := range map[string]string{
		"cut off": sseBody(`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`),
		"error":   sseBody(`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`, `{"error":{"message":"Provider disconnected","code":502},"choices":[{"index":0,"delta":{},"finish_reason":"error"}]}`),
		"garbage": sseBody(`{"choices":`),
	} {
		_, err := readStream(strings.NewReader(body), names, testCall, nil)
		var ae *abi.Error
		if !errors.As(err, &ae) || ae.Code != abi.CodeUnavailable {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The consumer stopping stops the stream.
	stop := errors.New("stop")
	_, err = readStream(strings.NewReader(stream), names, testCall, func(*abi.GenerateResponseChunk) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("stopped consumer: %v", err)
	}
}
