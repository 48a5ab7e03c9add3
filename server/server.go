// Package server serves a deployment's agents to clients in any language: an HTTP API
// whose turns stream as server-sent events (documented by the OpenAPI document at
// /openapi.json), WebSocket connections holding a session over many turns, an
// OpenAI-compatible chat completions endpoint, MCP (the agents' tools), a web chat
// page, health checks and Prometheus metrics; and, on a port of its own, Genkit's
// reflection API, so Genkit's CLI and Developer UI list and run Terrarium's actions.
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
	"strings"
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
	// DefaultWebSocketsPerSession bounds the WebSockets holding one session (a tenant's
	// WebSockets in all are its quota's, tenant.Quotas.WebSockets).
	DefaultWebSocketsPerSession = 4
)

// Timeouts bound how long the server waits for a slow or silent peer, so that none
// holds a connection, a turn's stream or a tenant's place for ever. A zero field takes
// its default (DefaultTimeouts).
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included: a body that trickles in is
	// cut off, and a refusal that leaves the body unread (401) is still answered.
	Read time.Duration
	// Write bounds each write to a client: an answer, and each chunk of a stream (a
	// server-sent event, a WebSocket message). A client that stops reading loses its
	// stream; its turn runs on to its end, unseen, and frees its place.
	Write time.Duration
	// Idle bounds the wait of a keep-alive connection for its next request.
	Idle time.Duration
	// WebSocketIdle closes a WebSocket on which no turn ran, and whose client sent
	// nothing, for this long.
	WebSocketIdle time.Duration
}

// DefaultTimeouts are the timeouts of a server not given others.
var DefaultTimeouts = Timeouts{
	ReadHeader:    10 * time.Second,
	Read:          time.Minute,
	Write:         30 * time.Second,
	Idle:          2 * time.Minute,
	WebSocketIdle: 10 * time.Minute,
}

// Server serves a deployment. Its Handler is the public API; ReflectionHandler is
// Genkit's reflection API, for development only.
type Server struct {
	dep      *deploy.Deployment
	sessions *sessions
	metrics  *metrics
	promh    http.Handler
	maxBody  int64
	idle     time.Duration
	timeouts Timeouts
	perSess  int      // WebSockets holding one session, at most
	hosts    []string // the Host names a server of one deployment answers, besides loopback names and addresses
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
	socksMu  sync.Mutex
	socks    map[*wsConn]struct{} // the WebSockets open, which Shutdown cuts past its deadline
	// drainCtx ends as the server starts draining (drained), which closes its
	// WebSockets.
	drainCtx context.Context
	drained  context.CancelFunc
	mcp      mcpEndpoints
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

// WithTimeouts sets the bounds on slow and silent peers (see Timeouts); zero fields
// keep their defaults. HTTPServer applies those of the connections.
func WithTimeouts(t Timeouts) Option {
	return optionFunc(func(s *Server) error {
		for _, d := range []time.Duration{t.ReadHeader, t.Read, t.Write, t.Idle, t.WebSocketIdle} {
			if d < 0 {
				return fmt.Errorf("server: WithTimeouts(%+v): want no negative timeout", t)
			}
		}
		for _, f := range []struct{ to, from *time.Duration }{
			{&s.timeouts.ReadHeader, &t.ReadHeader}, {&s.timeouts.Read, &t.Read}, {&s.timeouts.Write, &t.Write},
			{&s.timeouts.Idle, &t.Idle}, {&s.timeouts.WebSocketIdle, &t.WebSocketIdle},
		} {
			if *f.from > 0 {
				*f.to = *f.from
			}
		}
		return nil
	})
}

// WithWebSocketsPerSession bounds the WebSockets holding one session at once (default
// DefaultWebSocketsPerSession); one more is refused with 429.
func WithWebSocketsPerSession(n int) Option {
	return optionFunc(func(s *Server) error {
		if n <= 0 {
			return fmt.Errorf("server: WithWebSocketsPerSession(%d): want a positive bound", n)
		}
		s.perSess = n
		return nil
	})
}

// WithAllowedHosts names the hosts a server of one deployment answers under, besides
// loopback names and IP addresses: a request with another Host header is refused
// (403), since a web page can reach a server on the reader's machine or network under
// a name it controls (DNS rebinding). A multi-tenant server checks keys instead.
func WithAllowedHosts(hosts ...string) Option {
	return optionFunc(func(s *Server) error {
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, "/ ,") {
				return fmt.Errorf("server: WithAllowedHosts: %q is not a host name (give each host on its own)", h)
			}
			s.hosts = append(s.hosts, strings.ToLower(h))
		}
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
	s := &Server{dep: d, maxBody: DefaultMaxBodyBytes, idle: DefaultIdleTimeout, timeouts: DefaultTimeouts,
		perSess: DefaultWebSocketsPerSession, log: slog.Default(), socks: map[*wsConn]struct{}{}}
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
		for _, a := range t.Deployment.Agents() {
			s.sessions.tenants[a] = t.ID
		}
		if t.Limiter == nil {
			continue
		}
		t.Limiter.SetStorage(t.Deployment.StoredBytes)
		for _, a := range t.Deployment.Agents() {
			s.sessions.limits[a] = t.Limiter
		}
	}
	s.handler = s.guard(s.routes())
	s.janitor = make(chan struct{})
	go s.closeIdle(base)
	return s, nil
}

// Handler returns the server's HTTP handler: the API, WebSocket, OpenAI-compatible
// endpoints, MCP, the web page, health and metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer returns an http.Server serving h (Handler, or ReflectionHandler) with the
// server's timeouts on its connections. Every write of h's is bounded by the Write
// timeout, from the write: a stream lasts as long as its chunks keep coming.
func (s *Server) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: s.timeouts.ReadHeader, ReadTimeout: s.timeouts.Read, IdleTimeout: s.timeouts.Idle}
}

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
// (503), running turns finish until ctx ends (then they are cancelled), WebSockets
// close at once if no turn runs on them and after their turn otherwise, every open
// session is closed, saving its last snapshot, and the turns detached in this process
// (by their clients, or by Drain) may settle until ctx ends (then they are aborted).
// Once ctx ends nothing waits any more: running turns are cancelled (what they
// changed since their session's last snapshot is lost), WebSockets are cut, and
// Shutdown returns. Drain first to let turns finish while the HTTP servers still
// answer; stop the HTTP servers (http.Server.Shutdown, then Close past the same
// deadline) so no new request arrives and no stream outlives it, and close the
// deployment after, which makes the snapshots durable.
func (s *Server) Shutdown(ctx context.Context) error {
	s.startDrain()
	err := s.sessions.shutdown(ctx)
	if ctx.Err() != nil {
		s.eachSocket(func(ws *wsConn) { ws.c.CloseNow() })
	}
	waitFor(ctx, &s.sockets)
	err = errors.Join(err, s.sessions.settleDetached(ctx))
	s.stop()
	<-s.janitor
	return err
}

// waitFor waits for wg until ctx ends, and reports whether wg was done.
func waitFor(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// statusHandler answers a health check.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyTimeout bounds the store check of /readyz: a probe that hangs tells a load
// balancer nothing.
const readyTimeout = 2 * time.Second

// readyz answers whether the server takes turns: not while it shuts down, nor while
// a snapshot store of its deployment, or of any tenant's, cannot be reached (503
// store_unavailable), since every turn of a kept session there would fail.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeError(w, r, ErrShuttingDown)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	deps := []*deploy.Deployment{s.dep}
	if s.tenants != nil {
		deps = deps[:0]
		for _, t := range s.tenants {
			deps = append(deps, t.Deployment)
		}
	}
	for _, d := range deps {
		if err := d.Ready(ctx); err != nil {
			writeError(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
