package abi_test

import (
	"encoding/json"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

// FuzzMessageDecode feeds arbitrary bytes to the message decoder, which reads what
// plugins and clients send. Whatever decodes must encode again and decode to the same
// JSON.
func FuzzMessageDecode(f *testing.F) {
	for _, ex := range genkitExamples {
		f.Add([]byte(`{"role":"user","content":[` + ex + `]}`))
	}
	f.Add([]byte(`{"role":"model","content":[{"text":"a","metadata":{"x":[1,{"y":null}]}}]}`))
	f.Add([]byte(`{"role":"tool","content":[{"toolResponse":{"name":"t","content":[{"text":"x"}]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m abi.Message
		if err := json.Unmarshal(data, &m); err != nil {
			return
		}
		out, err := json.Marshal(&m)
		if err != nil {
			t.Fatalf("decoded %s but cannot encode it: %v", data, err)
		}
		var again abi.Message
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("encoded %s cannot be decoded: %v", out, err)
		}
		out2, _ := json.Marshal(&again)
		if string(out) != string(out2) {
			t.Fatalf("unstable encoding:\n%s\n%s", out, out2)
		}
	})
}

// FuzzExtractJSON checks that whatever ExtractJSON returns is valid JSON.
func FuzzExtractJSON(f *testing.F) {
	f.Add("```json\n{\"a\":1}\n```")
	f.Add(`prose {"a": [1, 2]} more`)
	f.Add("```\n[1,\n```")
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := abi.ExtractJSON(s)
		if err == nil && !json.Valid(raw) {
			t.Fatalf("ExtractJSON(%q) = %q, not valid JSON", s, raw)
		}
	})
}

// FuzzAppendJSONString holds the hand-written string encoding to encoding/json's, byte
// for byte, whatever the string: escapes, HTML characters, invalid UTF-8, U+2028.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain text", `quote " and \ back`, "a<b", "a>b", "a&b", "tab\tnew\nline\x00", "é ü 日本", "\u2028\u2029", "\xff\xfe bad", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := abi.AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendJSONString(%q) = %s, want x%s", s, got, want)
		}
	})
}
