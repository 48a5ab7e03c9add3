// Package sse reads server-sent events (the text/event-stream format model providers
// stream their answers in), as they arrive. It imports only the standard library, so
// plugins can use it.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Event is one dispatched event.
type Event struct {
	// Event is the event's type ("message" when the stream names none).
	Event string
	// Data is the event's data, its lines joined with "\n".
	Data string
	// ID is the last event ID the stream set.
	ID string
}

// MaxLine bounds a line of the stream, 4 MiB.
const MaxLine = 4 << 20

// Reader reads events from a stream.
type Reader struct {
	s    *bufio.Scanner
	id   string
	done bool
}

// NewReader returns a Reader of the stream r.
func NewReader(r io.Reader) *Reader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), MaxLine)
	s.Split(scanLines)
	return &Reader{s: s}
}

// Next returns the next event, waiting for it to arrive. It returns io.EOF when the
// stream ends; an event cut off by the end of the stream is not returned.
func (r *Reader) Next() (*Event, error) {
	if r.done {
		return nil, io.EOF
	}
	var data strings.Builder
	hasData := false
	typ := ""
	for r.s.Scan() {
		line := r.s.Text()
		if line == "" {
			if !hasData {
				typ = ""
				continue
			}
			if typ == "" {
				typ = "message"
			}
			return &Event{Event: typ, Data: data.String(), ID: r.id}, nil
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment, often a keep-alive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "event":
			typ = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				r.id = value
			}
		}
	}
	r.done = true
	if err := r.s.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("sse: a line exceeds %d bytes", MaxLine)
		}
		return nil, err
	}
	return nil, io.EOF
}

// scanLines splits at "\n", "\r\n" or a lone "\r", as the format allows.
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		// A '\r': a "\r\n" pair counts once, but wait to see the next byte.
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}
