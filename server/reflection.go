package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/tenant"
)

// Genkit's reflection API, version 1 (../shared/reference/genkit/reflectionApi.yaml and
// Genkit's own runtimes): what Genkit's CLI and Developer UI use to list a runtime's
// actions and run them. It serves the whole registry: the agents' session flows and
// their snapshot actions, models, tools and prompts. It has no authentication: serve
// it on a loopback port, in development only.

// ReflectionAPIVersion is the version of Genkit's reflection API served.
const ReflectionAPIVersion = 1

// bidiRunnable is a runnable that takes init data: a session flow.
type bidiRunnable interface {
	RunInitJSON(ctx context.Context, init, input json.RawMessage, cb agent.ChunkCallback) (json.RawMessage, error)
}

type reflection struct {
	reg     *agent.Registry
	id      string
	running sync.Map // trace ID -> context.CancelCauseFunc

	// Of a tenant's: its deployment and quotas, which a session flow's run is
	// admitted by as any turn of its is; nil for none.
	tenant   *Tenant
	sessions *sessions
}

// ReflectionHandler returns Genkit's reflection API over the deployment's registry.
// runtimeID is the ID in the runtime file (see WriteRuntimeFile); health checks naming
// another ID fail, as Genkit's runtimes do. On a multi-tenant server every request
// needs an API key not narrowed to agents (the reflection API runs any action), and
// sees its tenant's registry only.
func (s *Server) ReflectionHandler(runtimeID string) http.Handler {
	if s.tenants == nil {
		return s.guard(reflectionMux(&reflection{reg: s.dep.Registry(), id: runtimeID}))
	}
	byTenant := map[string]http.Handler{}
	for id, t := range s.tenants {
		byTenant[id] = reflectionMux(&reflection{reg: t.Deployment.Registry(), id: runtimeID, tenant: t, sessions: s.sessions})
	}
	return s.guard(s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := scopeOf(r)
		if len(sc.key.Agents) > 0 {
			writeJSON(w, http.StatusForbidden, &abi.Error{Code: "forbidden", Message: "the reflection API needs a key not narrowed to agents"})
			return
		}
		byTenant[sc.tenant].ServeHTTP(w, r)
	}), tenant.Bearer))
}

func reflectionMux(rf *reflection) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/__health", rf.health)
	mux.HandleFunc("GET /api/actions", rf.actions)
	mux.HandleFunc("POST /api/runAction", rf.runAction)
	mux.HandleFunc("POST /api/cancelAction", rf.cancelAction)
	mux.HandleFunc("POST /api/notify", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("OK")) })
	mux.HandleFunc("GET /api/values", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, map[string]any{}) })
	return mux
}

func (rf *reflection) health(w http.ResponseWriter, r *http.Request) {
	if id := r.URL.Query().Get("id"); id != "" && id != rf.id {
		http.Error(w, "another runtime", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("OK"))
}

// reflectionAction is an action as Genkit's reflection API lists it.
type reflectionAction struct {
	Type         agent.ActionType `json:"type"`
	Key          string           `json:"key"`
	Name         string           `json:"name"`
	Description  string           `json:"description,omitempty"`
	InputSchema  map[string]any   `json:"inputSchema,omitempty"`
	OutputSchema map[string]any   `json:"outputSchema,omitempty"`
	StreamSchema map[string]any   `json:"streamSchema,omitempty"`
	InitSchema   map[string]any   `json:"initSchema,omitempty"`
	Metadata     map[string]any   `json:"metadata"`
}

func (rf *reflection) actions(w http.ResponseWriter, _ *http.Request) {
	out := map[string]reflectionAction{}
	for _, d := range rf.reg.Actions() {
		md := d.Metadata
		if md == nil {
			md = map[string]any{}
		}
		out[d.Key] = reflectionAction{Type: d.Type, Key: d.Key, Name: d.Name, Description: d.Description,
			InputSchema: d.InputSchema, OutputSchema: d.OutputSchema, StreamSchema: d.StreamSchema, InitSchema: d.InitSchema, Metadata: md}
	}
	writeJSON(w, http.StatusOK, out)
}

// runRequest is the body of runAction.
type runRequest struct {
	Key     string          `json:"key"`
	Input   json.RawMessage `json:"input"`
	Init    json.RawMessage `json:"init"`
	Context json.RawMessage `json:"context"`
}

// The canonical (gRPC) status codes Genkit's errors carry.
const (
	codeCancelled          = 1
	codeInvalidArgument    = 3
	codeNotFound           = 5
	codeResourceExhausted  = 8
	codeFailedPrecondition = 9
	codeInternal           = 13
	codeUnavailable        = 14
)

// reflectionError is an error as the reflection API reports it.
func reflectionError(err error, traceID string) map[string]any {
	status, e := classify(err)
	code := codeInternal
	switch {
	case e.Code == "cancelled" || errors.Is(err, context.Canceled):
		code = codeCancelled
	case status == http.StatusNotFound:
		code = codeNotFound
	case status == http.StatusTooManyRequests:
		code = codeResourceExhausted
	case status == http.StatusConflict:
		code = codeFailedPrecondition
	case status == http.StatusServiceUnavailable:
		code = codeUnavailable
	case status >= 400 && status < 500:
		code = codeInvalidArgument
	}
	return map[string]any{"error": map[string]any{"code": code, "message": e.Message, "details": map[string]any{"traceId": traceID}}}
}

func (rf *reflection) runAction(w http.ResponseWriter, r *http.Request) {
	var req runRequest
	body, err := readAll(w, r, 32<<20)
	if err == nil {
		// Genkit's tools add fields over time (telemetryLabels, runtimeId...).
		err = decodeLenient(body, &req)
	}
	if err != nil {
		status, e := classify(err)
		writeJSON(w, status, map[string]any{"error": e})
		return
	}
	traceID := newTraceID()
	h := w.Header()
	h.Set("X-Genkit-Trace-Id", traceID)
	h.Set("X-Genkit-Version", "go/terrarium")
	stream := r.URL.Query().Get("stream") == "true"
	if stream {
		h.Set("Content-Type", "text/plain")
		h.Set("Transfer-Encoding", "chunked")
	} else {
		h.Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	rf.running.Store(traceID, cancel)
	defer rf.running.Delete(traceID)

	var cb agent.ChunkCallback
	if stream {
		cb = func(_ context.Context, chunk json.RawMessage) error {
			if _, err := w.Write(append(chunk, '\n')); err != nil {
				return err
			}
			return rc.Flush()
		}
	}
	result, err := rf.run(ctx, req, cb)
	if err != nil {
		if cause := context.Cause(ctx); cause == errActionCancelled {
			err = fmt.Errorf("%w: %w", ErrCancelled, cause)
		}
		json.NewEncoder(w).Encode(reflectionError(err, traceID))
		return
	}
	out, _ := json.Marshal(map[string]any{"result": result, "telemetry": map[string]string{"traceId": traceID}})
	w.Write(out)
}

// run runs the action a request names. A tenant's session flow runs as a turn of a
// session of its: within its quotas of turns and sessions, holding its place until
// the turn ends (detached, in the background).
func (rf *reflection) run(ctx context.Context, req runRequest, cb agent.ChunkCallback) (out json.RawMessage, err error) {
	a := rf.reg.Lookup(req.Key)
	if a == nil {
		return nil, fmt.Errorf("%w: action %q", agent.ErrNotFound, req.Key)
	}
	if q := rf.tenant.limiter(); q != nil && a.Desc().Type == agent.ActionTypeSessionFlow {
		leave, err := q.OpenSession()
		if err != nil {
			return nil, err
		}
		defer leave()
		done, err := q.StartTurn(ctx)
		if err != nil {
			return nil, err
		}
		defer func() { rf.endTurn(a.Desc().Name, out, done) }()
	}
	hasInit := len(req.Init) > 0 && string(req.Init) != "null"
	if b, ok := a.(bidiRunnable); ok && hasInit {
		return b.RunInitJSON(ctx, req.Init, req.Input, cb)
	}
	if hasInit {
		return nil, fmt.Errorf("%w: action %q does not accept init", agent.ErrInvalidInput, req.Key)
	}
	run, ok := agent.AsRunnable(a)
	if !ok {
		return nil, fmt.Errorf("%w: action %q does not run on its own (a %s runs inside a turn)", agent.ErrInvalidInput, req.Key, a.Desc().Type)
	}
	return run.RunJSON(ctx, req.Input, cb)
}

// endTurn gives the place of a tenant's turn, run by the session flow of the agent
// named with the output out, back once the turn ends: when its run does, or, if it
// detached, when its pending snapshot settles.
func (rf *reflection) endTurn(name string, out json.RawMessage, done func()) {
	var o session.AnyOutput
	a, err := rf.tenant.Deployment.Agent(name)
	if err != nil || json.Unmarshal(out, &o) != nil || o.FinishReason != session.FinishDetached || len(o.SnapshotIDs) == 0 {
		done()
		return
	}
	rf.sessions.endTurnAfter(a, o.SnapshotIDs[len(o.SnapshotIDs)-1], done)
}

// errActionCancelled is the cause with which cancelAction stops an action.
var errActionCancelled = errors.New("action was cancelled")

func (rf *reflection) cancelAction(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TraceID string `json:"traceId"`
	}
	body, err := readAll(w, r, 1<<16)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"traceId\": ...}"})
		return
	}
	v, ok := rf.running.Load(req.TraceID)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "Action not found or already completed"})
		return
	}
	v.(context.CancelCauseFunc)(errActionCancelled)
	writeJSON(w, http.StatusOK, map[string]string{"message": "Action cancelled"})
}

func newTraceID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// WriteRuntimeFile announces a reflection server to Genkit's tools, as Genkit's
// runtimes do: a file in <projectRoot>/.genkit/runtimes naming its URL. It returns the
// file's path, to remove when the server stops.
func WriteRuntimeFile(projectRoot, id, url string) (string, error) {
	dir := filepath.Join(projectRoot, ".genkit", "runtimes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("server: the runtime file: %w", err)
	}
	now := time.Now().UTC()
	info := map[string]any{
		"id":                       id,
		"pid":                      os.Getpid(),
		"reflectionServerUrl":      url,
		"timestamp":                now.Format(time.RFC3339),
		"genkitVersion":            "go/terrarium",
		"reflectionApiSpecVersion": ReflectionAPIVersion,
	}
	data, err := json.Marshal(info)
	if err != nil {
		return "", err
	}
	port := url[strings.LastIndex(url, ":")+1:]
	path := filepath.Join(dir, fmt.Sprintf("%d-%s-%s.json", os.Getpid(), port, strings.ReplaceAll(now.Format(time.RFC3339), ":", "_")))
	// Its reader's own: it names a port that runs any action of the deployment.
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("server: the runtime file: %w", err)
	}
	return path, nil
}
