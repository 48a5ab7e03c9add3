package host_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
)

type traceKey struct{}

// traceLogs is a slog handler that keeps the trace value of the contexts plugin log
// lines are logged under.
type traceLogs struct{ traces []any }

func (l *traceLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *traceLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *traceLogs) WithGroup(string) slog.Handler            { return l }
func (l *traceLogs) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "plugin log" {
		l.traces = append(l.traces, ctx.Value(traceKey{}))
	}
	return nil
}

// TestPluginLogsCarryTheCallersContext: a plugin's log line is logged under its
// caller's context, whose values (a trace's span) a handler may read, though the log
// function runs without the call's own context.
func TestPluginLogsCarryTheCallersContext(t *testing.T) {
	logs := &traceLogs{}
	h, r := newHost(t, host.WithLogger(slog.New(logs)))
	load(t, h, "testdata/hostcheck", host.Manifest{})
	ctx := context.WithValue(context.Background(), traceKey{}, "trace-1")
	if _, err := runWith(ctx, r, "hostcheck/log", map[string]any{"text": "hello"}); err != nil {
		t.Fatal(err)
	}
	if len(logs.traces) != 1 || logs.traces[0] != "trace-1" {
		t.Errorf("the plugin's log lines were logged with traces %v, want [trace-1]", logs.traces)
	}
}
