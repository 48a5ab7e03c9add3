package host

import (
	"context"
	"log/slog"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/time/rate"
)

// Limits of plugins' log lines (ABI.md, section 4).
const (
	logLinesPerSecond = 50
	logBurst          = 200
	maxLogBytes       = 8 << 10
)

// pluginLogs writes one plugin's log lines into the host's log. A line is always
// structured: the plugin's text is the attribute "message" (which handlers quote),
// never the record's message (which the default handler writes as it is, so that a
// newline in it would forge a line of the host's own). Lines are rate-limited per
// plugin; what is dropped is counted and reported after the call.
type pluginLogs struct {
	limit   *rate.Limiter
	dropped atomic.Int64
}

func newPluginLogs() *pluginLogs {
	return &pluginLogs{limit: rate.NewLimiter(logLinesPerSecond, logBurst)}
}

// log writes one line the plugin logged in the call bound to b.
func (l *pluginLogs) log(ctx context.Context, logger *slog.Logger, b *binding, level slog.Level, msg []byte) {
	if !logger.Enabled(ctx, level) {
		return
	}
	if !l.limit.Allow() {
		l.dropped.Add(1)
		return
	}
	if len(msg) > maxLogBytes {
		cut := maxLogBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = append(msg[:cut:cut], "… (truncated)"...)
	}
	attrs := []slog.Attr{slog.String("plugin", b.plugin.desc.Name), slog.String("message", string(msg))}
	if b.session != nil {
		attrs = append(attrs, slog.String("session", b.session.ID()))
	}
	logger.LogAttrs(ctx, level, "plugin log", attrs...)
}

// reportDropped logs how many of the plugin's lines were dropped since the last report.
func (l *pluginLogs) reportDropped(logger *slog.Logger, plugin string) {
	if n := l.dropped.Swap(0); n > 0 {
		logger.Warn("plugin log lines dropped", "plugin", plugin, "dropped", n, "linesPerSecond", logLinesPerSecond)
	}
}
