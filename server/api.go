package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/tenant"
)

// route is one route of the public API; the OpenAPI document's test reads them.
type route struct {
	method, pattern string
	handler         http.HandlerFunc
}

// apiRoutes are the routes the OpenAPI document describes.
func (s *Server) apiRoutes() []route {
	return []route{
		{"GET", "/api/agents", s.listAgents},
		{"GET", "/api/agents/{agent}", s.getAgent},
		{"POST", "/api/agents/{agent}/sessions", s.createSession},
		{"GET", "/api/agents/{agent}/sessions", s.listSessions},
		{"GET", "/api/agents/{agent}/sessions/{session}", s.getSession},
		{"DELETE", "/api/agents/{agent}/sessions/{session}", s.closeSession},
		{"POST", "/api/agents/{agent}/sessions/{session}/turns", s.sendTurn},
		{"POST", "/api/agents/{agent}/sessions/{session}/cancel", s.cancelTurn},
		{"GET", "/api/agents/{agent}/sessions/{session}/snapshots", s.listSnapshots},
		{"GET", "/api/agents/{agent}/snapshots/{snapshot}", s.getSnapshot},
		{"POST", "/api/agents/{agent}/snapshots/{snapshot}/abort", s.abortSnapshot},
		{"GET", wsRoute, s.connect},
		{"GET", "/v1/models", s.openAIModels},
		{"GET", "/v1/models/{model}", s.openAIModel},
		{"POST", "/v1/chat/completions", s.chatCompletions},
		{"GET", "/healthz", s.healthz},
		{"GET", "/readyz", s.readyz},
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.apiRoutes() {
		var h http.Handler = r.handler
		switch r.pattern {
		case "/healthz", "/readyz":
		case wsRoute:
			h = s.authenticate(h, webSocketKey)
		default:
			h = s.authenticate(h, tenant.Bearer)
		}
		mux.Handle(r.method+" "+r.pattern, h)
	}
	if s.tenants != nil {
		for _, r := range s.adminRoutes() {
			mux.HandleFunc(r.method+" "+r.pattern, s.adminOnly(r.handler))
		}
	}
	mux.Handle(MCPPath, s.authenticate(http.HandlerFunc(s.serveMCP), tenant.Bearer))
	mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	if s.promh != nil {
		mux.Handle("GET /metrics", s.promh)
	}
	mux.Handle("/", pageHandler())
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, &abi.Error{Code: abi.CodeNotFound, Message: noRoute(r)})
	})
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": noRoute(r), "type": "invalid_request_error", "param": nil, "code": abi.CodeNotFound}})
	})
	return mux
}

func noRoute(r *http.Request) string { return fmt.Sprintf("no route %s %s", r.Method, r.URL.Path) }

// agentOf returns the agent the request's path names.
func (s *Server) agentOf(r *http.Request) (*deploy.Agent, error) {
	return scopeOf(r).agent(r.PathValue("agent"))
}

// agent returns the agent named, if the scope reaches it: one it does not is not
// found, as one that does not exist.
func (sc *scope) agent(name string) (*deploy.Agent, error) {
	a, err := sc.dep.Agent(name)
	if err != nil || !sc.mayUse(a) {
		return nil, fmt.Errorf("%w: %q", ErrAgentNotFound, name)
	}
	return a, nil
}

// agents returns the agents the scope reaches.
func (sc *scope) agents() []*deploy.Agent {
	var out []*deploy.Agent
	for _, a := range sc.dep.Agents() {
		if sc.mayUse(a) {
			out = append(out, a)
		}
	}
	return out
}

// AgentInfo describes a served agent.
type AgentInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Model       string   `json:"model,omitempty"`
	Tools       []string `json:"tools"`
	// Routes are the IDs of a routed agent's routes (seed 002); a prompt agent has
	// none.
	Routes  []string `json:"routes,omitempty"`
	Plugins []string `json:"plugins"`
	// Snapshots is where its sessions are kept: badger, memory or none.
	Snapshots string `json:"snapshots"`
	// StateManagement is "server" when the agent keeps its sessions, "client" when
	// its clients keep their state.
	StateManagement string `json:"stateManagement"`
	// ClientTools says whether it offers its model the tools a client brings.
	ClientTools bool `json:"clientTools"`
}

func agentInfo(a *deploy.Agent) AgentInfo {
	m := "client"
	if a.ServerManaged() {
		m = "server"
	}
	return AgentInfo{Name: a.Name, Description: a.Description, Model: a.Model, Tools: nonNil(a.Tools),
		Routes: a.Routes, Plugins: nonNil(a.Plugins), Snapshots: a.SnapshotStore, StateManagement: m, ClientTools: a.ClientTools}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	out := []AgentInfo{}
	for _, a := range scopeOf(r).agents() {
		out = append(out, agentInfo(a))
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, agentInfo(a))
}

// SessionInfo describes a session.
type SessionInfo struct {
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent,omitempty"`
	// Open says the session has a connection on this server; Running, that a turn runs
	// on it now.
	Open    bool `json:"open"`
	Running bool `json:"running"`
	// Snapshot is the session's latest snapshot, when its agent keeps sessions and it
	// has one.
	Snapshot *deploy.Snapshot `json:"snapshot,omitempty"`
	// UpdatedAt, in a list of sessions, is when the session's latest snapshot was
	// taken: when it was last used. Title is the beginning of its first user message,
	// for a person to tell sessions apart.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	Title     string    `json:"title,omitempty"`
}

// readInit reads an optional JSON body: the init of a session.
func (s *Server) readInit(w http.ResponseWriter, r *http.Request) (json.RawMessage, error) {
	if r.ContentLength == 0 {
		return nil, nil
	}
	var raw json.RawMessage
	if err := decodeBody(w, r, s.maxBody, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	init, err := s.readInit(w, r)
	if err == nil {
		init, err = resolveInit(r.Context(), a, init)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	l, err := s.sessions.start(a, init)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, SessionInfo{SessionID: l.id, Agent: a.Name, Open: true})
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	open := s.sessions.list(a)
	ids := []string{}
	if a.ServerManaged() {
		if ids, err = a.Sessions(r.Context()); err != nil {
			writeError(w, r, err)
			return
		}
	}
	for id := range open {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	out := make([]SessionInfo, len(ids))
	for i, id := range ids {
		running, isOpen := open[id]
		out[i] = SessionInfo{SessionID: id, Open: isOpen, Running: running}
		if a.ServerManaged() {
			s.summarize(r.Context(), a, &out[i])
		}
	}
	// Newest first; a session not yet kept (its first turn runs) is the newest.
	slices.SortStableFunc(out, func(x, y SessionInfo) int {
		if c := cmpNewest(x.UpdatedAt, y.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(x.SessionID, y.SessionID)
	})
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := r.PathValue("session")
	info := SessionInfo{SessionID: id, Agent: a.Name}
	if l := s.sessions.peek(a, id); l != nil {
		l.mu.Lock()
		info.Open, info.Running = true, l.running
		l.mu.Unlock()
	}
	if a.ServerManaged() {
		snap, err := a.LatestSnapshot(r.Context(), id)
		switch {
		case err == nil:
			info.Snapshot = snap
		case !errors.Is(err, session.ErrSnapshotNotFound):
			writeError(w, r, err)
			return
		}
	}
	if !info.Open && info.Snapshot == nil {
		writeError(w, r, fmt.Errorf("%w: agent %s has no session %q", ErrSessionNotFound, a.Name, id))
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := r.PathValue("session")
	if l := s.sessions.peek(a, id); l != nil {
		if err := s.sessions.closeSession(l); err != nil {
			writeError(w, r, err)
			return
		}
	} else if ok, err := a.HasSession(r.Context(), id); err != nil || !ok {
		writeError(w, r, errors.Join(fmt.Errorf("%w: agent %s has no session %q", ErrSessionNotFound, a.Name, id), err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TurnRequest is one turn's input: a text (a user message), messages, or a resume
// answering the tool requests that interrupted the last turn; detach runs the turn in
// the background; customPatches asks for the turn's custom-state changes as
// customPatch chunks (session.SessionFlowInput.CustomPatches).
type TurnRequest struct {
	Text          string         `json:"text,omitempty"`
	Messages      []*abi.Message `json:"messages,omitempty"`
	Resume        *abi.Resume    `json:"resume,omitempty"`
	Detach        bool           `json:"detach,omitempty"`
	CustomPatches bool           `json:"customPatches,omitempty"`
}

// check implements checked.
func (t *TurnRequest) check() error {
	if t.Text != "" && len(t.Messages) > 0 {
		return errors.New("give text or messages, not both")
	}
	return abi.NoNulls("messages", t.Messages)
}

// input is the flow's input for the request.
func (t *TurnRequest) input() *session.SessionFlowInput {
	in := &session.SessionFlowInput{Messages: t.Messages, Resume: t.Resume, Detach: t.Detach, CustomPatches: t.CustomPatches}
	if t.Text != "" {
		in.Messages = []*abi.Message{abi.NewUserTextMessage(t.Text)}
	}
	return in
}

// wantsStream reports whether a client asked for server-sent events.
func wantsStream(r *http.Request) bool {
	return r.URL.Query().Get("stream") == "true" || strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func (s *Server) sendTurn(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var req TurnRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		writeError(w, r, err)
		return
	}
	in := req.input()
	// The session first: a turn of one the key cannot reach is not found, and spends
	// no quota.
	l, err := s.sessions.get(r.Context(), a, r.PathValue("session"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	done, err := s.sessions.admit(r.Context(), a)
	if err != nil {
		if r.Context().Err() == nil { // else its client left while it waited in line
			writeError(w, r, err)
		}
		return
	}
	w.Header().Set("X-Terrarium-Session-Id", l.id)
	stream := wantsStream(r)
	var events *sseWriter
	res := TurnResult{SessionID: l.id, Chunks: []*session.AnyChunk{}}
	first := true
	out, err := s.sessions.turn(l, done, in, func(c *session.AnyChunk) error {
		if c.SnapshotCreated != "" {
			res.SnapshotID = c.SnapshotCreated
		}
		if c.EndTurn {
			res.FinishReason = c.FinishReason
		}
		if first {
			first = false
			if c.Error != nil && !c.EndTurn {
				// Refused before anything streamed: a status, below.
				return c.Error
			}
			if stream {
				events = newSSE(w)
			}
		}
		if !stream {
			res.Chunks = append(res.Chunks, c)
			return nil
		}
		return events.send("", c)
	})
	if out != nil && out.FinishReason == session.FinishDetached {
		// A detached turn streams nothing: the answer names its pending snapshot.
		res.SnapshotID, res.FinishReason = out.SnapshotID, out.FinishReason
	}
	switch {
	case events != nil && err != nil:
		_, body := classify(err)
		events.send("error", body)
	case events != nil:
	case err != nil:
		writeError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// TurnResult is the answer to a turn that did not stream: its chunks, the last of
// which ends the turn (its finish reason, and for a failed turn its error), the
// session's snapshot after the turn (a failed turn's, or a detached turn's pending
// one) and the turn's finish reason.
type TurnResult struct {
	SessionID    string              `json:"sessionId"`
	Chunks       []*session.AnyChunk `json:"chunks"`
	SnapshotID   string              `json:"snapshotId,omitempty"`
	FinishReason abi.FinishReason    `json:"finishReason,omitempty"`
}

func (s *Server) cancelTurn(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := r.PathValue("session")
	l := s.sessions.peek(a, id)
	if l == nil {
		if ok, _ := a.HasSession(r.Context(), id); ok {
			writeError(w, r, fmt.Errorf("%w: session %s", ErrNoRunningTurn, id))
			return
		}
		writeError(w, r, fmt.Errorf("%w: agent %s has no session %q", ErrSessionNotFound, a.Name, id))
		return
	}
	if err := s.sessions.cancelTurn(l); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, SessionInfo{SessionID: id, Agent: a.Name})
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := r.PathValue("session")
	snaps, err := a.Snapshots(r.Context(), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if len(snaps) == 0 {
		writeError(w, r, fmt.Errorf("%w: agent %s has no session %q", ErrSessionNotFound, a.Name, id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"snapshots": snaps})
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	id, err := a.ResolveSnapshotID(r.Context(), "", r.PathValue("snapshot"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	snap, err := a.Snapshot(r.Context(), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) abortSnapshot(w http.ResponseWriter, r *http.Request) {
	a, err := s.agentOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	// An unknown snapshot is no error here: abort answers that it found none.
	id, err := a.ResolveSnapshotID(r.Context(), "", r.PathValue("snapshot"))
	if errors.Is(err, session.ErrSnapshotNotFound) {
		id, err = r.PathValue("snapshot"), nil
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	prev, _, err := a.Abort(r.Context(), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	// As Genkit's abort: the status the snapshot had, none for an unknown one.
	writeJSON(w, http.StatusOK, session.AbortResponse{SnapshotID: id, Status: prev})
}

// sseWriter writes server-sent events, flushing each.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// send writes one event of the given type ("" for the default, message) with v as
// its JSON data.
func (e *sseWriter) send(event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var b strings.Builder
	if event != "" {
		b.WriteString("event: " + event + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := e.w.Write([]byte(b.String())); err != nil {
		return err
	}
	return e.rc.Flush()
}
