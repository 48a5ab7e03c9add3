package providertest

import (
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

// TestReply checks each rule of the fake model, as its doc states them.
func TestReply(t *testing.T) {
	add := &abi.ToolDefinition{Name: "math__add", InputSchema: map[string]any{
		"type": "object", "required": []any{"a"}, "properties": map[string]any{"a": map[string]any{"type": "integer", "minimum": 3}},
	}}
	other := &abi.ToolDefinition{Name: "other", InputSchema: map[string]any{"type": "object"}}
	user := func(text string) []*abi.Message { return []*abi.Message{abi.NewUserTextMessage(text)} }
	call := abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Ref: "c1", Name: "math__add"}))
	result := abi.NewToolMessage(&abi.ToolResponse{Ref: "c1", Name: "math__add", Output: map[string]any{"sum": 5},
		Content: []*abi.Part{abi.NewTextPart("and a picture"), abi.NewMediaPart("image/png", "data:image/png;base64,AA==")}})
	for _, tc := range []struct {
		name string
		req  Request
		text string // the answer's text, or its call as "name args"
	}{
		{"echo", Request{Messages: user("Hello there")}, "echo: Hello there"},
		{"echo with an image", Request{Messages: []*abi.Message{abi.NewUserMessage(abi.NewTextPart("What?"), abi.NewMediaPart("", "https://x/y.png"))}},
			"echo: What? [1 image]"},
		{"tool results", Request{Tools: []*abi.ToolDefinition{add}, Messages: append(user("use math/add"), call, result)},
			`Tool results: {"sum":5} and a picture [1 image]`},
		{"use <tool>, by its own name", Request{Tools: []*abi.ToolDefinition{other, add}, Messages: user("Please use math/add, now.")}, `math__add {"a":3}`},
		{"/call with arguments", Request{Tools: []*abi.ToolDefinition{add}, Messages: user(`/call math__add {"a": 7}`)}, `math__add {"a":7}`},
		{"not an offered tool", Request{Tools: []*abi.ToolDefinition{add}, Messages: user("use math/sub")}, "echo: use math/sub"},
		{"tool choice none", Request{Tools: []*abi.ToolDefinition{add}, ToolChoice: abi.ToolChoiceNone, Messages: user("use math/add")}, "echo: use math/add"},
		{"tool choice required", Request{Tools: []*abi.ToolDefinition{other, add}, ToolChoice: abi.ToolChoiceRequired, Messages: user("hi")}, "other {}"},
		{"a forced tool", Request{Tools: []*abi.ToolDefinition{other, add}, ToolChoice: abi.ToolChoiceRequired, Tool: "math__add", Messages: user("hi")}, `math__add {"a":3}`},
		{"a schema", Request{Schema: map[string]any{"type": "object", "required": []any{"ok"}, "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}, Messages: user("hi")},
			`{"ok":true}`},
		{"JSON without a schema", Request{JSON: true, Messages: user("hi")}, "{}"},
		{"a schema in the format instructions", Request{Messages: user("hi\nOutput should be in JSON format and conform to the following schema:\n```\n{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"string\"}}\n```")},
			`["a"]`},
		{"a stop sequence", Request{StopSequences: []string{"STOP"}, Messages: user("go STOP now")}, "echo: go "},
	} {
		a := Reply(&tc.req)
		got := a.Text
		if a.Call != nil {
			got = a.Call.Name + " " + a.Call.Args
		}
		if got != tc.text {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.text)
		}
	}
}

func TestReplyLimitsReasoningAndIDs(t *testing.T) {
	req := &Request{MaxTokens: 2, Reasoning: true, Messages: []*abi.Message{abi.NewSystemTextMessage("Be brief."), abi.NewUserTextMessage("one two three")},
		Body: map[string]any{"n": 1}}
	a := Reply(req)
	if a.Text != "echo: one" || a.Finish != abi.FinishLength || a.Reasoning != "Thinking about: one two three" ||
		a.InputTokens != 5 || a.OutputTokens != 2 || a.ReasoningTokens != 5 {
		t.Errorf("answer %+v", a)
	}
	if again := Reply(req); again.ID != a.ID {
		t.Errorf("the same request got ids %s and %s", a.ID, again.ID)
	}
	if other := Reply(&Request{Messages: req.Messages, Body: map[string]any{"n": 2}}); other.ID == a.ID {
		t.Errorf("different requests share the id %s", a.ID)
	}
	msgs := []*abi.Message{abi.NewUserTextMessage("use t"),
		abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Ref: "x", Name: "t"})),
		abi.NewToolMessage(&abi.ToolResponse{Ref: "x", Name: "t", Output: "done"}), abi.NewModelTextMessage("Tool results: done"),
		abi.NewUserTextMessage("use t again")}
	if c := Reply(&Request{Tools: []*abi.ToolDefinition{{Name: "t"}}, Messages: msgs}).Call; c == nil || c.ID != "call_fake_2" {
		t.Errorf("the second call of a conversation: %+v", c)
	}
}

func TestWords(t *testing.T) {
	for _, text := range []string{"", "one", "echo: Count  from one\tto five.\n", "  leading"} {
		words := Words(text)
		if strings.Join(words, "") != text {
			t.Errorf("Words(%q) = %q: joined, not the text", text, words)
		}
		for i, w := range words {
			if i > 0 && strings.TrimSpace(w) == "" {
				t.Errorf("Words(%q) = %q: a piece of space only", text, words)
			}
		}
	}
	if got := Words("a b  c"); !slices.Equal(got, []string{"a ", "b  ", "c"}) {
		t.Errorf("Words = %q", got)
	}
}
