package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// sseEvent formats one server-sent event as the Messages API sends it.
func sseEvent(typ, data string) string {
	return fmt.Sprintf("event: %s\ndata: %s\n\n", typ, data)
}

// toolStream is a documented streamed answer: thinking, text, then a tool call whose
// arguments arrive in pieces.
var toolStream = []string{
	sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_s1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2,"cache_read_input_tokens":100}}}`),
	sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants "}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a sum."}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}`),
	sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
	sseEvent("ping", `{"type": "ping"}`),
	sseEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me "}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"compute."}}`),
	sseEvent("content_block_stop", `{"type":"content_block_stop","index":1}`),
	sseEvent("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x","name":"calculator__calc","input":{}}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"expre"}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ssion\": \"2"}}`),
	sseEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"+3\"}"}}`),
	sseEvent("content_block_stop", `{"type":"content_block_stop","index":2}`),
	sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`),
	sseEvent("message_stop", `{"type":"message_stop"}`),
}

func TestReadStream(t *testing.T) {
	names := provider.NewToolNames(nameRule)
	names.API("calculator/calc")
	var chunks []string
	resp, err := readStream(strings.NewReader(strings.Join(toolStream, "")), names, func(c *abi.GenerateResponseChunk) error {
		if c.Role != abi.RoleModel || len(c.Content) != 1 {
			t.Errorf("chunk %s", jsonOf(t, c))
		}
		chunks = append(chunks, jsonOf(t, c.Content[0]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantChunks := []string{
		`{"reasoning":"The user wants "}`,
		`{"reasoning":"a sum."}`,
		`{"text":"Let me "}`,
		`{"text":"compute."}`,
		`{"toolRequest":{"ref":"toolu_01T1x","name":"calculator/calc","partial":true}}`,
		`{"toolRequest":{"ref":"toolu_01T1x","name":"calculator/calc","input":{},"partial":true}}`,
		`{"toolRequest":{"ref":"toolu_01T1x","name":"calculator/calc","input":{"expression":"2"},"partial":true}}`,
		`{"toolRequest":{"ref":"toolu_01T1x","name":"calculator/calc","input":{"expression":"2+3"},"partial":true}}`,
		`{"toolRequest":{"ref":"toolu_01T1x","name":"calculator/calc","input":{"expression":"2+3"}}}`,
	}
	if strings.Join(chunks, "\n") != strings.Join(wantChunks, "\n") {
		t.Errorf("chunks =\n%s\nwant\n%s", strings.Join(chunks, "\n"), strings.Join(wantChunks, "\n"))
	}
	want := `{"role":"model","content":[{"reasoning":"The user wants a sum.","metadata":{"signature":"EqQBCgIYAhIM"}},{"text":"Let me compute."},` +
		`{"toolRequest":{"ref":"toolu_01T1x","name":"calculator/calc","input":{"expression":"2+3"}}}]}`
	if s := jsonOf(t, resp.Message); s != want {
		t.Errorf("message =\n%s\nwant\n%s", s, want)
	}
	if resp.FinishReason != abi.FinishStop || resp.Usage.InputTokens != 472 || resp.Usage.OutputTokens != 89 || resp.Usage.CachedContentTokens != 100 {
		t.Errorf("finish %s usage %+v", resp.FinishReason, resp.Usage)
	}
}

func TestReadStreamOtherBlocksAndFailures(t *testing.T) {
	start := sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":1,"output_tokens":1}}}`)
	// A server tool with streamed input and a redacted thinking block become custom parts.
	stream := start +
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"opaque"}}`) +
		sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		sseEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`) +
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"go\"}"}}`) +
		sseEvent("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		sseEvent("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`) +
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"https://go.dev"}}}`) +
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Go is fun."}}`) +
		sseEvent("content_block_stop", `{"type":"content_block_stop","index":2}`) +
		sseEvent("some_future_event", `{"type":"some_future_event"}`) +
		sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":3}}`) +
		sseEvent("message_stop", `{"type":"message_stop"}`)
	n := 0
	resp, err := readStream(strings.NewReader(stream), provider.NewToolNames(nameRule), func(*abi.GenerateResponseChunk) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"model","content":[{"custom":{"anthropic":{"data":"opaque","type":"redacted_thinking"}}},` +
		`{"custom":{"anthropic":{"id":"srvtoolu_1","input":{"query":"go"},"name":"web_search","type":"server_tool_use"}}},` +
		`{"text":"Go is fun.","metadata":{"citations":[{"type":"web_search_result_location","url":"https://go.dev"}]}}]}`
	if s := jsonOf(t, resp.Message); s != want || resp.FinishReason != abi.FinishLength || n != 3 {
		t.Errorf("message =\n%s\nwant\n%s\nfinish %s, %d chunks", s, want, resp.FinishReason, n)
	}

	for name, tc := range map[string]struct {
		stream string
		code   abi.ErrorCode
		msg    string
	}{
		"error event": {start + sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), abi.CodeUnavailable, "overloaded_error: Overloaded"},
		"cut off":     {start + sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}`), abi.CodeUnavailable, "before message_stop"},
		"bad data":    {start + "event: content_block_delta\ndata: {nope\n\n", abi.CodeUnavailable, "malformed"},
		"bad tool json": {start + sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"x","input":{}}}`) +
			sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`) +
			sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`), abi.CodeUnavailable, "not JSON"},
		"delta before start": {start + sseEvent("content_block_delta", `{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}`), abi.CodeUnavailable, "has not started"},
	} {
		_, err := readStream(strings.NewReader(tc.stream), provider.NewToolNames(nameRule), func(*abi.GenerateResponseChunk) error { return nil })
		if !isCode(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s containing %q", name, err, tc.code, tc.msg)
		}
	}
	// A caller that stops listening stops the stream.
	stop := abi.Errorf(abi.CodeInternal, "stop")
	if _, err := readStream(strings.NewReader(strings.Join(toolStream, "")), provider.NewToolNames(nameRule), func(*abi.GenerateResponseChunk) error { return stop }); err != stop {
		t.Errorf("emit error: %v", err)
	}
}
