package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func all(t *testing.T, stream string) []Event {
	t.Helper()
	r := NewReader(strings.NewReader(stream))
	var out []Event
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *e)
	}
}

func TestReader(t *testing.T) {
	got := all(t, ": keep-alive\n\ndata: {\"a\":1}\n\nevent: message_start\ndata: one\ndata: two\nid: 7\n\r\ndata:no-space\r\rdata: cut off at the end")
	want := []Event{
		{Event: "message", Data: `{"a":1}`},
		{Event: "message_start", Data: "one\ntwo", ID: "7"},
		{Event: "message", Data: "no-space", ID: "7"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestReaderDeliversEventsAsTheyArrive: an event is returned as soon as its blank line
// arrives, not when the stream ends.
func TestReaderDeliversEventsAsTheyArrive(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr)
	firstRead := make(chan struct{})
	go func() {
		pw.Write([]byte("data: first\n\n"))
		<-firstRead // the second event is written only once the first was delivered
		pw.Write([]byte("data: second\n\n"))
		pw.Close()
	}()
	e, err := r.Next()
	close(firstRead)
	if err != nil || e.Data != "first" {
		t.Fatalf("first event %v, %v", e, err)
	}
	if e, err := r.Next(); err != nil || e.Data != "second" {
		t.Fatalf("second event %v, %v", e, err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add("data: x\n\n")
	f.Add("event: a\r\ndata: b\r\n\r\n")
	f.Add(":\n\ndata\n\nid: \x00\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := NewReader(strings.NewReader(s))
		for range 10000 {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}
