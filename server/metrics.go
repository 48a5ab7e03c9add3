package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/terrarium-ai/terrarium/agent/session"
)

// metrics are the server's own OpenTelemetry metrics (package deploy records model,
// tool and plugin calls):
//
//	terrarium.turns            counter        agent, outcome (ok, refused, failed,
//	                                          aborted, error), code (of a failed turn)
//	terrarium.turn.duration    histogram, s   agent, outcome
//	terrarium.sessions.live    up-down        sessions open on this server
type metrics struct {
	turns        metric.Int64Counter
	turnDuration metric.Float64Histogram
	liveSessions metric.Int64UpDownCounter
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := mp.Meter("github.com/terrarium-ai/terrarium/server")
	var ms metrics
	var errs [3]error
	ms.turns, errs[0] = m.Int64Counter("terrarium.turns", metric.WithDescription("Turns run, by agent and outcome, failed ones by code."))
	ms.turnDuration, errs[1] = m.Float64Histogram("terrarium.turn.duration", metric.WithUnit("s"), metric.WithDescription("Duration of turns, from input to end of turn."))
	ms.liveSessions, errs[2] = m.Int64UpDownCounter("terrarium.sessions.live", metric.WithDescription("Sessions open on this server."))
	return &ms, errors.Join(errs[:]...)
}

// turn counts a turn: failed with failure's code, aborted by its client, refused (its
// input), ended by err, or ok.
func (m *metrics) turn(ctx context.Context, agent string, d time.Duration, failure *session.TurnError, aborted bool, err error) {
	outcome := "ok"
	var te *session.TurnError
	switch {
	case failure != nil:
		outcome = "failed"
	case aborted:
		outcome = "aborted"
	case err == nil:
	case errors.As(err, &te):
		outcome = "refused"
	default:
		outcome = "error"
	}
	kvs := []attribute.KeyValue{attribute.String("agent", agent), attribute.String("outcome", outcome)}
	m.turnDuration.Record(ctx, d.Seconds(), metric.WithAttributes(kvs...))
	if failure != nil {
		kvs = append(kvs, attribute.String("code", string(failure.Code)))
	}
	m.turns.Add(ctx, 1, metric.WithAttributes(kvs...))
}

// NewPrometheus returns a meter provider whose metrics the handler serves in the
// Prometheus text format: give the provider to deploy.WithMeterProvider and both to
// WithMetrics.
func NewPrometheus() (*sdkmetric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, fmt.Errorf("server: the Prometheus exporter: %w", err)
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)), promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}
