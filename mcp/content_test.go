package mcp

import (
	"encoding/json"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzToolResult feeds tool results as any server may send them to what turns them
// into an agent tool's output or error: whatever decodes must convert without panic.
func FuzzToolResult(f *testing.F) {
	for _, seed := range []string{
		`{"content":[{"type":"text","text":"4"}]}`,
		`{"content":[{"type":"text","text":"{\"sum\":4}"}],"structuredContent":{"sum":4}}`,
		`{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},{"type":"audio","data":"","mimeType":"audio/wav"}]}`,
		`{"content":[{"type":"resource_link","uri":"file:///a","name":"a"},{"type":"resource","resource":{"uri":"x:","blob":"AAEC"}}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"x:","text":"hi"}}]}`,
		`{"content":[],"isError":true}`,
		`{"content":[{"type":"text","text":"no"}],"isError":true,"_meta":{"terrarium/error":{"code":"not_found","message":"no"}}}`,
		`{"content":[{"type":"text","text":"no"}],"isError":true,"_meta":{"terrarium/error":"garbage"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var res mcpsdk.CallToolResult
		if json.Unmarshal(data, &res) != nil {
			return
		}
		if res.IsError {
			if err := resultError(&res); err == nil || err.Error() == "" {
				t.Fatalf("an error result gave error %v", err)
			}
			return
		}
		out := toolOutput(&res)
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("output %#v does not encode: %v", out, err)
		}
	})
}
