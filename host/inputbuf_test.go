package host

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// An input encoded into a reused buffer is what json.Marshal makes of it, byte for
// byte, however the buffer was used before.
func TestInputBufferEncodesAsMarshal(t *testing.T) {
	buf := newInputBuffer()
	defer buf.release()
	for _, v := range []any{
		map[string]any{"text": strings.Repeat("x", 1<<10), "html": "<a & b>"},
		map[string]any{"n": 1},
		"short",
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := buf.encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("encode(%.40v) = %.60s, want %.60s", v, got, want)
		}
	}
	if _, err := buf.encode(make(chan int)); err == nil {
		t.Error("encoding a channel did not fail")
	}
}
