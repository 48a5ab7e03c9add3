package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// ErrUnavailable is wrapped by the errors of an MCP server that cannot be started or
// reached, that exits or closes the connection, or that does not answer in time, and
// of a Client used after Close.
var ErrUnavailable = errors.New("MCP server unavailable")

// Client is a connection to one MCP server, whose allowed tools it offers as agent
// tools. A server that exits or drops the connection fails the calls under way, and
// the next call connects again. It is safe for concurrent use.
type Client struct {
	cfg       ServerConfig
	log       *slog.Logger
	sdk       *mcpsdk.Client
	transport func() mcpsdk.Transport
	tools     []agent.Tool

	progress  sync.Map // progress token -> func(*mcpsdk.ProgressNotificationParams)
	nextToken atomic.Uint64

	mu      sync.Mutex
	session *mcpsdk.ClientSession // nil when not connected
	closed  bool
}

// Connect starts or reaches the MCP server of cfg, lists its tools, and returns a
// client offering those cfg.Allow allows as agent tools named "<cfg.Name>/<tool>".
// Connecting and listing are bounded by cfg's connect timeout. Close the client to end the
// connection (and stop a command).
func Connect(ctx context.Context, cfg ServerConfig, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	c := &Client{cfg: cfg, log: o.log.With("mcpServer", cfg.Name)}
	c.sdk = mcpsdk.NewClient(&o.impl, &mcpsdk.ClientOptions{
		Capabilities:                &mcpsdk.ClientCapabilities{},
		ProgressNotificationHandler: c.onProgress,
	})
	var err error
	if cfg.Command != "" {
		err = c.commandTransport(ctx, o.secrets)
	} else {
		err = c.httpTransport(ctx, o.secrets)
	}
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout())
	defer cancel()
	s, err := c.connected(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp: server %s: %w", cfg.Name, err)
	}
	byName := map[string]agent.Tool{}
	var names []string
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("mcp: server %s: %w", cfg.Name, unavailable(ctx, cfg.connectTimeout(), "listing its tools", err))
		}
		def, err := definition(cfg.Name, t)
		if err != nil {
			c.Close()
			return nil, err
		}
		byName[t.Name] = &tool{c: c, remote: t.Name, def: def}
		names = append(names, t.Name)
	}
	allowed, err := match(names, cfg.Allow, "server "+cfg.Name+": allow")
	if err != nil {
		c.Close()
		return nil, err
	}
	for _, name := range allowed {
		c.tools = append(c.tools, byName[name])
	}
	return c, nil
}

// definition is the agent tool definition of an MCP tool of server.
func definition(server string, t *mcpsdk.Tool) (*abi.ToolDefinition, error) {
	if t.Name == "" || strings.ContainsAny(t.Name, " \t\r\n") {
		return nil, fmt.Errorf("mcp: server %s offers a tool named %q, which cannot be an agent tool's name", server, t.Name)
	}
	def := &abi.ToolDefinition{Name: server + "/" + t.Name, Description: t.Description}
	var ok bool
	if def.InputSchema, ok = t.InputSchema.(map[string]any); !ok {
		return nil, fmt.Errorf("mcp: server %s: tool %s has no input schema object", server, t.Name)
	}
	if _, err := schema.Compile(def.InputSchema); err != nil {
		return nil, fmt.Errorf("mcp: server %s: tool %s: input %w", server, t.Name, err)
	}
	if t.OutputSchema != nil {
		if def.OutputSchema, ok = t.OutputSchema.(map[string]any); !ok {
			return nil, fmt.Errorf("mcp: server %s: tool %s has an output schema that is not an object", server, t.Name)
		}
		if _, err := schema.Compile(def.OutputSchema); err != nil {
			return nil, fmt.Errorf("mcp: server %s: tool %s: output %w", server, t.Name, err)
		}
	}
	return def, nil
}

// Tools returns the server's tools the config allows, as agent tools named
// "<server>/<tool>": give them to Generate or an agent (agent.WithTools), or register
// them.
func (c *Client) Tools() []agent.Tool { return slices.Clone(c.tools) }

// Close ends the connection; a command is asked to stop (its standard input closed),
// then terminated. Calls under way fail.
func (c *Client) Close() error {
	c.mu.Lock()
	s := c.session
	c.session, c.closed = nil, true
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}

// connected returns the session, connecting first (within the connect timeout) if
// there is none.
func (c *Client) connected(ctx context.Context) (*mcpsdk.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("%w: the client is closed", ErrUnavailable)
	}
	if c.session != nil {
		return c.session, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.connectTimeout())
	defer cancel()
	s, err := c.sdk.Connect(ctx, c.transport(), nil)
	if err != nil {
		return nil, unavailable(ctx, c.cfg.connectTimeout(), "connecting", err)
	}
	c.session = s
	return s, nil
}

// drop forgets a session whose connection failed, so that the next call connects
// again, and returns what its end says about why (a command's exit status).
func (c *Client) drop(s *mcpsdk.ClientSession) error {
	c.mu.Lock()
	if c.session == s {
		c.session = nil
	}
	c.mu.Unlock()
	return s.Close()
}

// unavailable is the error of a failed exchange with the server: what was being done,
// and whether the server did not answer within limit or failed.
func unavailable(ctx context.Context, limit time.Duration, doing string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: no answer within %v: %w", ErrUnavailable, doing, limit, context.DeadlineExceeded)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, doing, err)
}

// commandTransport prepares the transport of a server started as a command.
func (c *Client) commandTransport(ctx context.Context, secrets SecretFunc) error {
	env := baseEnv()
	for _, k := range slices.Sorted(maps.Keys(c.cfg.Env)) {
		v, err := expandSecrets(ctx, c.cfg.Env[k], secrets)
		if err != nil {
			return fmt.Errorf("mcp: server %s: env %s: %w", c.cfg.Name, k, err)
		}
		env = append(env, k+"="+v)
	}
	c.transport = func() mcpsdk.Transport {
		cmd := exec.Command(c.cfg.Command, c.cfg.Args...)
		cmd.Env = env
		cmd.Stderr = &logWriter{log: c.log}
		return &mcpsdk.CommandTransport{Command: cmd}
	}
	return nil
}

// passedEnv are the variables of the host's environment a command gets: what programs
// expect to find, and no more.
var passedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR"}

func baseEnv() []string {
	var env []string
	for _, k := range passedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// httpTransport prepares the transport of a server reached over streamable HTTP.
func (c *Client) httpTransport(ctx context.Context, secrets SecretFunc) error {
	h := http.Header{}
	for k, v := range c.cfg.Headers {
		v, err := expandSecrets(ctx, v, secrets)
		if err != nil {
			return fmt.Errorf("mcp: server %s: header %s: %w", c.cfg.Name, k, err)
		}
		h.Set(k, v)
	}
	hc := &http.Client{Transport: &headerTransport{header: h, base: http.DefaultTransport}}
	c.transport = func() mcpsdk.Transport {
		return &mcpsdk.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: hc}
	}
	return nil
}

// headerTransport adds headers to every request.
type headerTransport struct {
	header http.Header
	base   http.RoundTripper
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// logWriter logs what a command writes to its standard error, line by line.
type logWriter struct {
	log  *slog.Logger
	mu   sync.Mutex
	line []byte
}

// maxLogLine bounds the partial line a logWriter keeps waiting for its end.
const maxLogLine = 64 << 10

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.log.Info("mcp server stderr", "line", string(w.line[:i]))
		w.line = w.line[i+1:]
	}
	if len(w.line) > maxLogLine {
		w.log.Info("mcp server stderr", "line", string(w.line))
		w.line = nil
	}
	return len(p), nil
}

// onProgress passes a progress notification to the call that asked for it.
func (c *Client) onProgress(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
	if fn, ok := c.progress.Load(fmt.Sprint(req.Params.ProgressToken)); ok {
		fn.(func(*mcpsdk.ProgressNotificationParams))(req.Params)
	}
}

// tool is an MCP server's tool seen as an agent tool.
type tool struct {
	c      *Client
	remote string
	def    *abi.ToolDefinition
}

func (t *tool) Name() string                    { return t.def.Name }
func (t *tool) Definition() *abi.ToolDefinition { return t.def }
func (t *tool) Desc() agent.ActionDesc          { return agent.ToolDesc(t.def) }

// Run calls the tool, within the server's timeout. The server's progress
// notifications become status reports (agent.ReportStatus) of the call.
func (t *tool) Run(ctx context.Context, input any) (any, error) {
	c := t.c
	s, err := c.connected(ctx)
	if err != nil {
		return nil, t.fail(err)
	}
	token := "terrarium-" + strconv.FormatUint(c.nextToken.Add(1), 10)
	c.progress.Store(token, func(p *mcpsdk.ProgressNotificationParams) {
		status := map[string]any{"progress": p.Progress}
		if p.Total != 0 {
			status["total"] = p.Total
		}
		if p.Message != "" {
			status["message"] = p.Message
		}
		if err := agent.ReportStatus(ctx, status); err != nil {
			c.log.DebugContext(ctx, "mcp: status report not delivered", "tool", t.def.Name, "error", err)
		}
	})
	defer c.progress.Delete(token)
	params := &mcpsdk.CallToolParams{Name: t.remote, Arguments: input}
	params.SetProgressToken(token)
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.timeout())
	defer cancel()
	res, err := s.CallTool(callCtx, params)
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, t.fail(ctx.Err()) // the caller gave up: not the server's fault
	case callCtx.Err() != nil:
		return nil, t.fail(unavailable(callCtx, c.cfg.timeout(), "calling", err))
	case errors.As(err, &rpcErr):
		// The server answered with a protocol error. Servers of the 2025-06-18
		// protocol refuse bad arguments so.
		if rpcErr.Code == jsonrpc.CodeInvalidParams {
			err = fmt.Errorf("%w: %w", agent.ErrInvalidToolInput, err)
		}
		return nil, t.fail(err)
	default:
		// The connection failed (the server exited, the HTTP session is gone): the
		// next call connects again.
		if why := c.drop(s); why != nil {
			err = fmt.Errorf("%w (%v)", err, why)
		}
		return nil, t.fail(unavailable(callCtx, 0, "the connection closed during the call", err))
	}
	if res.IsError {
		return nil, t.fail(resultError(res))
	}
	return toolOutput(res), nil
}

// fail names the tool in an error of its call.
func (t *tool) fail(err error) error { return fmt.Errorf("mcp tool %s: %w", t.def.Name, err) }
