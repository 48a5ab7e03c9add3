package server

import (
	"errors"
	"net/http"
	"sync"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/mcp"
)

// MCPPath is where the server serves MCP (streamable HTTP), on its own listener.
const MCPPath = "/mcp"

// mcpEndpoints are the MCP endpoints of a server: one per API key (a key sees the
// tools of the agents it may use, and its MCP sessions are its own), and one for a
// server without tenants, each made on its first request.
type mcpEndpoints struct {
	mu    sync.Mutex
	byKey map[string]*mcpEndpoint
}

type mcpEndpoint struct {
	srv     *mcp.Server
	handler http.Handler
}

// serveMCP serves MCP to the request's scope: the tools of the agents it may use,
// each MCP session with a session of its own in their deployment (deploy's tool
// sessions), where the tools that keep state keep it.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeError(w, r, ErrShuttingDown)
		return
	}
	e, err := s.mcpEndpoint(scopeOf(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	e.handler.ServeHTTP(w, r)
}

// mcpEndpoint returns the scope's endpoint, made on its first request.
func (s *Server) mcpEndpoint(sc *scope) (*mcpEndpoint, error) {
	id := ""
	if sc.key != nil {
		id = sc.key.ID
	}
	s.mcp.mu.Lock()
	defer s.mcp.mu.Unlock()
	if e := s.mcp.byKey[id]; e != nil {
		return e, nil
	}
	log := s.log
	if sc.tenant != "" {
		log = log.With("tenant", sc.tenant, "key", id)
	}
	srv, err := mcp.NewServer(sc.dep.Tools(sc.agents()...), mcp.WithLogger(log), mcp.WithSessions(sc.dep.ToolSessions()))
	if err != nil {
		return nil, err
	}
	e := &mcpEndpoint{srv: srv, handler: srv.Handler(&mcpsdk.StreamableHTTPOptions{SessionTimeout: s.idle, Logger: log})}
	if s.mcp.byKey == nil {
		s.mcp.byKey = map[string]*mcpEndpoint{}
	}
	s.mcp.byKey[id] = e
	return e, nil
}

// close ends every MCP session, whose event streams would hold a shutdown.
func (m *mcpEndpoints) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, e := range m.byKey {
		errs = append(errs, e.srv.Close())
	}
	return errors.Join(errs...)
}
