package host

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// BenchmarkInputBuffer encodes a 1 MiB input into a buffer from the pool, as a call
// does, against a fresh buffer each time, what a call got when a buffer that grew
// past 64 KiB was not given back; the two take turns.
func BenchmarkInputBuffer(b *testing.B) {
	input := map[string]any{"text": strings.Repeat("x", 1<<20)}
	encode := []func() error{
		func() error {
			in := &inputBuffer{}
			in.enc = json.NewEncoder(&in.buf)
			_, err := in.encode(input)
			return err
		},
		func() error {
			in := newInputBuffer()
			defer in.release()
			_, err := in.encode(input)
			return err
		},
	}
	spent := takeTurns(b, len(encode), func(v int) time.Duration {
		start := time.Now()
		if err := encode[v](); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	})
	b.ReportMetric(float64(spent[0].Microseconds())/float64(b.N), "µs/fresh")
	b.ReportMetric(float64(spent[1].Microseconds())/float64(b.N), "µs/pooled")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "pooled/fresh")
}
