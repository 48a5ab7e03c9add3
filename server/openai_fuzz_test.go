package server

import (
	"errors"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

// FuzzChatRequest: any body is a turn or a 400 naming what is wrong, never a panic;
// and a tool call id is read back as it was made, or not at all.
func FuzzChatRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model": "a", "messages": [{"role": "user", "content": "hi"}]}`,
		`{"model": "a", "n": 1, "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]}`,
		`{"model": "a", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_cw.Zg.cg", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "call_cw.Zg.cg", "content": "ok"}]}`,
		`{"model": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]}`,
		`{"model": "a", "messages": [{"role": "tool", "tool_call_id": "call_...", "content": "x"}]}`,
		`{"model": "a", "temperature": null, "messages": []}`,
		`[]`, `null`, `{"model": 1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeChatRequest(body)
		if err == nil {
			_, err = req.turn()
			if err == nil {
				req.output()
				req.clientTools()
			}
		}
		var pe *paramError
		if err != nil && !errors.Is(err, ErrBadJSON) && !errors.As(err, &pe) {
			t.Errorf("error %v is neither malformed JSON nor a parameter's", err)
		}
		if pe != nil && pe.param == "" {
			t.Errorf("a refusal names no parameter: %v", pe)
		}
	})
}

func FuzzToolCallID(f *testing.F) {
	f.Add("session", "tool", "ref", "call_cw.Zg.cg")
	f.Fuzz(func(t *testing.T, session, name, ref, id string) {
		if name != "" {
			s, n, r, ok := parseToolCallID(toolCallID(session, &abi.ToolRequest{Name: name, Ref: ref}))
			if !ok || s != session || n != name || r != ref {
				t.Errorf("(%q, %q, %q) read back as (%q, %q, %q, %v)", session, name, ref, s, n, r, ok)
			}
		}
		if _, n, _, ok := parseToolCallID(id); ok && n == "" {
			t.Errorf("%q reads as a call of no tool", id)
		}
	})
}
