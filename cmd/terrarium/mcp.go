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
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/mcp"
)

// mcpPath is where --http serves the MCP endpoint.
const mcpPath = "/mcp"

func mcpServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	addr := fs.String("http", "", "serve streamable HTTP at `host:port` (path "+mcpPath+") instead of stdio")
	var patterns multiFlag
	fs.Var(&patterns, "tool", "serve only the tools matching this `pattern`, e.g. calculator/calc or clock/* (repeatable)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: terrarium mcp <plugin-dir> [--http host:port] [--tool pattern]...

Serves the tools of the plugins in <plugin-dir> to MCP clients, over stdio (standard
input and output carry the protocol; logs go to standard error) or streamable HTTP.
Each <name>.wasm is loaded with the manifest <name>.json beside it, if any (the JSON
"plugin test --manifest" reads): its grants, limits and SHA-256 pin. A tool
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

	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(log))
	if err != nil {
		return fail(err)
	}
	defer h.Close(context.Background())
	if err := loadTools(ctx, h, dir); err != nil {
		return fail(err)
	}
	tools, err := mcp.RegistryTools(r, patterns...)
	if err != nil {
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
		err = serveHTTP(ctx, *addr, srv.Handler(), func(url string) {
			fmt.Fprintf(stderr, "serving %d tools over streamable HTTP at %s: %s\n", len(tools), url, served)
		})
	}
	if err != nil && ctx.Err() == nil {
		return fail(err)
	}
	return exitOK
}

// loadTools loads what dir holds into the host: a directory of plugins, each with its
// manifest. (A directory of agent files will load here too, through their plugins'
// manifests, once Terrarium reads agent files.)
func loadTools(ctx context.Context, h *host.Host, dir string) error {
	plugins, err := h.LoadDir(ctx, dir)
	if err != nil {
		return err
	}
	if len(plugins) == 0 {
		return fmt.Errorf("%s holds no plugin (*.wasm)", dir)
	}
	return nil
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
