package sdk

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// Logger returns a structured logger that writes through the host's log: each record
// becomes one message, "message key=value ...", at the record's level (slog's levels
// are the protocol's). The host decides what it keeps.
//
// To make it the default logger of the plugin: slog.SetDefault(sdk.Logger()).
func Logger() *slog.Logger {
	s := &logSink{}
	text := slog.NewTextHandler(&s.buf, &slog.HandlerOptions{
		Level: slog.LevelDebug - 4,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				switch a.Key {
				case slog.TimeKey, slog.LevelKey, slog.MessageKey:
					return slog.Attr{}
				}
			}
			return a
		},
	})
	return slog.New(&logHandler{sink: s, text: text})
}

// logSink is the buffer the text handlers of one Logger (and the handlers derived from
// it with WithAttrs and WithGroup) format records into.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// logHandler is the slog.Handler behind Logger.
type logHandler struct {
	sink *logSink
	// text is the sink's text handler with this handler's attributes and groups.
	text slog.Handler
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	s := h.sink
	s.mu.Lock()
	s.buf.Reset()
	// The text handler only fails when its writer does, and a bytes.Buffer does not.
	_ = h.text.Handle(ctx, r)
	attrs := strings.TrimSpace(s.buf.String())
	s.mu.Unlock()
	msg := r.Message
	if attrs != "" {
		if msg != "" {
			msg += " "
		}
		msg += attrs
	}
	Log(plugin.LogLevel(r.Level), msg)
	return nil
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{sink: h.sink, text: h.text.WithAttrs(attrs)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{sink: h.sink, text: h.text.WithGroup(name)}
}
