package routes

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzMessageScanner: whatever the message and however the answer is cut into chunks,
// the scanner yields exactly what encoding/json decodes, and the same as reading the
// answer whole. Respond reads whole answers, RespondStream chunks: they must agree.
func FuzzMessageScanner(f *testing.F) {
	f.Add("Hello, Ann!", "x", uint8(3), uint8(7))
	f.Add("quote \" backslash \\ tab \t newline \n", "", uint8(1), uint8(2))
	f.Add("emoji 😀 and é, <html> & \u2028", "😀", uint8(5), uint8(1))
	f.Add("\xff\xfe invalid", "\xc3", uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, message, other string, cut1, cut2 uint8) {
		answer, err := json.Marshal(map[string]any{"before": other, "message": message, "nested": map[string]any{"message": other}})
		if err != nil {
			t.Skip()
		}
		var want struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(answer, &want); err != nil {
			t.Fatal(err)
		}
		text := "```json\n" + string(answer) + "\n```"
		whole := scanMessage(text)
		if whole != want.Message {
			t.Fatalf("whole: %q, want %q (answer %s)", whole, want.Message, answer)
		}
		var s messageScanner
		got := ""
		step := []int{int(cut1%16) + 1, int(cut2%16) + 1}
		for i, k := 0, 0; i < len(text); k++ {
			j := min(i+step[k%2], len(text))
			got += s.Write(text[i:j])
			i = j
		}
		if got != whole {
			t.Fatalf("in chunks: %q, whole: %q", got, whole)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 out: %q", got)
		}
	})
}

// FuzzMessageScannerRaw: on any text at all, chunked reading equals whole reading.
func FuzzMessageScannerRaw(f *testing.F) {
	f.Add(`{"message": "a\ud83d\ude00b\u00e9", "x": [1, {"message": "no"}]}`, uint8(1))
	f.Add(`{"a": "}", "message": "\ud800x"}`, uint8(2))
	f.Add(`noise {"message":"ok"} {"message":"second"}`, uint8(3))
	f.Fuzz(func(t *testing.T, text string, cut uint8) {
		whole := scanMessage(text)
		var s messageScanner
		got := ""
		n := int(cut%7) + 1
		for i := 0; i < len(text); i += n {
			got += s.Write(text[i:min(i+n, len(text))])
		}
		if got != whole {
			t.Fatalf("chunks of %d: %q, whole: %q", n, got, whole)
		}
	})
}
