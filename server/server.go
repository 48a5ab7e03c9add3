// Package server serves a deployment's agents to clients in any language: an HTTP API
// whose turns stream as server-sent events (documented by the OpenAPI document at
// /openapi.json), WebSocket connections holding a session over many turns, an
// OpenAI-compatible chat completions endpoint, a web chat page, health checks and
// Prometheus metrics; and, on a port of its own, Genkit's reflection API, so Genkit's
// CLI and Developer UI list and run Terrarium's actions.
//
// It is transport only: what an agent does is package deploy's and agent/session's.
// Sessions opened through any transport are one: a turn sent while another runs on
// the same session, from any connection, is refused (409).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/tenant"
)

// Defaults of the options.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultIdleTimeout  = 10 * time.Minute
)

// Server serves a deployment. Its Handler is the public API; ReflectionHandler is
// Genkit's reflection API, for development only.
type Server struct {
	dep      *deploy.Deployment
	sessions *sessions
	metrics  *metrics
	promh    http.Handler
	maxBody  int64
	idle     time.Duration
	log      *slog.Logger
	handler  http.Handler
	stop     context.CancelFunc
	janitor  chan struct{}

	// Of a multi-tenant server (WithTenants): the tenants by ID, their keys, the
	// admin key (nil: no admin API).
	tenants map[string]*Tenant
	keys    *tenant.Keys
	admin   *tenant.AdminKey

	draining atomic.Bool
	sockets  sync.WaitGroup // WebSocket connections being served
	// drainCtx ends as the server starts draining (drained), which closes its
	// WebSockets.
	drainCtx context.Context
	drained  context.CancelFunc
}

// Option configures New.
type Option interface {
	apply(*Server) error
}

type optionFunc func(*Server) error

func (f optionFunc) apply(s *Server) error { return f(s) }

// WithMaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes); a larger one
// is refused with 413.
func WithMaxBodyBytes(n int64) Option {
	return optionFunc(func(s *Server) error {
		if n <= 0 {
			return fmt.Errorf("server: WithMaxBodyBytes(%d): want a positive limit", n)
		}
		s.maxBody = n
		return nil
	})
}

// WithIdleTimeout closes sessions no turn ran on for d (default DefaultIdleTimeout);
// kept sessions reopen on their next turn. Zero keeps them open.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(s *Server) error {
		s.idle = d
		return nil
	})
}

// WithMetrics records the server's metrics with mp and serves h at /metrics (see
// NewPrometheus). Without it, metrics go to OpenTelemetry's global provider and
// /metrics is not served.
func WithMetrics(mp metric.MeterProvider, h http.Handler) Option {
	return optionFunc(func(s *Server) error {
		m, err := newMetrics(mp)
		if err != nil {
			return fmt.Errorf("server: metrics: %w", err)
		}
		s.metrics, s.promh = m, h
		return nil
	})
}

// WithLogger sets the server's logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(s *Server) error {
		s.log = l
		return nil
	})
}

// New returns a server for a deployment (nil with WithTenants, which gives the
// tenants' deployments instead). Call Shutdown to stop it.
func New(d *deploy.Deployment, opts ...Option) (*Server, error) {
	s := &Server{dep: d, maxBody: DefaultMaxBodyBytes, idle: DefaultIdleTimeout, log: slog.Default()}
	for _, o := range opts {
		if err := o.apply(s); err != nil {
			return nil, err
		}
	}
	if s.metrics == nil {
		m, err := newMetrics(otel.GetMeterProvider())
		if err != nil {
			return nil, fmt.Errorf("server: metrics: %w", err)
		}
		s.metrics = m
	}
	if (d == nil) == (s.tenants == nil) {
		return nil, errors.New("server: New: give a deployment, or tenants (WithTenants), not both")
	}
	base, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.drainCtx, s.drained = context.WithCancel(base)
	s.sessions = newSessions(base, s.metrics, s.log)
	for _, t := range s.tenants {
		if t.Limiter == nil {
			continue
		}
		t.Limiter.SetStorage(t.Deployment.StoredBytes)
		for _, a := range t.Deployment.Agents() {
			s.sessions.limits[a] = t.Limiter
		}
	}
	s.handler = s.routes()
	s.janitor = make(chan struct{})
	go s.closeIdle(base)
	return s, nil
}

// Handler returns the server's HTTP handler: the API, WebSocket, OpenAI-compatible
// endpoints, the web page, health and metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// closeIdle closes idle sessions now and then, until ctx ends.
func (s *Server) closeIdle(ctx context.Context) {
	defer close(s.janitor)
	if s.idle <= 0 {
		return
	}
	t := time.NewTicker(s.idle / 2)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.sessions.closeIdle(time.Now().Add(-s.idle))
		case <-ctx.Done():
			return
		}
	}
}

// Shutdown stops the server gracefully: /readyz fails and new turns are refused
// (503), running turns finish until ctx ends (then they are cancelled), WebSocket
// connections end after their turn, every open session is closed, saving its last
// snapshot, and the turns detached in this process (by their clients, or by Drain)
// may settle until ctx ends (then they are aborted). Drain first to let turns finish
// while the HTTP servers still answer; stop the HTTP servers (http.Server.Shutdown)
// so no new request arrives, and close the deployment after, which makes the
// snapshots durable.
func (s *Server) Shutdown(ctx context.Context) error {
	s.startDrain()
	err := s.sessions.shutdown(ctx)
	s.sockets.Wait()
	err = errors.Join(err, s.sessions.settleDetached(ctx))
	s.stop()
	<-s.janitor
	return err
}

// statusHandler answers a health check.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyTimeout bounds the store check of /readyz: a probe that hangs tells a load
// balancer nothing.
const readyTimeout = 2 * time.Second

// readyz answers whether the server takes turns: not while it shuts down, nor while
// the snapshot store cannot be reached (503 store_unavailable), since every turn of a
// kept session would fail.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeError(w, r, ErrShuttingDown)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.dep.Ready(ctx); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
