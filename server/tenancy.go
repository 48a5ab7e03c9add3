package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/tenant"
)

// Tenant is one tenant of a multi-tenant server: its agents, and its quotas.
type Tenant struct {
	// ID is the tenant's, as its API keys name it.
	ID string
	// Deployment holds the tenant's agents, built for it (deploy.WithTenant), so that
	// their plugin instances and stored sessions are its own.
	Deployment *deploy.Deployment
	// Limiter enforces the tenant's turn quotas; nil for none.
	Limiter *tenant.Limiter
}

// limiter returns the tenant's limiter, nil for none (or no tenant).
func (t *Tenant) limiter() *tenant.Limiter {
	if t == nil {
		return nil
	}
	return t.Limiter
}

// ErrUnauthenticated: a multi-tenant server got a request without a valid API key.
var ErrUnauthenticated = tenant.ErrUnauthenticated

// WithTenants makes the server multi-tenant. Every request but the health checks,
// /metrics, the OpenAPI document and the page's files needs an API key of keys (in
// "Authorization: Bearer <key>", or on a WebSocket the subprotocol bearer.<key>, as
// browsers can set no header there; never in the URL), or is refused (401), and sees its tenant's agents
// only, those the key may use: an agent, session or snapshot of another tenant is not
// found (404) as one that does not exist is, and every refusal is logged with the
// tenant and key. Each tenant's turns run under its limiter, refused with 429 and
// Retry-After past a quota. With an admin key, /admin/ makes and revokes keys (see
// docs/serving.md). New's deployment is then nil: the tenants' are served.
func WithTenants(keys *tenant.Keys, admin *tenant.AdminKey, tenants ...Tenant) Option {
	return optionFunc(func(s *Server) error {
		if keys == nil {
			return errors.New("server: WithTenants: no keys")
		}
		s.keys, s.admin = keys, admin
		s.tenants = map[string]*Tenant{}
		for i := range tenants {
			t := &tenants[i]
			if t.Deployment == nil {
				return fmt.Errorf("server: WithTenants: tenant %q has no deployment", t.ID)
			}
			if _, dup := s.tenants[t.ID]; dup {
				return fmt.Errorf("server: WithTenants: tenant %q is given twice", t.ID)
			}
			s.tenants[t.ID] = t
		}
		return nil
	})
}

// scope is what a request may reach: a deployment's agents, those its key may use.
type scope struct {
	dep     *deploy.Deployment
	tenant  string      // "" on a server of one deployment
	key     *tenant.Key // nil on a server of one deployment
	limiter *tenant.Limiter
}

// mayUse reports whether the request may reach the agent.
func (sc *scope) mayUse(a *deploy.Agent) bool { return sc.key == nil || sc.key.MayUse(a.Name) }

type scopeKey struct{}

// scopeOf returns the request's scope, which authenticate put in its context.
func scopeOf(r *http.Request) *scope { return r.Context().Value(scopeKey{}).(*scope) }

// authenticate gives each request the scope it may reach, refusing one without a
// valid key (which keyOf finds in the request) on a multi-tenant server. Denials, an
// unknown key's and a tenant's 404s alike, are logged: a tenant probing another's
// names shows in the log.
func (s *Server) authenticate(next http.Handler, keyOf func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.tenants == nil {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), scopeKey{}, &scope{dep: s.dep})))
			return
		}
		key, err := s.keys.Authenticate(keyOf(r))
		t := s.tenants[key.Tenant]
		if err == nil && t == nil {
			err = fmt.Errorf("%w: tenant %s is not served", ErrUnauthenticated, key.Tenant)
		}
		if err != nil {
			s.log.WarnContext(r.Context(), "request refused: no valid API key", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="terrarium"`)
			if strings.HasPrefix(r.URL.Path, "/v1/") {
				openAIError(w, r, ErrUnauthenticated) // what OpenAI clients read
				return
			}
			writeJSON(w, http.StatusUnauthorized, &abi.Error{Code: "unauthenticated", Message: ErrUnauthenticated.Error()})
			return
		}
		sc := &scope{dep: t.Deployment, tenant: t.ID, key: &key, limiter: t.Limiter}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc)))
		if rec.status == http.StatusNotFound || rec.status == http.StatusForbidden {
			s.log.WarnContext(r.Context(), "request denied", "tenant", t.ID, "key", key.ID, "method", r.Method,
				"path", r.URL.Path, "status", rec.status)
		}
	})
}

// statusRecorder remembers the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

// Unwrap gives http.ResponseController (flushing server-sent events, hijacking a
// WebSocket) the writer underneath.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// adminRoutes make and revoke API keys, with the admin key; a multi-tenant server
// serves them.
func (s *Server) adminRoutes() []route {
	return []route{
		{"GET", "/admin/tenants/{tenant}/keys", s.listKeys},
		{"POST", "/admin/tenants/{tenant}/keys", s.createKey},
		{"DELETE", "/admin/keys/{key}", s.revokeKey},
	}
}

// adminOnly refuses a request without the admin key: 401, logged.
func (s *Server) adminOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.admin == nil || !s.admin.Check(tenant.Bearer(r)) {
			s.log.WarnContext(r.Context(), "admin request refused: not the admin key", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="terrarium-admin"`)
			writeJSON(w, http.StatusUnauthorized, &abi.Error{Code: "unauthenticated", Message: "the admin API needs the admin key"})
			return
		}
		next(w, r)
	}
}

// KeyRequest asks for an API key of a tenant, narrowed to some of its agents.
type KeyRequest struct {
	Agents []string `json:"agents,omitempty"`
}

// KeyInfo describes an API key, without the key: its ID, tenant, agents, and when
// it was made and revoked.
type KeyInfo struct {
	ID      string     `json:"id"`
	Tenant  string     `json:"tenant"`
	Agents  []string   `json:"agents,omitempty"`
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

func keyInfo(k tenant.Key) KeyInfo {
	return KeyInfo{ID: k.ID, Tenant: k.Tenant, Agents: k.Agents, Created: k.Created, Revoked: k.Revoked}
}

// NewKey is an API key just made: Key is shown this once, and never again.
type NewKey struct {
	Key string `json:"key"`
	KeyInfo
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var req KeyRequest
	if r.ContentLength != 0 {
		if err := decodeBody(w, r, s.maxBody, &req); err != nil {
			writeError(w, r, err)
			return
		}
	}
	id := r.PathValue("tenant")
	if s.tenants[id] == nil {
		writeError(w, r, fmt.Errorf("%w: %q", tenant.ErrUnknownTenant, id))
		return
	}
	secret, key, err := s.keys.Create(id, req.Agents...)
	if err != nil {
		writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "API key created", "tenant", id, "key", key.ID, "agents", key.Agents)
	writeJSON(w, http.StatusCreated, NewKey{Key: secret, KeyInfo: keyInfo(*key)})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("tenant")
	if s.tenants[id] == nil {
		writeError(w, r, fmt.Errorf("%w: %q", tenant.ErrUnknownTenant, id))
		return
	}
	keys := []KeyInfo{}
	for _, k := range s.keys.List(id) {
		keys = append(keys, keyInfo(k))
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("key")
	if err := s.keys.Revoke(id); err != nil {
		writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "API key revoked", "key", id)
	w.WriteHeader(http.StatusNoContent)
}
