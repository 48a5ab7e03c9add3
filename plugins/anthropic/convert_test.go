package main

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// jsonOf encodes v for comparisons.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canon encodes v with object keys sorted, as generic JSON.
func canon(t *testing.T, v any) string {
	t.Helper()
	var g any
	if err := json.Unmarshal([]byte(jsonOf(t, v)), &g); err != nil {
		t.Fatal(err)
	}
	return jsonOf(t, g)
}

// roundTrip decodes v's JSON into generic values, as the API would see it.
func roundTrip(t *testing.T, v any) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(jsonOf(t, v)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuildRequestSystemConfigAndAlternation(t *testing.T) {
	req := &abi.GenerateRequest{
		Messages: []*abi.Message{
			abi.NewSystemTextMessage("Be brief."),
			abi.NewUserTextMessage("first"),
			abi.NewUserTextMessage("second"),
			abi.NewSystemTextMessage("Answer in French."),
			abi.NewModelTextMessage("premier"),
			abi.NewModelMessage(abi.NewTextPart(""), abi.NewReasoningPart("unsigned thoughts")),
			abi.NewUserTextMessage("third"),
		},
		Config: map[string]any{
			"temperature": 0.2, "topP": 0.9, "topK": 40.0, "maxOutputTokens": 100.0,
			"stopSequences": []any{"END"}, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024.0},
			"metadata": map[string]any{"user_id": "u1"}, "apiKey": "never sent", "stream": true,
		},
	}
	body, _, err := buildRequest("claude-x", req, false)
	if err != nil {
		t.Fatal(err)
	}
	got := roundTrip(t, body)
	want := map[string]any{
		"model":          "claude-x",
		"system":         "Be brief.\n\nAnswer in French.",
		"temperature":    0.2,
		"top_p":          0.9,
		"top_k":          40.0,
		"max_tokens":     100.0,
		"stop_sequences": []any{"END"},
		"thinking":       map[string]any{"type": "enabled", "budget_tokens": 1024.0},
		"metadata":       map[string]any{"user_id": "u1"},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "first"},
				map[string]any{"type": "text", "text": "second"},
			}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "premier"}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "third"}}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("body =\n%s\nwant\n%s", jsonOf(t, got), jsonOf(t, want))
	}

	// Defaults: max_tokens 4096, stream when asked, no system field without system text;
	// a snake_case key given directly wins over the default; version renames the model.
	body, _, _ = buildRequest("claude-x", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("hi")}}, true)
	if body["max_tokens"] != defaultMaxTokens || body["stream"] != true || body["system"] != nil {
		t.Errorf("defaults: %s", jsonOf(t, body))
	}
	body, _, _ = buildRequest("claude-x", &abi.GenerateRequest{
		Messages: []*abi.Message{abi.NewUserTextMessage("hi")},
		Config:   map[string]any{"max_tokens": 7.0, "version": "claude-y"},
	}, false)
	if body["max_tokens"] != 7.0 || body["model"] != "claude-y" || body["version"] != nil {
		t.Errorf("snake_case and version: %s", jsonOf(t, body))
	}
	// A typed config goes through its JSON.
	type cfg struct {
		Temperature float64 `json:"temperature"`
		Custom      string  `json:"service_tier"`
	}
	body, _, err = buildRequest("m", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("hi")}, Config: cfg{0.5, "auto"}}, false)
	if err != nil || body["temperature"] != 0.5 || body["service_tier"] != "auto" {
		t.Errorf("typed config: %v %s", err, jsonOf(t, body))
	}
	if _, _, err := buildRequest("m", &abi.GenerateRequest{Config: []int{1}}, false); !isCode(err, abi.CodeInvalidInput) {
		t.Errorf("config array: %v", err)
	}
	// A cache_control on a system part turns the field into blocks.
	sys := abi.NewSystemTextMessage("cached")
	sys.Content[0].Metadata = map[string]any{"cache_control": map[string]any{"type": "ephemeral"}}
	body, _, _ = buildRequest("m", &abi.GenerateRequest{Messages: []*abi.Message{sys, abi.NewUserTextMessage("x")}}, false)
	if s := jsonOf(t, body["system"]); s != `[{"cache_control":{"type":"ephemeral"},"text":"cached","type":"text"}]` {
		t.Errorf("cached system = %s", s)
	}
}

func isCode(err error, code abi.ErrorCode) bool {
	var e *abi.Error
	return errors.As(err, &e) && e.Code == code
}

func TestBuildRequestTools(t *testing.T) {
	req := &abi.GenerateRequest{
		Messages: []*abi.Message{
			abi.NewUserTextMessage("2+3 and the time?"),
			abi.NewModelMessage(
				abi.NewTextPart("Let me see. "),
				abi.NewToolRequestPart(&abi.ToolRequest{Ref: "toolu_1", Name: "calculator/calc", Input: map[string]any{"expression": "2+3"}}),
				abi.NewToolRequestPart(&abi.ToolRequest{Name: "clock.now"}),
			),
			abi.NewMessage(abi.RoleTool,
				abi.NewToolResponsePart(&abi.ToolResponse{Ref: "toolu_1", Name: "calculator/calc", Output: map[string]any{"value": 5.0}}),
				&abi.Part{Kind: abi.PartToolResponse, ToolResponse: &abi.ToolResponse{Name: "clock.now", Output: "no clock",
					Content: []*abi.Part{abi.NewMediaPart("image/png", "data:image/png;base64,iVBORw0=")}}, Metadata: map[string]any{"isError": true}},
			),
			abi.NewUserTextMessage("thanks"),
		},
		Tools: []*abi.ToolDefinition{
			{Name: "calculator/calc", Description: "Evaluates.", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}}},
			{Name: "clock.now"},
		},
		ToolChoice: abi.ToolChoiceRequired,
		Config:     map[string]any{"tools": []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}}},
	}
	body, names, err := buildRequest("m", req, false)
	if err != nil {
		t.Fatal(err)
	}
	got := roundTrip(t, body)
	wantTools := `[{"description":"Evaluates.","input_schema":{"properties":{"expression":{"type":"string"}},"type":"object"},"name":"calculator__calc"},` +
		`{"input_schema":{"type":"object"},"name":"clock_now"},{"name":"web_search","type":"web_search_20250305"}]`
	if s := jsonOf(t, got["tools"]); s != wantTools {
		t.Errorf("tools = %s\nwant    %s", s, wantTools)
	}
	if s := jsonOf(t, got["tool_choice"]); s != `{"type":"any"}` {
		t.Errorf("tool_choice = %s", s)
	}
	wantMsgs := `[{"content":[{"text":"2+3 and the time?","type":"text"}],"role":"user"},` +
		`{"content":[{"text":"Let me see. ","type":"text"},{"id":"toolu_1","input":{"expression":"2+3"},"name":"calculator__calc","type":"tool_use"},` +
		`{"id":"toolu_terrarium_1_2","input":{},"name":"clock_now","type":"tool_use"}],"role":"assistant"},` +
		`{"content":[{"content":[{"text":"{\"value\":5}","type":"text"}],"tool_use_id":"toolu_1","type":"tool_result"},` +
		`{"content":[{"text":"no clock","type":"text"},{"source":{"data":"iVBORw0=","media_type":"image/png","type":"base64"},"type":"image"}],"is_error":true,"tool_use_id":"toolu_terrarium_1_2","type":"tool_result"},` +
		`{"text":"thanks","type":"text"}],"role":"user"}]`
	if s := jsonOf(t, got["messages"]); s != wantMsgs {
		t.Errorf("messages =\n%s\nwant\n%s", s, wantMsgs)
	}
	if names.Original("calculator__calc") != "calculator/calc" || names.Original("clock_now") != "clock.now" || names.Original("other") != "other" {
		t.Errorf("names = %+v", names)
	}
	// Tool choices, and none without tools.
	for choice, want := range map[abi.ToolChoice]string{abi.ToolChoiceAuto: `{"type":"auto"}`, abi.ToolChoiceNone: `{"type":"none"}`, "": "null"} {
		body, _, _ := buildRequest("m", &abi.GenerateRequest{Tools: req.Tools[:1], ToolChoice: choice}, false)
		if s := jsonOf(t, body["tool_choice"]); s != want {
			t.Errorf("toolChoice %q = %s", choice, s)
		}
	}
	body, _, _ = buildRequest("m", &abi.GenerateRequest{ToolChoice: abi.ToolChoiceRequired}, false)
	if _, ok := body["tool_choice"]; ok {
		t.Errorf("tool_choice without tools: %s", jsonOf(t, body))
	}
	if _, _, err := buildRequest("m", &abi.GenerateRequest{Config: map[string]any{"tools": "x"}}, false); !isCode(err, abi.CodeInvalidInput) {
		t.Errorf("config.tools not an array: %v", err)
	}
}

func TestMediaBlocks(t *testing.T) {
	for _, tc := range []struct {
		media *abi.Media
		want  string
	}{
		{&abi.Media{URL: "data:image/jpeg;base64,/9j/4AAQ", ContentType: "image/jpeg"}, `{"source":{"data":"/9j/4AAQ","media_type":"image/jpeg","type":"base64"},"type":"image"}`},
		{&abi.Media{URL: "data:image/png;base64,iVBORw0"}, `{"source":{"data":"iVBORw0=","media_type":"image/png","type":"base64"},"type":"image"}`},
		{&abi.Media{URL: "https://example.com/cat.png", ContentType: "image/png"}, `{"source":{"type":"url","url":"https://example.com/cat.png"},"type":"image"}`},
		{&abi.Media{URL: "https://example.com/cat"}, `{"source":{"type":"url","url":"https://example.com/cat"},"type":"image"}`},
		{&abi.Media{URL: "https://example.com/paper.pdf"}, `{"source":{"type":"url","url":"https://example.com/paper.pdf"},"type":"document"}`},
		{&abi.Media{URL: "data:application/pdf;base64,JVBERi0="}, `{"source":{"data":"JVBERi0=","media_type":"application/pdf","type":"base64"},"type":"document"}`},
		{&abi.Media{URL: "data:text/plain,hello%20world"}, `{"source":{"data":"hello world","media_type":"text/plain","type":"text"},"type":"document"}`},
		{&abi.Media{URL: "data:image/svg+xml,%3Csvg%3E"}, `{"source":{"data":"PHN2Zz4=","media_type":"image/svg+xml","type":"base64"},"type":"image"}`},
	} {
		b, err := mediaBlock(tc.media)
		if err != nil || jsonOf(t, b) != tc.want {
			t.Errorf("%s: %s (%v)\nwant %s", tc.media.URL, jsonOf(t, b), err, tc.want)
		}
	}
	for _, m := range []*abi.Media{{URL: "data:audio/wav;base64,AAAA"}, {URL: "data:image/png;base64,@@@"}, {URL: "data:nocomma"}, {URL: ""}} {
		if _, err := mediaBlock(m); !isCode(err, abi.CodeInvalidInput) {
			t.Errorf("%q: %v, want invalid_input", m.URL, err)
		}
	}
}

func TestReasoningAndCustomRoundTrip(t *testing.T) {
	signed := abi.NewReasoningPart("I should add.")
	signed.Metadata = map[string]any{"signature": "sig-1"}
	redacted := abi.NewCustomPart(map[string]any{"anthropic": map[string]any{"type": "redacted_thinking", "data": "opaque"}})
	foreign := abi.NewCustomPart(map[string]any{"executableCode": map[string]any{"code": "print(1)"}})
	body, _, err := buildRequest("m", &abi.GenerateRequest{Messages: []*abi.Message{
		abi.NewUserTextMessage("q"),
		abi.NewModelMessage(signed, redacted, foreign, abi.NewTextPart("answer  \n")),
	}}, false)
	if err != nil {
		t.Fatal(err)
	}
	// The last assistant message is a prefill: trailing white space is trimmed.
	want := `[{"content":[{"text":"q","type":"text"}],"role":"user"},{"content":[{"signature":"sig-1","thinking":"I should add.","type":"thinking"},` +
		`{"data":"opaque","type":"redacted_thinking"},{"text":"answer","type":"text"}],"role":"assistant"}]`
	if s := canon(t, body["messages"]); s != want {
		t.Errorf("messages =\n%s\nwant\n%s", s, want)
	}
	if _, _, err := buildRequest("m", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserMessage(abi.NewResourcePart("file:///x"))}}, false); !isCode(err, abi.CodeInvalidInput) {
		t.Errorf("resource part: %v", err)
	}
}

func TestParseResponse(t *testing.T) {
	names := provider.NewToolNames(nameRule)
	names.API("calculator/calc")
	body := `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5",
	"content":[
	  {"type":"thinking","thinking":"Add them.","signature":"EqQB"},
	  {"type":"redacted_thinking","data":"xyz"},
	  {"type":"text","text":"Using the calculator.","citations":[{"type":"char_location","cited_text":"x"}]},
	  {"type":"tool_use","id":"toolu_01","name":"calculator__calc","input":{"expression":"2+3"}},
	  {"type":"text","text":""}
	],
	"stop_reason":"tool_use","stop_sequence":null,
	"usage":{"input_tokens":20,"output_tokens":10,"cache_read_input_tokens":5,"cache_creation_input_tokens":2}}`
	resp, err := parseResponse([]byte(body), names)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"model","content":[{"reasoning":"Add them.","metadata":{"signature":"EqQB"}},` +
		`{"custom":{"anthropic":{"data":"xyz","type":"redacted_thinking"}}},` +
		`{"text":"Using the calculator.","metadata":{"citations":[{"cited_text":"x","type":"char_location"}]}},` +
		`{"toolRequest":{"ref":"toolu_01","name":"calculator/calc","input":{"expression":"2+3"}}}]}`
	if s := jsonOf(t, resp.Message); s != want {
		t.Errorf("message =\n%s\nwant\n%s", s, want)
	}
	if resp.FinishReason != abi.FinishStop || resp.Usage.InputTokens != 20 || resp.Usage.OutputTokens != 10 || resp.Usage.TotalTokens != 30 ||
		resp.Usage.CachedContentTokens != 5 || resp.Usage.Custom["cacheCreationInputTokens"] != 2 {
		t.Errorf("finish %s, usage %+v", resp.FinishReason, resp.Usage)
	}
	if c := resp.Custom.(map[string]any); c["id"] != "msg_01" || c["model"] != "claude-sonnet-4-5" {
		t.Errorf("custom = %v", c)
	}
	// What the response says goes back in the next request unchanged.
	next, _, err := buildRequest("m", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("q"), resp.Message}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if s := jsonOf(t, next["messages"].([]*apiMessage)[1].Content[:2]); s != `[{"signature":"EqQB","thinking":"Add them.","type":"thinking"},{"data":"xyz","type":"redacted_thinking"}]` {
		t.Errorf("sent back: %s", s)
	}
	for _, bad := range []string{`not json`, `{"content":[1]}`, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`} {
		if _, err := parseResponse([]byte(bad), names); !isCode(err, abi.CodeUnavailable) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestFinishReasons(t *testing.T) {
	for stop, want := range map[string]abi.FinishReason{
		"end_turn": abi.FinishStop, "stop_sequence": abi.FinishStop, "tool_use": abi.FinishStop,
		"max_tokens": abi.FinishLength, "model_context_window_exceeded": abi.FinishLength,
		"refusal": abi.FinishBlocked, "pause_turn": abi.FinishOther, "": abi.FinishUnknown, "new_reason": abi.FinishUnknown,
	} {
		if got, _ := finishReason(stop, "END"); got != want {
			t.Errorf("%q: %s, want %s", stop, got, want)
		}
	}
	if _, msg := finishReason("stop_sequence", "END"); msg != `stop sequence "END"` {
		t.Errorf("stop_sequence message %q", msg)
	}
}

func TestAPIErrors(t *testing.T) {
	body := func(typ, msg string) []byte {
		return []byte(`{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_1"}`)
	}
	for _, tc := range []struct {
		status     int
		header     map[string]string
		body       []byte
		code       abi.ErrorCode
		msg        string
		retryAfter float64
	}{
		{400, nil, body("invalid_request_error", "messages: roles must alternate"), abi.CodeInvalidInput, "anthropic: invalid_request_error: messages: roles must alternate", 0},
		{401, nil, body("authentication_error", "invalid x-api-key"), abi.CodePermissionDenied, "anthropic: authentication_error: invalid x-api-key", 0},
		{403, nil, body("permission_error", "no"), abi.CodePermissionDenied, "anthropic: permission_error: no", 0},
		{404, nil, body("not_found_error", "model: claude-nope"), abi.CodeNotFound, "anthropic: not_found_error: model: claude-nope", 0},
		{413, nil, body("request_too_large", "too big"), abi.CodeLimitExceeded, "anthropic: request_too_large: too big", 0},
		{429, map[string]string{"retry-after": "7"}, body("rate_limit_error", "slow down"), abi.CodeLimitExceeded, "anthropic: rate_limit_error: slow down", 7},
		{429, map[string]string{"retry-after": "yesterday"}, body("rate_limit_error", "slow down"), abi.CodeLimitExceeded, "anthropic: rate_limit_error: slow down", 0},
		{500, nil, body("api_error", "boom"), abi.CodeUnavailable, "anthropic: api_error: boom", 0},
		{502, nil, []byte("<html>Bad Gateway</html>"), abi.CodeUnavailable, "anthropic: <html>Bad Gateway</html>", 0},
		{503, map[string]string{"retry-after": "1.5"}, nil, abi.CodeUnavailable, "anthropic: HTTP status 503", 1.5},
		{529, nil, body("overloaded_error", "Overloaded"), abi.CodeUnavailable, "anthropic: overloaded_error: Overloaded", 0},
		{418, nil, nil, abi.CodeInvalidInput, "anthropic: HTTP status 418", 0},
	} {
		e := apiError(tc.status, tc.header, tc.body)
		if e.Code != tc.code || e.Status != tc.status || e.Message != tc.msg || e.RetryAfter != tc.retryAfter {
			t.Errorf("%d: %+v\nwant code %s, message %q, retryAfter %v", tc.status, e, tc.code, tc.msg, tc.retryAfter)
		}
	}
}
