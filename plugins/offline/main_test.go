package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

func TestWords(t *testing.T) {
	for _, text := range []string{"", "one", "echo: hello  there\tworld ", "  lead"} {
		w := words(text)
		if strings.Join(w, "") != text {
			t.Errorf("words(%q) = %q: does not join back", text, w)
		}
	}
	if w := words("a b  c"); len(w) != 3 || w[1] != "b  " {
		t.Errorf("words = %q", w)
	}
}

func TestAnswerRules(t *testing.T) {
	tools := []*abi.ToolDefinition{{Name: "calc"}}
	for _, tc := range []struct {
		name string
		req  *abi.GenerateRequest
		want string // the answer's JSON
	}{
		{"echo", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewSystemTextMessage("sys"), abi.NewUserTextMessage("hi")}},
			`{"role":"model","content":[{"text":"echo: hi"}]}`},
		{"no messages", &abi.GenerateRequest{}, `{"role":"model","content":[{"text":"echo: "}]}`},
		{"call", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage(`/call calc {"expression":"2*3"}`)}, Tools: tools},
			`{"role":"model","content":[{"toolRequest":{"ref":"call-1","name":"calc","input":{"expression":"2*3"}}}]}`},
		{"call without input", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("/call calc")}, Tools: tools},
			`{"role":"model","content":[{"toolRequest":{"ref":"call-1","name":"calc"}}]}`},
		{"call of a tool not offered", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage(`/call rm {}`)}, Tools: tools},
			`{"role":"model","content":[{"text":"echo: /call rm {}"}]}`},
		{"call with bad JSON", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage(`/call calc {`)}, Tools: tools},
			`{"role":"model","content":[{"text":"echo: /call calc {"}]}`},
		{"use a tool", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("Please use weather: Paris?")},
			Tools: []*abi.ToolDefinition{{Name: "calc"}, {Name: "weather", InputSchema: map[string]any{"type": "object", "required": []any{"city"}, "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}},
			`{"role":"model","content":[{"toolRequest":{"ref":"call-1","name":"weather","input":{"city":"a"}}}]}`},
		{"a required tool choice", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("anything")}, Tools: tools, ToolChoice: abi.ToolChoiceRequired},
			`{"role":"model","content":[{"toolRequest":{"ref":"call-1","name":"calc","input":{}}}]}`},
		{"tools forbidden", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("use calc")}, Tools: tools, ToolChoice: abi.ToolChoiceNone},
			`{"role":"model","content":[{"text":"echo: use calc"}]}`},
		{"tool results", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewToolMessage(
			&abi.ToolResponse{Name: "calc", Output: 6}, &abi.ToolResponse{Name: "calc", Output: map[string]any{"v": "x"}})}},
			`{"role":"model","content":[{"text":"Tool results: 6; {\"v\":\"x\"}"}]}`},
		{"json", &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("x")}, Output: &abi.OutputConfig{Format: "json", Schema: map[string]any{
			"type": "object", "required": []any{"s", "n", "b", "a", "o", "e", "t"},
			"properties": map[string]any{
				"s": map[string]any{"type": "string", "minLength": 2.0}, "n": map[string]any{"type": "number", "maximum": -1.5},
				"b": map[string]any{"type": "boolean"}, "a": map[string]any{"type": "array", "minItems": 1.0, "items": map[string]any{"type": "integer"}},
				"o": map[string]any{"type": []any{"null", "object"}, "properties": map[string]any{}}, "e": map[string]any{"enum": []any{"x", "y"}},
				"t": map[string]any{"type": "string", "format": "date-time"}, "skipped": map[string]any{"type": "string"},
			}}}},
			`{"role":"model","content":[{"text":"{\"a\":[1],\"b\":true,\"e\":\"x\",\"n\":-1.5,\"o\":{},\"s\":\"aa\",\"t\":\"2026-01-02T03:04:05Z\"}"}]}`},
	} {
		b, err := json.Marshal(answer(tc.req))
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: answer = %s (%v), want %s", tc.name, b, err, tc.want)
		}
	}
}

// Usage counts a token a word, a tool request or response one.
func TestUsage(t *testing.T) {
	req := &abi.GenerateRequest{Messages: []*abi.Message{abi.NewSystemTextMessage("be brief"), abi.NewUserTextMessage("/call calc {}"),
		abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Name: "calc"})), abi.NewToolMessage(&abi.ToolResponse{Name: "calc", Output: 6})}}
	u := usage(req, answer(req))
	if u.InputTokens != 7 || u.OutputTokens != 3 || u.TotalTokens != 10 || u.InputCharacters != 21 || u.OutputCharacters != 15 {
		t.Errorf("usage %+v", u)
	}
}
