package mcp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLogWriter checks that a command's standard error is logged line by line, lines
// split across writes logged whole, and that a server writing without end of line
// cannot make the client hold more than maxLogLine bytes.
func TestLogWriter(t *testing.T) {
	var out bytes.Buffer
	w := &logWriter{log: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))}
	for _, s := range []string{"starting", " up\nready\n", "half"} {
		w.Write([]byte(s))
	}
	if got := out.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, `line="starting up"`) || !strings.Contains(got, "line=ready") {
		t.Errorf("logged %q, want the lines \"starting up\" and \"ready\"", got)
	}
	chunk := bytes.Repeat([]byte("x"), 1024)
	for range 3 * maxLogLine / len(chunk) {
		w.Write(chunk)
		if len(w.line) > maxLogLine {
			t.Fatalf("the writer holds %d bytes of an unfinished line, more than %d", len(w.line), maxLogLine)
		}
	}
}
