package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

// jsonOf encodes v for comparisons, failing the test on error.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

func TestModelNames(t *testing.T) {
	got := modelNames([]string{"gemini-2.5-flash", "models/gemini-3-pro-preview", "models/gemini-2.5-flash"})
	if !slices.Equal(got, []string{"gemini-2.5-flash", "gemini-3-pro-preview"}) {
		t.Errorf("modelNames = %q", got)
	}
	if got := modelNames(defaults.Models); !slices.Equal(got, []string{"gemini-2.5-flash", "gemini-2.5-pro"}) {
		t.Errorf("default models = %q", got)
	}
}

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		base, model string
		stream      bool
		want        string
	}{
		{"https://x/v1beta/", "gemini-2.5-flash", false, "https://x/v1beta/models/gemini-2.5-flash:generateContent"},
		{"https://x/v1beta", "gemini-2.5-flash", true, "https://x/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		{"https://x/v1beta", "tunedModels/mine", false, "https://x/v1beta/tunedModels/mine:generateContent"},
	} {
		if got := endpoint(tc.base, tc.model, tc.stream); got != tc.want {
			t.Errorf("endpoint(%q, %q, %v) = %q, want %q", tc.base, tc.model, tc.stream, got, tc.want)
		}
	}
}

func TestBuildRequestFull(t *testing.T) {
	img := "data:image/png;base64,iVBORw0KGgo="
	req := &abi.GenerateRequest{
		Messages: []*abi.Message{
			abi.NewSystemTextMessage("Be brief."),
			abi.NewUserMessage(abi.NewTextPart("Look:"), abi.NewMediaPart("", img), abi.NewMediaPart("video/mp4", "https://example.com/v.mp4")),
			{Role: abi.RoleModel, Content: []*abi.Part{
				{Kind: abi.PartReasoning, Text: "hmm", Metadata: map[string]any{"thoughtSignature": "c2ln"}},
				abi.NewToolRequestPart(&abi.ToolRequest{Name: "weather/now", Ref: "weather/now-0", Input: map[string]any{"city": "Paris"}}),
				abi.NewToolRequestPart(&abi.ToolRequest{Name: "clock", Ref: "id-7"}),
			}},
			abi.NewToolMessage(
				&abi.ToolResponse{Name: "weather/now", Ref: "weather/now-0", Output: map[string]any{"c": 21.0}},
				&abi.ToolResponse{Name: "clock", Ref: "id-7", Output: "noon"},
			),
			abi.NewSystemTextMessage("Use metric units."),
			{Role: abi.RoleModel, Content: []*abi.Part{abi.NewCustomPart(map[string]any{"executableCode": map[string]any{"language": "PYTHON", "code": "print(1)"}})}},
			{Role: abi.RoleUser, Content: []*abi.Part{}}, // dropped: nothing to send
		},
		Tools: []*abi.ToolDefinition{
			{Name: "weather/now", Description: "Weather now.", InputSchema: map[string]any{"$schema": "x", "type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}},
			{Name: "clock", Description: "Time."},
		},
		ToolChoice: abi.ToolChoiceRequired,
		Config: map[string]any{
			"temperature": 0.2, "topK": 3.0, "maxOutputTokens": 50.0, "stopSequences": []any{"END"},
			"thinkingConfig":        map[string]any{"includeThoughts": true},
			"generationConfig":      map[string]any{"seed": 7.0, "temperature": 0.3},
			"safetySettings":        []any{map[string]any{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}},
			"googleSearch":          map[string]any{},
			"codeExecution":         true,
			"urlContext":            false,
			"tools":                 []any{map[string]any{"googleMaps": map[string]any{}}},
			"cachedContent":         "cachedContents/abc",
			"toolConfig":            map[string]any{"retrievalConfig": map[string]any{"languageCode": "en"}},
			"functionCallingConfig": map[string]any{"allowedFunctionNames": []any{"weather__now"}},
			"version":               "gemini-2.5-pro-002",
		},
	}
	ar, err := buildRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if ar.model != "gemini-2.5-pro-002" {
		t.Errorf("model = %q", ar.model)
	}
	want := `{
	  "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use metric units."}]},
	  "contents": [
	    {"role": "user", "parts": [{"text": "Look:"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}, {"fileData": {"fileUri": "https://example.com/v.mp4", "mimeType": "video/mp4"}}]},
	    {"role": "model", "parts": [
	      {"text": "hmm", "thought": true, "thoughtSignature": "c2ln"},
	      {"functionCall": {"name": "weather__now", "args": {"city": "Paris"}, "id": "weather/now-0"}},
	      {"functionCall": {"name": "clock", "id": "id-7"}}]},
	    {"role": "user", "parts": [
	      {"functionResponse": {"name": "weather__now", "id": "weather/now-0", "response": {"c": 21}}},
	      {"functionResponse": {"name": "clock", "id": "id-7", "response": {"output": "noon"}}}]},
	    {"role": "model", "parts": [{"executableCode": {"language": "PYTHON", "code": "print(1)"}}]}
	  ],
	  "tools": [
	    {"functionDeclarations": [
	      {"name": "weather__now", "description": "Weather now.", "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}}},
	      {"name": "clock", "description": "Time."}]},
	    {"codeExecution": {}},
	    {"googleMaps": {}},
	    {"googleSearch": {}}
	  ],
	  "toolConfig": {"retrievalConfig": {"languageCode": "en"}, "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather__now"]}},
	  "generationConfig": {"temperature": 0.3, "topK": 3, "maxOutputTokens": 50, "stopSequences": ["END"], "thinkingConfig": {"includeThoughts": true}, "seed": 7},
	  "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
	  "cachedContent": "cachedContents/abc"
	}`
	// Server-side tools from config keys come in map order: sort the tools after the
	// function declarations for the comparison.
	tools := ar.body["tools"].([]any)
	slices.SortFunc(tools[1:], func(a, b any) int { return strings.Compare(jsonOf(t, a), jsonOf(t, b)) })
	if got := jsonOf(t, ar.body); !sameJSON(t, got, want) {
		t.Errorf("request =\n%s\nwant\n%s", got, want)
	}
}

func TestBuildRequestSyntheticRefsAreNotSentAsIDs(t *testing.T) {
	tr := abi.NewToolRequestPart(&abi.ToolRequest{Name: "weather/now", Ref: "weather/now-0", Input: map[string]any{}})
	tr.Metadata = map[string]any{mdSyntheticRef: true, mdThoughtSignature: "c2ln"}
	ar, err := buildRequest(&abi.GenerateRequest{Messages: []*abi.Message{
		abi.NewUserTextMessage("hi"),
		abi.NewModelMessage(tr),
		abi.NewToolMessage(&abi.ToolResponse{Name: "weather/now", Ref: "weather/now-0", Output: 21.0}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"role":"user","parts":[{"text":"hi"}]},
	  {"role":"model","parts":[{"functionCall":{"name":"weather__now","args":{}},"thoughtSignature":"c2ln"}]},
	  {"role":"user","parts":[{"functionResponse":{"name":"weather__now","response":{"output":21}}}]}]`
	if got := jsonOf(t, ar.body["contents"]); !sameJSON(t, got, want) {
		t.Errorf("contents = %s\nwant %s", got, want)
	}
}

func TestBuildRequestOutput(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}
	for _, tc := range []struct {
		name string
		req  *abi.GenerateRequest
		want string // generationConfig, or "" for none
	}{
		{"constrained", &abi.GenerateRequest{Output: &abi.OutputConfig{Format: "json", Schema: schema, Constrained: true}},
			`{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`},
		{"not constrained", &abi.GenerateRequest{Output: &abi.OutputConfig{Format: "json", Schema: schema}},
			`{"responseMimeType":"application/json"}`},
		{"with tools", &abi.GenerateRequest{Tools: []*abi.ToolDefinition{{Name: "t"}}, Output: &abi.OutputConfig{Format: "json", Schema: schema, Constrained: true}}, ""},
		{"text", &abi.GenerateRequest{Output: &abi.OutputConfig{Format: "text"}}, ""},
		{"config wins", &abi.GenerateRequest{Config: map[string]any{"responseSchema": map[string]any{"type": "STRING"}}, Output: &abi.OutputConfig{Format: "json", Schema: schema, Constrained: true}},
			`{"responseMimeType":"application/json","responseSchema":{"type":"STRING"}}`},
	} {
		tc.req.Messages = []*abi.Message{abi.NewUserTextMessage("x")}
		ar, err := buildRequest(tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		gen, ok := ar.body["generationConfig"]
		if tc.want == "" {
			if ok {
				t.Errorf("%s: generationConfig = %s, want none", tc.name, jsonOf(t, gen))
			}
			continue
		}
		if got := jsonOf(t, gen); !sameJSON(t, got, tc.want) {
			t.Errorf("%s: generationConfig = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestBuildRequestToolChoice(t *testing.T) {
	for choice, want := range map[abi.ToolChoice]string{"auto": "AUTO", "required": "ANY", "none": "NONE"} {
		ar, err := buildRequest(&abi.GenerateRequest{ToolChoice: choice})
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonOf(t, ar.body["toolConfig"]); got != `{"functionCallingConfig":{"mode":"`+want+`"}}` {
			t.Errorf("%s: toolConfig = %s", choice, got)
		}
	}
	ar, _ := buildRequest(&abi.GenerateRequest{})
	if _, ok := ar.body["toolConfig"]; ok {
		t.Error("toolConfig without a tool choice")
	}
}

func TestBuildRequestErrors(t *testing.T) {
	for name, req := range map[string]*abi.GenerateRequest{
		"config not an object": {Config: "hot"},
		"tools not a list":     {Config: map[string]any{"tools": map[string]any{}}},
		"bad version":          {Config: map[string]any{"version": 2.0}},
		"bad tool choice":      {ToolChoice: "sometimes"},
		"bad data URI":         {Messages: []*abi.Message{abi.NewUserMessage(abi.NewMediaPart("image/png", "data:image/png;base64"))}},
		"bad base64":           {Messages: []*abi.Message{abi.NewUserMessage(abi.NewMediaPart("image/png", "data:image/png;base64,!!!"))}},
	} {
		_, err := buildRequest(req)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if e := asInvalid(err).(*abi.Error); e.Code != abi.CodeInvalidInput {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestMediaPart(t *testing.T) {
	for _, tc := range []struct{ url, ct, want string }{
		{"data:image/png;base64,aGk=", "", `{"inlineData":{"data":"aGk=","mimeType":"image/png"}}`},
		{"data:image/png;base64,aGk", "image/x-png", `{"inlineData":{"data":"aGk=","mimeType":"image/x-png"}}`},
		{"data:text/plain,hi%20there", "", `{"inlineData":{"data":"aGkgdGhlcmU=","mimeType":"text/plain"}}`},
		{"data:;base64,aGk=", "", `{"inlineData":{"data":"aGk=","mimeType":"application/octet-stream"}}`},
		{"data:audio/L16;codec=pcm;rate=24000;base64,AAAA", "", `{"inlineData":{"data":"AAAA","mimeType":"audio/L16;codec=pcm;rate=24000"}}`},
		{"gs://bucket/a.pdf", "application/pdf", `{"fileData":{"fileUri":"gs://bucket/a.pdf","mimeType":"application/pdf"}}`},
		{"https://youtu.be/x", "", `{"fileData":{"fileUri":"https://youtu.be/x"}}`},
	} {
		p, err := mediaPart(tc.url, tc.ct)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if got := jsonOf(t, p); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.url, got, tc.want)
		}
	}
}

// collect folds Gemini responses (JSON texts) into a collector and returns the parts of
// each and the final response.
func collect(t *testing.T, tools []*abi.ToolDefinition, events ...string) ([][]*abi.Part, *abi.GenerateResponse) {
	t.Helper()
	c := newCollector(newNames(tools))
	var chunks [][]*abi.Part
	for _, ev := range events {
		var r apiResponse
		if err := json.Unmarshal([]byte(ev), &r); err != nil {
			t.Fatalf("%v: %s", err, ev)
		}
		parts, err := c.add(&r)
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, parts)
	}
	return chunks, c.response()
}

func TestCollectWholeResponse(t *testing.T) {
	tools := []*abi.ToolDefinition{{Name: "weather/now"}}
	_, resp := collect(t, tools, `{
	  "candidates": [{
	    "content": {"role": "model", "parts": [
	      {"text": "Thinking it over", "thought": true, "thoughtSignature": "c2lnLTA="},
	      {"text": "Here:"},
	      {"text": ""},
	      {"functionCall": {"name": "weather__now", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLTE="},
	      {"functionCall": {"name": "weather__now", "args": {"city": "Rome"}}},
	      {"functionCall": {"id": "fc-9", "name": "other"}},
	      {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
	      {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/a.pdf"}},
	      {"executableCode": {"language": "PYTHON", "code": "print(2)"}},
	      {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2\n"}}
	    ]},
	    "finishReason": "STOP",
	    "groundingMetadata": {"webSearchQueries": ["weather paris"]},
	    "index": 0
	  }, {"content": {"role": "model", "parts": [{"text": "second candidate"}]}, "index": 1}],
	  "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 20, "thoughtsTokenCount": 5, "cachedContentTokenCount": 2, "toolUsePromptTokenCount": 3},
	  "modelVersion": "gemini-2.5-flash",
	  "responseId": "r-1"
	}`)
	want := `{"role":"model","content":[
	  {"reasoning":"Thinking it over","metadata":{"thoughtSignature":"c2lnLTA="}},
	  {"text":"Here:"},
	  {"toolRequest":{"ref":"weather/now-0","name":"weather/now","input":{"city":"Paris"}},"metadata":{"syntheticRef":true,"thoughtSignature":"c2lnLTE="}},
	  {"toolRequest":{"ref":"weather/now-1","name":"weather/now","input":{"city":"Rome"}},"metadata":{"syntheticRef":true}},
	  {"toolRequest":{"ref":"fc-9","name":"other","input":{}}},
	  {"media":{"url":"data:image/png;base64,aGk=","contentType":"image/png"}},
	  {"media":{"url":"gs://b/a.pdf","contentType":"application/pdf"}},
	  {"custom":{"executableCode":{"code":"print(2)","language":"PYTHON"}}},
	  {"custom":{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"2\n"}}}]}`
	if got := jsonOf(t, resp.Message); !sameJSON(t, got, want) {
		t.Errorf("message = %s\nwant %s", got, want)
	}
	if resp.FinishReason != abi.FinishStop {
		t.Errorf("finish = %s", resp.FinishReason)
	}
	wantUsage := `{"inputTokens":10,"outputTokens":5,"totalTokens":20,"thoughtsTokens":5,"cachedContentTokens":2,"custom":{"toolUsePromptTokens":3}}`
	if got := jsonOf(t, resp.Usage); got != wantUsage {
		t.Errorf("usage = %s", got)
	}
	custom := resp.Custom.(map[string]any)
	if custom["modelVersion"] != "gemini-2.5-flash" || custom["responseId"] != "r-1" || custom["groundingMetadata"] == nil {
		t.Errorf("custom = %v", custom)
	}

	// The message goes back to Gemini as it came: signatures kept, made-up refs not sent.
	ar, err := buildRequest(&abi.GenerateRequest{Tools: tools, Messages: []*abi.Message{resp.Message}})
	if err != nil {
		t.Fatal(err)
	}
	wantBack := `[{"role":"model","parts":[
	  {"text":"Thinking it over","thought":true,"thoughtSignature":"c2lnLTA="},
	  {"text":"Here:"},
	  {"functionCall":{"name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2lnLTE="},
	  {"functionCall":{"name":"weather__now","args":{"city":"Rome"}}},
	  {"functionCall":{"id":"fc-9","name":"other","args":{}}},
	  {"inlineData":{"mimeType":"image/png","data":"aGk="}},
	  {"fileData":{"fileUri":"gs://b/a.pdf","mimeType":"application/pdf"}},
	  {"executableCode":{"code":"print(2)","language":"PYTHON"}},
	  {"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"2\n"}}]}]`
	if got := jsonOf(t, ar.body["contents"]); !sameJSON(t, got, wantBack) {
		t.Errorf("sent back = %s\nwant %s", got, wantBack)
	}
}

func TestCollectStreamedTextKeepsSignature(t *testing.T) {
	chunks, resp := collect(t, nil,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"index":0}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},"index":0}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"","thoughtSignature":"c2ln"}]},"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3}}`)
	if len(chunks) != 3 || chunks[0][0].Text != "Hel" || chunks[1][0].Text != "lo" || chunks[2][0].Metadata["thoughtSignature"] != "c2ln" {
		t.Errorf("chunks = %s", jsonOf(t, chunks))
	}
	if resp.Text() != "Hello" || resp.FinishReason != abi.FinishLength || resp.Usage.TotalTokens != 3 {
		t.Errorf("response = %s", jsonOf(t, resp))
	}
	if got := jsonOf(t, resp.Message.Content); got != `[{"text":"Hello"},{"text":"","metadata":{"thoughtSignature":"c2ln"}}]` {
		t.Errorf("content = %s", got)
	}
}

func TestCollectPartialArgs(t *testing.T) {
	tools := []*abi.ToolDefinition{{Name: "weather/now"}}
	chunks, resp := collect(t, tools,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"weather__now","willContinue":true},"thoughtSignature":"c2ln"}]},"index":0}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.city","stringValue":"Pa","willContinue":true}],"willContinue":true}}]},"index":0}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.city","stringValue":"ris"},{"jsonPath":"$.days","numberValue":3},{"jsonPath":"$.opts.metric","boolValue":true},{"jsonPath":"$.tags[1]","stringValue":"b"},{"jsonPath":"$['odd key']","nullValue":"NULL_VALUE"}],"willContinue":true}}]},"index":0}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{}}]},"finishReason":"STOP","index":0}]}`)
	var inputs []string
	for _, c := range chunks {
		for _, p := range c {
			if !p.IsToolRequest() || p.ToolRequest.Ref != "weather/now-0" || p.ToolRequest.Name != "weather/now" || p.Metadata["thoughtSignature"] != "c2ln" {
				t.Fatalf("part = %s", jsonOf(t, p))
			}
			inputs = append(inputs, jsonOf(t, p.ToolRequest))
		}
	}
	want := []string{
		`{"ref":"weather/now-0","name":"weather/now","input":{},"partial":true}`,
		`{"ref":"weather/now-0","name":"weather/now","input":{"city":"Pa"},"partial":true}`,
		`{"ref":"weather/now-0","name":"weather/now","input":{"city":"Paris","days":3,"odd key":null,"opts":{"metric":true},"tags":[null,"b"]},"partial":true}`,
		`{"ref":"weather/now-0","name":"weather/now","input":{"city":"Paris","days":3,"odd key":null,"opts":{"metric":true},"tags":[null,"b"]}}`,
	}
	if !slices.Equal(inputs, want) {
		t.Errorf("streamed =\n%s\nwant\n%s", strings.Join(inputs, "\n"), strings.Join(want, "\n"))
	}
	reqs := resp.ToolRequests()
	if len(reqs) != 1 || reqs[0].Partial || jsonOf(t, reqs[0].Input) != `{"city":"Paris","days":3,"odd key":null,"opts":{"metric":true},"tags":[null,"b"]}` {
		t.Errorf("final = %s", jsonOf(t, resp.Message))
	}

	// A stream that ends with the call still open completes it; a new call closes the
	// open one.
	_, resp = collect(t, tools,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"weather__now","id":"a","partialArgs":[{"jsonPath":"$.city","stringValue":"Oslo"}],"willContinue":true}}]},"index":0}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"weather__now","id":"b","args":{"city":"Rome"}}}]},"index":0}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"weather__now","id":"c","willContinue":true,"partialArgs":[{"jsonPath":"$.city","stringValue":"Bern"}]}}]},"index":0}]}`)
	if got := jsonOf(t, resp.ToolRequests()); got != `[{"ref":"a","name":"weather/now","input":{"city":"Oslo"}},{"ref":"b","name":"weather/now","input":{"city":"Rome"}},{"ref":"c","name":"weather/now","input":{"city":"Bern"}}]` {
		t.Errorf("requests = %s", got)
	}
}

func TestCollectIgnoresAStrayEndOfCall(t *testing.T) {
	_, resp := collect(t, nil, `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"},{"functionCall":{}}]},"finishReason":"STOP","index":0}]}`)
	if got := jsonOf(t, resp.Message.Content); got != `[{"text":"ok"}]` {
		t.Errorf("content = %s", got)
	}
}

func TestParseJSONPath(t *testing.T) {
	got, err := parseJSONPath(`$.a.b[2]['c]d']["e"]`)
	want := []pathElem{{key: "a", isKey: true}, {key: "b", isKey: true}, {index: 2}, {key: "c]d", isKey: true}, {key: "e", isKey: true}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseJSONPath = %+v, %v", got, err)
	}
	for _, bad := range []string{"a.b", "$..a", "$[x]", "$[1", "$['a", "$[-1]", "$[99999999]", "$a"} {
		if _, err := parseJSONPath(bad); err == nil {
			t.Errorf("parseJSONPath(%q): no error", bad)
		}
	}
}

func TestFinishReasons(t *testing.T) {
	for in, want := range map[string]abi.FinishReason{
		"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "blocked", "RECITATION": "blocked", "BLOCKLIST": "blocked",
		"PROHIBITED_CONTENT": "blocked", "SPII": "blocked", "IMAGE_SAFETY": "blocked", "OTHER": "other",
		"MALFORMED_FUNCTION_CALL": "other", "LANGUAGE": "unknown", "FINISH_REASON_UNSPECIFIED": "unknown", "": "unknown",
	} {
		if got := finishReason(in); got != want {
			t.Errorf("finishReason(%q) = %s, want %s", in, got, want)
		}
	}
	_, resp := collect(t, nil, `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT","blockReasonMessage":"nope"},"usageMetadata":{"promptTokenCount":4,"totalTokenCount":4}}`)
	if resp.FinishReason != abi.FinishBlocked || resp.FinishMessage != "the prompt was blocked: PROHIBITED_CONTENT: nope" || len(resp.Message.Content) != 0 || resp.Usage.InputTokens != 4 {
		t.Errorf("blocked prompt = %s", jsonOf(t, resp))
	}
	_, resp = collect(t, nil, `{"candidates":[{"finishReason":"SAFETY","finishMessage":"unsafe","index":0}]}`)
	if resp.FinishReason != abi.FinishBlocked || resp.FinishMessage != "unsafe" || resp.Custom.(map[string]any)["finishReason"] != "SAFETY" {
		t.Errorf("blocked answer = %s", jsonOf(t, resp))
	}
}

func TestHTTPError(t *testing.T) {
	for _, tc := range []struct {
		status     int
		retryAfter string
		body       string
		want       abi.Error
	}{
		{400, "", `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}`, abi.Error{Code: "invalid_input", Status: 400, Message: "gemini: API key not valid."}},
		{401, "", `{"error":{"code":401,"message":"no creds","status":"UNAUTHENTICATED"}}`, abi.Error{Code: "permission_denied", Status: 401, Message: "gemini: no creds"}},
		{403, "", `{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`, abi.Error{Code: "permission_denied", Status: 403, Message: "gemini: denied"}},
		{404, "", `{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}`, abi.Error{Code: "not_found", Status: 404, Message: "gemini: models/x is not found"}},
		{429, "", `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"15s"}]}}`,
			abi.Error{Code: "limit_exceeded", Status: 429, Message: "gemini: quota", RetryAfter: 15}},
		{429, "7", `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"15s"}]}}`,
			abi.Error{Code: "limit_exceeded", Status: 429, Message: "gemini: quota", RetryAfter: 7}},
		{429, "", `{"error":{"code":429,"message":"q","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.5s"}]}}`, abi.Error{Code: "limit_exceeded", Status: 429, Message: "gemini: q", RetryAfter: 0.5}},
		{500, "", `{"error":{"code":500,"message":"internal","status":"INTERNAL"}}`, abi.Error{Code: "unavailable", Status: 500, Message: "gemini: internal"}},
		{503, "", `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, abi.Error{Code: "unavailable", Status: 503, Message: "gemini: The model is overloaded."}},
		{502, "", `<html>Bad Gateway</html>`, abi.Error{Code: "unavailable", Status: 502, Message: "gemini: <html>Bad Gateway</html>"}},
		{504, "", ``, abi.Error{Code: "unavailable", Status: 504, Message: "gemini: HTTP status 504"}},
		{400, "", `[{"error":{"code":400,"message":"listed","status":"INVALID_ARGUMENT"}}]`, abi.Error{Code: "invalid_input", Status: 400, Message: "gemini: listed"}},
	} {
		got := httpError(tc.status, map[string]string{"retry-after": tc.retryAfter}, []byte(tc.body))
		if *got != tc.want {
			t.Errorf("%d %s: %+v, want %+v", tc.status, tc.body, *got, tc.want)
		}
	}
	// An error event in a stream carries its code, or its status name.
	e := (&apiError{Message: "slow down", Status: "RESOURCE_EXHAUSTED"}).toABI(0, nil)
	if e.Code != abi.CodeLimitExceeded || e.Status != 429 {
		t.Errorf("event error = %+v", e)
	}
}
