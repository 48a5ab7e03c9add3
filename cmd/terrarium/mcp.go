package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/mcp"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store"
)

// mcpPath is where --http serves the MCP endpoint.
const mcpPath = "/mcp"

func mcpServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	addr := fs.String("http", "", "serve streamable HTTP at `host:port` (path "+mcpPath+") instead of stdio")
	tenants := fs.String("tenants", "", "with --http, serve each tenant of this `file` its plugins' tools, behind its API keys")
	data := fs.String("data", "terrarium-data", "with --tenants, the data directory of terrarium serve, whose keys.json holds the API keys")
	var patterns multiFlag
	fs.Var(&patterns, "tool", "serve only the tools matching this `pattern`, e.g. calculator/calc or clock/* (repeatable)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: terrarium mcp <dir> [--http host:port] [--tool pattern]...

Serves the tools of plugins to MCP clients, over stdio (standard input and output carry
the protocol; logs go to standard error) or streamable HTTP. <dir> holds either agent
files (*.yaml), whose plugins are loaded with the grants the files give them, or
plugins: each <name>.wasm with the manifest <name>.json beside it, if any (the JSON
"plugin test --manifest" reads: grants, limits and SHA-256 pin). A tool
/tool/<plugin>/<tool> is served as <plugin>_<tool>.
`)
		fs.PrintDefaults()
	}
	dir, ok := parse(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	fail := func(err error) int {
		fmt.Fprintf(stderr, "terrarium mcp: %v\n", err)
		return exitFailed
	}

	if *tenants != "" {
		if *addr == "" {
			return fail(errors.New("--tenants needs --http: over stdio the client is the process that started the server"))
		}
		h, closeAll, err := tenantMCP(ctx, dir, *tenants, *data, patterns, log)
		defer closeAll()
		if err != nil {
			return fail(err)
		}
		err = serveHTTP(ctx, *addr, h, func(url string) {
			fmt.Fprintf(stderr, "serving the tools of each tenant's plugins over streamable HTTP at %s, behind API keys\n", url)
		})
		if err != nil && ctx.Err() == nil {
			return fail(err)
		}
		return exitOK
	}
	tools, closeTools, err := loadTools(ctx, dir, log)
	if err != nil {
		return fail(err)
	}
	defer closeTools()
	if tools, err = mcp.SelectTools(tools, patterns...); err != nil {
		return fail(err)
	}
	srv, err := mcp.NewServer(tools, mcp.WithLogger(log))
	if err != nil {
		return fail(err)
	}
	served := strings.Join(srv.ToolNames(), ", ")
	if *addr == "" {
		fmt.Fprintf(stderr, "serving %d tools over stdio: %s\n", len(tools), served)
		err = srv.Run(ctx, &mcpsdk.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{stdout}})
	} else {
		err = serveHTTP(ctx, *addr, srv.Handler(nil), func(url string) {
			fmt.Fprintf(stderr, "serving %d tools over streamable HTTP at %s: %s\n", len(tools), url, served)
		})
	}
	if err != nil && ctx.Err() == nil {
		return fail(err)
	}
	return exitOK
}

// loadTools loads the plugins dir names, with their grants, and returns their tools,
// sorted by name, and what unloads them. A directory with agent files is a deployment
// of them (the plugins their files load); any other is a directory of plugins and
// manifests.
func loadTools(ctx context.Context, dir string, log *slog.Logger) ([]agent.Tool, func(), error) {
	yaml, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	yml, _ := filepath.Glob(filepath.Join(dir, "*.yml"))
	if len(yaml)+len(yml) > 0 {
		files, err := deploy.ReadDir(dir)
		if err != nil {
			return nil, nil, err
		}
		// Only the plugins' tools are served, so the agents' sessions are never used.
		d, err := deploy.New(ctx, files, deploy.WithStore(store.NewMemory()), deploy.WithLogger(log))
		if err != nil {
			return nil, nil, err
		}
		return deploymentTools(d), func() { d.Close(context.Background()) }, nil
	}

	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	plugins, err := h.LoadDir(ctx, dir)
	if err == nil && len(plugins) == 0 {
		err = fmt.Errorf("%s holds no agent file (*.yaml) and no plugin (*.wasm)", dir)
	}
	if err != nil {
		h.Close(context.Background())
		return nil, nil, err
	}
	return pluginTools(r, plugins), func() { h.Close(context.Background()) }, nil
}

// deploymentTools returns the tools of the plugins a deployment's agents load, sorted
// by name.
func deploymentTools(d *deploy.Deployment) []agent.Tool {
	var plugins []*host.Plugin
	for _, a := range d.Agents() {
		for _, name := range a.Plugins {
			if p := d.Host().Plugin(name); p != nil && !slices.Contains(plugins, p) {
				plugins = append(plugins, p)
			}
		}
	}
	return pluginTools(d.Registry(), plugins)
}

// pluginTools returns the tools of plugins, registered in r, sorted by name.
func pluginTools(r *agent.Registry, plugins []*host.Plugin) []agent.Tool {
	var tools []agent.Tool
	for _, p := range plugins {
		for _, key := range p.Keys() {
			if t, ok := r.Lookup(key).(agent.Tool); ok {
				tools = append(tools, t)
			}
		}
	}
	slices.SortFunc(tools, func(a, b agent.Tool) int { return strings.Compare(a.Name(), b.Name()) })
	return tools
}

// serveHTTP serves handler at mcpPath on addr until ctx is done, telling ready the
// endpoint's URL once it listens.
func serveHTTP(ctx context.Context, addr string, handler http.Handler, ready func(url string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mux := http.NewServeMux()
	mux.Handle(mcpPath, handler)
	// Bounded as serve's connections are; not each write, since clients hold event
	// streams open between messages.
	t := server.DefaultTimeouts
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, IdleTimeout: t.Idle}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		// Clients keep event streams open: give them a moment, then cut them.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	ready("http://" + ln.Addr().String() + mcpPath)
	err = srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	return err
}

// nopWriteCloser is a writer the MCP transport may close without closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
