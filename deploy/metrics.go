package deploy

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
)

// meters records what the agents' model, tool and handler calls cost, and what their
// plugins did, as OpenTelemetry metrics:
//
//	terrarium.model.duration   histogram, s   model, outcome
//	terrarium.tool.duration    histogram, s   tool, outcome
//	terrarium.plugin.calls     counter        plugin, kind (model, tool, handler)
//	terrarium.plugin.faults    counter        plugin, kind
type meters struct {
	model, tool   metric.Float64Histogram
	calls, faults metric.Int64Counter
}

func newMeters(mp metric.MeterProvider) (*meters, error) {
	m := mp.Meter("github.com/terrarium-ai/terrarium/deploy")
	var ms meters
	var errs [4]error
	ms.model, errs[0] = m.Float64Histogram("terrarium.model.duration", metric.WithUnit("s"), metric.WithDescription("Duration of model calls."))
	ms.tool, errs[1] = m.Float64Histogram("terrarium.tool.duration", metric.WithUnit("s"), metric.WithDescription("Duration of tool calls."))
	ms.calls, errs[2] = m.Int64Counter("terrarium.plugin.calls", metric.WithDescription("Calls into plugins."))
	ms.faults, errs[3] = m.Int64Counter("terrarium.plugin.faults", metric.WithDescription("Plugin calls that faulted (trap, timeout, memory, invalid output)."))
	return &ms, errors.Join(errs[:]...)
}

// outcome names how a call ended, for a metric's attribute.
func outcome(err error) string {
	var interrupt *agent.InterruptError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &interrupt):
		return "interrupted"
	case errors.Is(err, host.ErrPluginFault):
		return "fault"
	}
	return "error"
}

// plugin counts a call of a plugin's action.
func (m *meters) plugin(ctx context.Context, plugin, kind string, err error) {
	if plugin == "" {
		return
	}
	attrs := metric.WithAttributes(attribute.String("plugin", plugin), attribute.String("kind", kind))
	m.calls.Add(ctx, 1, attrs)
	if errors.Is(err, host.ErrPluginFault) {
		m.faults.Add(ctx, 1, attrs)
	}
}

// middleware measures every model and tool call of an agent.
func (m *meters) middleware(pluginOf func(string) string) agent.Middleware {
	return agent.Middleware{
		Model: func(model agent.Model, next agent.ModelFunc) agent.ModelFunc {
			return func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
				start := time.Now()
				resp, err := next(ctx, req, cb)
				m.model.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
					attribute.String("model", model.Name()), attribute.String("outcome", outcome(err))))
				m.plugin(ctx, pluginOf(model.Name()), "model", err)
				return resp, err
			}
		},
		Tool: func(tool agent.Tool, next agent.ToolFunc) agent.ToolFunc {
			return func(ctx context.Context, input any) (any, error) {
				start := time.Now()
				out, err := next(ctx, input)
				m.tool.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
					attribute.String("tool", tool.Name()), attribute.String("outcome", outcome(err))))
				m.plugin(ctx, pluginOf(tool.Name()), "tool", err)
				return out, err
			}
		},
	}
}

// recordUsage hands the usage of every model call that reports one to record.
func recordUsage(record func(context.Context, *abi.GenerationUsage)) agent.Middleware {
	return agent.Middleware{
		Model: func(_ agent.Model, next agent.ModelFunc) agent.ModelFunc {
			return func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
				resp, err := next(ctx, req, cb)
				if resp != nil && resp.Usage != nil {
					record(ctx, resp.Usage)
				}
				return resp, err
			}
		},
	}
}

// handler counts the calls of a plugin's handler.
func (m *meters) handler(h agent.Handler, plugin string) agent.Handler {
	if plugin == "" {
		return h
	}
	return &countedHandler{Handler: h, m: m, plugin: plugin}
}

type countedHandler struct {
	agent.Handler
	m      *meters
	plugin string
}

func (h *countedHandler) Handle(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error) {
	d, err := h.Handler.Handle(ctx, in)
	h.m.plugin(ctx, h.plugin, "handler", err)
	return d, err
}
