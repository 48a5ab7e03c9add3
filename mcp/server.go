package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/tracing"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// ErrorMetaKey is the _meta key under which a tool result with isError carries the
// error as an *abi.Error (code, message, HTTP status, Retry-After), so that a
// Terrarium client gets back the error the tool returned, not only its text.
const ErrorMetaKey = "terrarium/error"

// Server serves agent tools to MCP clients. One Server serves any number of sessions:
// connections over stdio, or HTTP clients.
type Server struct {
	sdk   *mcpsdk.Server
	log   *slog.Logger
	names []string // MCP names, sorted

	sessions Sessions // nil without WithSessions
	mu       sync.Mutex
	open     map[string]*openSession // by MCP session ID
}

// Sessions gives the tool calls of each MCP session a session of their own
// (agent.AnySessionFromContext), for the tools that keep state there: what one MCP
// session's calls keep, its next calls find, and no other session sees.
type Sessions interface {
	// Open returns the session of the MCP session id, on its first tool call.
	Open(ctx context.Context, id string) (agent.AnySession, error)
	// Save keeps what a tool call changed in the session, after the call.
	Save(ctx context.Context, s agent.AnySession) error
}

// WithSessions gives each MCP session that has an ID (over streamable HTTP) a session
// of its own from sessions, which the server forgets when the MCP session ends.
// Without it, a tool that needs a session fails its calls.
func WithSessions(sessions Sessions) ServerOption {
	return serverOptionFunc(func(o *serverOptions) { o.sessions = sessions })
}

// openSession is the session of an MCP session, opened by its first call that
// succeeds in opening it.
type openSession struct {
	mu sync.Mutex
	s  agent.AnySession
}

// sessionOf returns the session of the MCP session ss, opening it on its first call
// and forgetting it when ss ends; nil without sessions or a session ID.
func (s *Server) sessionOf(ctx context.Context, ss *mcpsdk.ServerSession) (agent.AnySession, error) {
	if s.sessions == nil || ss == nil || ss.ID() == "" {
		return nil, nil
	}
	id := ss.ID()
	s.mu.Lock()
	o := s.open[id]
	if o == nil {
		o = &openSession{}
		s.open[id] = o
		go func() {
			ss.Wait()
			s.mu.Lock()
			delete(s.open, id)
			s.mu.Unlock()
		}()
	}
	s.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.s == nil {
		var err error
		if o.s, err = s.sessions.Open(context.WithoutCancel(ctx), id); err != nil {
			return nil, err // the next call tries again
		}
	}
	return o.s, nil
}

// NewServer returns a server offering tools to MCP clients. An agent tool's name
// becomes its MCP name with each "/" replaced by "_" ("calculator/calc" is served as
// "calculator_calc"), since MCP tool names may hold only letters, digits, "_", "-" and
// ".", and model providers' APIs take fewer still. It fails, naming the tool, if a
// name cannot be served that way or is served twice, or if a tool's input schema is
// not a valid JSON Schema of an object (MCP passes arguments as an object).
func NewServer(tools []agent.Tool, opts ...ServerOption) (*Server, error) {
	o := serverOptions{options: newOptions(nil)}
	for _, opt := range opts {
		opt.applyServer(&o)
	}
	s := &Server{
		sdk:      mcpsdk.NewServer(&o.impl, &mcpsdk.ServerOptions{HasTools: true}),
		log:      o.log,
		sessions: o.sessions,
		open:     map[string]*openSession{},
	}
	byName := map[string]string{}
	for _, t := range tools {
		def := t.Definition()
		name := ToolName(def.Name)
		if err := checkToolName(name); err != nil {
			return nil, fmt.Errorf("mcp: tool %q: %w", def.Name, err)
		}
		if other, dup := byName[name]; dup {
			return nil, fmt.Errorf("mcp: tools %q and %q are both served as %q", other, def.Name, name)
		}
		byName[name] = def.Name
		in := def.InputSchema
		if in == nil {
			in = map[string]any{"type": "object"}
		}
		if in["type"] != "object" {
			return nil, fmt.Errorf("mcp: tool %q: its input schema is of type %v, but MCP tools take an object", def.Name, in["type"])
		}
		v, err := schema.Compile(in)
		if err != nil {
			return nil, fmt.Errorf("mcp: tool %q: %w", def.Name, err)
		}
		mt := &mcpsdk.Tool{Name: name, Description: def.Description, InputSchema: in}
		// MCP clients check structured content against the output schema, which the
		// protocol wants to be an object's: a tool answering anything else is served
		// without one, its output in the text content.
		if def.OutputSchema["type"] == "object" {
			mt.OutputSchema = def.OutputSchema
		}
		s.sdk.AddTool(mt, s.handler(t, v))
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	return s, nil
}

// ToolName is the MCP name under which NewServer serves the agent tool named name.
func ToolName(name string) string { return strings.ReplaceAll(name, "/", "_") }

// checkToolName applies the MCP specification's rule for tool names.
func checkToolName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("MCP tool names have 1 to 128 characters, %q has %d", name, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("MCP tool names hold letters, digits, _, - and . only, not %q", r)
		}
	}
	return nil
}

// ToolNames returns the MCP names of the tools served, sorted.
func (s *Server) ToolNames() []string { return slices.Clone(s.names) }

// Run serves one session over the transport (&mcpsdk.StdioTransport{} for stdio)
// until the client disconnects or ctx is done.
func (s *Server) Run(ctx context.Context, t mcpsdk.Transport) error {
	err := s.sdk.Run(ctx, t)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: serving: %w", err)
	}
	return err
}

// Handler returns the streamable HTTP endpoint of the server, for any number of
// clients, with the SDK's options (nil for its defaults: sessions never time out). It
// refuses requests reaching a loopback address with another Host header (DNS
// rebinding) unless opts say otherwise, and requests a web page of another site sends
// (by their Origin, or Sec-Fetch-Site), which could otherwise call tools of a server
// on its reader's machine; authenticating clients is the job of the handler wrapping
// it.
func (s *Server) Handler(opts *mcpsdk.StreamableHTTPOptions) http.Handler {
	return http.NewCrossOriginProtection().Handler(
		mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s.sdk }, opts))
}

// Close ends every session the server holds: over HTTP, their event streams end,
// which a graceful shutdown of the HTTP server would otherwise wait for.
func (s *Server) Close() error {
	var errs []error
	for ss := range s.sdk.Sessions() {
		errs = append(errs, ss.Close())
	}
	return errors.Join(errs...)
}

// handler runs tool t for a tools/call request. Bad input and every error of the tool
// are tool execution errors (isError), which the specification reserves for what
// the model can read and act on; cancellation by the client cancels the call.
func (s *Server) handler(t agent.Tool, v *schema.Validator) mcpsdk.ToolHandler {
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		var input any = map[string]any{}
		if args := req.Params.Arguments; len(args) > 0 && string(args) != "null" {
			if err := json.Unmarshal(args, &input); err != nil {
				return errorResult(abi.Errorf(abi.CodeInvalidInput, "the arguments are not JSON: %v", err)), nil
			}
		}
		if err := v.Validate(input); err != nil {
			return errorResult(abi.Errorf(abi.CodeInvalidInput, "%v", err)), nil
		}
		if token := req.Params.GetProgressToken(); token != nil {
			ctx = agent.WithStatusFunc(ctx, s.progress(req.Session, token))
		}
		sess, err := s.sessionOf(ctx, req.Session)
		if err != nil {
			return errorResult(fmt.Errorf("tool %s: the MCP session's session: %w", t.Name(), err)), nil
		}
		if sess != nil {
			ctx = agent.NewSessionContext(ctx, sess)
		}
		ctx, span := tracing.Start(ctx, t.Name(), tracing.Tool, input)
		out, err := run(ctx, t, input)
		span.End(out, err)
		if sess != nil {
			// What the call changed is kept even when it failed after changing it.
			if serr := s.sessions.Save(context.WithoutCancel(ctx), sess); serr != nil && err == nil {
				err = fmt.Errorf("the session's state was not kept: %w", serr)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err() // the client cancelled: it expects no answer
			}
			return errorResult(err), nil
		}
		res, err := toolResult(out)
		if err != nil {
			return errorResult(fmt.Errorf("tool %s: %w", t.Name(), err)), nil
		}
		return res, nil
	}
}

// progress turns the status reports of a call into MCP progress notifications for
// the request's progress token. A report with a numeric "progress" (and optionally
// "total" and "message") says where it is; any other report counts as one step, its
// JSON the message. Progress must increase, so a report that would not is a step.
func (s *Server) progress(ss *mcpsdk.ServerSession, token any) agent.StatusFunc {
	var mu sync.Mutex
	var last float64
	return func(ctx context.Context, status json.RawMessage) error {
		var r struct {
			Progress *float64 `json:"progress"`
			Total    float64  `json:"total"`
			Message  *string  `json:"message"`
		}
		p := &mcpsdk.ProgressNotificationParams{ProgressToken: token}
		if json.Unmarshal(status, &r) == nil && r.Progress != nil {
			p.Progress, p.Total = *r.Progress, r.Total
		}
		if r.Message != nil {
			p.Message = *r.Message
		} else if r.Progress == nil {
			p.Message = string(status)
		}
		mu.Lock()
		if p.Progress <= last {
			p.Progress = last + 1
		}
		last = p.Progress
		err := ss.NotifyProgress(ctx, p)
		mu.Unlock()
		if err != nil {
			// Progress is informative: the tool goes on without it.
			s.log.DebugContext(ctx, "mcp: progress notification not sent", "error", err)
		}
		return nil
	}
}

// run runs the tool, a panic of its recovered into its error: one call fails, the
// server and its other sessions go on.
func run(ctx context.Context, t agent.Tool, input any) (out any, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, fmt.Errorf("tool %s: %w", t.Name(), agent.Recovered(ctx, v, "tool", t.Name()))
		}
	}()
	return t.Run(ctx, input)
}

// errorResult is a tool execution error: the error's text for the model, and the
// error as an *abi.Error in _meta, classified as agent.AsError does: a tool's (or
// plugin's) own *abi.Error is reported as the tool reported it, without the wrapping
// that names where it came from.
func errorResult(err error) *mcpsdk.CallToolResult {
	var e *abi.Error
	var ie *agent.InterruptError
	if errors.As(err, &ie) {
		md, _ := json.Marshal(ie.Metadata)
		e = abi.Errorf(abi.CodePermissionDenied, "the tool needs outside input before it runs (an approval or an answer), which MCP cannot carry: %s", md)
	} else {
		e = agent.AsError(err)
	}
	return &mcpsdk.CallToolResult{
		Meta:    mcpsdk.Meta{ErrorMetaKey: e},
		Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: e.Error()}},
		IsError: true,
	}
}

// match returns the names matching one of patterns (path.Match syntax), in the order
// of names. A pattern that is malformed or matches no name is an error naming it: a
// mistyped name should not silently select nothing.
func match(names, patterns []string, what string) ([]string, error) {
	var out []string
	for _, p := range patterns {
		matched := false
		for _, n := range names {
			ok, err := path.Match(p, n)
			if err != nil {
				return nil, fmt.Errorf("mcp: %s %q: %w", what, p, err)
			}
			if ok {
				matched = true
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
		if !matched {
			return nil, fmt.Errorf("mcp: %s %q matches none of %s", what, p, quoted(names))
		}
	}
	return out, nil
}

// SelectTools returns the tools whose names match one of the patterns (path.Match
// syntax: "calculator/*"), or all of them for none, in their order. A pattern matching
// no tool is an error.
func SelectTools(tools []agent.Tool, patterns ...string) ([]agent.Tool, error) {
	if len(patterns) == 0 {
		return tools, nil
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name()
	}
	selected, err := match(names, patterns, "tool pattern")
	if err != nil {
		return nil, err
	}
	var out []agent.Tool
	for _, t := range tools {
		if slices.Contains(selected, t.Name()) {
			out = append(out, t)
		}
	}
	return out, nil
}

// RegistryTools returns the tools registered in r, sorted by name, selected by patterns
// as SelectTools selects them.
func RegistryTools(r *agent.Registry, patterns ...string) ([]agent.Tool, error) {
	var tools []agent.Tool
	for _, d := range r.Actions() {
		if d.Type != agent.ActionTypeTool {
			continue
		}
		t, err := r.LookupTool(d.Name)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return SelectTools(tools, patterns...)
}

func quoted(names []string) string {
	if len(names) == 0 {
		return "no names"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
