package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/server"
)

type serveFlags struct {
	addr, data, store string
	reflectionAddr    string
	genkitDir         string
	dev               bool
	maxBody           int64
	idle, shutdown    time.Duration
	timeouts          server.Timeouts
	perSession        int
	allowedHosts      multiFlag
	drain             time.Duration
	tenants           string
	trusted           trustedKeys
	oci               ociFlags
}

func serveCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	fs.StringVar(&f.addr, "addr", "localhost:8080", "listen on this address")
	fs.StringVar(&f.data, "data", "terrarium-data", "keep snapshots in a Badger database in this directory")
	fs.StringVar(&f.store, "store", "", "keep snapshots in this PostgreSQL database (postgres://...), shared with every host given the same: agents keep their sessions there unless their file names another store")
	fs.StringVar(&f.tenants, "tenants", "", "serve the tenants of this file, each its agents behind API keys (kept in the data directory); the admin API's key is $"+adminKeyEnv)
	fs.BoolVar(&f.dev, "dev", false, "development mode: serve Genkit's reflection API on -reflection-addr and announce it in .genkit/runtimes")
	fs.StringVar(&f.reflectionAddr, "reflection-addr", "127.0.0.1:3100", "the reflection API's address, with -dev")
	fs.StringVar(&f.genkitDir, "genkit-dir", ".", "with -dev, the project directory whose .genkit/runtimes Genkit's tools read")
	fs.Int64Var(&f.maxBody, "max-body", server.DefaultMaxBodyBytes, "the largest request body accepted, in bytes")
	fs.DurationVar(&f.idle, "idle", server.DefaultIdleTimeout, "close sessions idle this long (kept sessions reopen on their next turn)")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", 30*time.Second, "on SIGTERM, the longest the shutdown may take: turns detached by the drain may settle until then, and are aborted after")
	fs.DurationVar(&f.drain, "drain-timeout", 20*time.Second, "on SIGTERM, how long running turns may finish, refusing new ones, before those still running are detached (at most -shutdown-timeout)")
	d := server.DefaultTimeouts
	fs.DurationVar(&f.timeouts.ReadHeader, "read-header-timeout", d.ReadHeader, "the longest a client may take to send a request's headers")
	fs.DurationVar(&f.timeouts.Read, "read-timeout", d.Read, "the longest a client may take to send a whole request, body included")
	fs.DurationVar(&f.timeouts.Write, "write-timeout", d.Write, "the longest one write to a client may wait: an answer, a streamed chunk (a client that stops reading loses its stream)")
	fs.DurationVar(&f.timeouts.Idle, "keepalive-timeout", d.Idle, "close keep-alive connections idle this long")
	fs.DurationVar(&f.timeouts.WebSocketIdle, "websocket-idle-timeout", d.WebSocketIdle, "close WebSockets on which nothing happened this long")
	fs.IntVar(&f.perSession, "websockets-per-session", server.DefaultWebSocketsPerSession, "the most WebSockets holding one session")
	fs.Var(&f.allowedHosts, "allowed-hosts", "without -tenants, also answer requests naming this `host` (besides loopback names and IP addresses), e.g. chat.example.org (repeatable)")
	fs.Var(&f.trusted, "trusted-key", "load only plugin files signed by this key (terrarium plugin sign): ed25519:<base64> or a .pub file (repeatable);\nregistry plugins are then checked with --cosign-key or --certificate-identity")
	f.oci.register(fs, true)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium serve [flags] [dir]\n\nServes the agents defined by the agent files (*.yaml) in dir (default .).")
		fs.PrintDefaults()
	}
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if f.store != "" && !strings.HasPrefix(f.store, "postgres://") && !strings.HasPrefix(f.store, "postgresql://") {
		fmt.Fprintln(stderr, "terrarium serve: -store: want a postgres:// URL")
		return exitUsage
	}
	dir := "."
	switch fs.NArg() {
	case 0:
	case 1:
		dir = fs.Arg(0)
	default:
		fs.Usage()
		return exitUsage
	}
	if err := serve(ctx, dir, f, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "terrarium serve: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// progressLogger prints what loading reports, one readable line per event.
func progressLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func serve(ctx context.Context, dir string, f serveFlags, stdout, stderr io.Writer) error {
	log := progressLogger(stderr)
	files, err := deploy.ReadDir(dir)
	if err != nil {
		return err
	}
	mp, metrics, err := server.NewPrometheus()
	if err != nil {
		return err
	}
	var d *deploy.Deployment
	var agents []*deploy.Agent
	opts := []server.Option{server.WithLogger(log), server.WithMetrics(mp, metrics),
		server.WithMaxBodyBytes(f.maxBody), server.WithIdleTimeout(f.idle), server.WithTimeouts(f.timeouts),
		server.WithWebSocketsPerSession(f.perSession), server.WithAllowedHosts(f.allowedHosts...)}
	if f.tenants == "" {
		puller, err := f.oci.puller(log, false)
		if err != nil {
			return err
		}
		policy, err := f.oci.verifier("terrarium serve")
		if err != nil {
			return err
		}
		dopts := []deploy.Option{deploy.WithDataDir(f.data), deploy.WithLogger(log), deploy.WithMeterProvider(mp),
			deploy.WithTrustedKeys(f.trusted...), deploy.WithPuller(puller), deploy.WithSignaturePolicy(policy)}
		if f.store != "" {
			dopts = append(dopts, deploy.WithPostgres(f.store))
		}
		d, err = deploy.New(ctx, files, dopts...)
		if err != nil {
			return err
		}
		// Closing the deployment last closes its stores, after every session's last snapshot.
		defer d.Close(context.Background())
		agents = d.Agents()
	} else {
		t, err := deployTenants(ctx, files, f, log, mp)
		// Closing the tenants last closes their store, after every session's last snapshot.
		defer t.close()
		if err != nil {
			return err
		}
		opts = append(opts, server.WithTenants(t.keys, t.admin, t.tenants...))
		for _, tn := range t.tenants {
			agents = append(agents, tn.Deployment.Agents()...)
		}
		fmt.Fprintf(stdout, "serving %d tenants; make their API keys with the admin API (docs/serving.md)\n", len(t.tenants))
	}
	srv, err := server.New(d, opts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	hs := srv.HTTPServer(srv.Handler())
	servers := []*http.Server{hs}
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()

	if f.dev {
		rln, err := net.Listen("tcp", f.reflectionAddr)
		if err != nil {
			return fmt.Errorf("the reflection API: %w", err)
		}
		url := "http://" + rln.Addr().String()
		id := rand.Text()
		path, err := server.WriteRuntimeFile(f.genkitDir, id, url)
		if err != nil {
			return err
		}
		defer os.Remove(path)
		rs := srv.HTTPServer(srv.ReflectionHandler(id))
		servers = append(servers, rs)
		go func() { errc <- rs.Serve(rln) }()
		fmt.Fprintf(stdout, "Genkit's reflection API on %s (runtime file %s)\n", url, path)
	}
	url := "http://" + ln.Addr().String()
	var names []string
	for _, a := range agents {
		if !slices.Contains(names, a.Name) {
			names = append(names, a.Name)
		}
	}
	log.Info("serving", "addr", ln.Addr().String(), "agents", len(names))
	fmt.Fprintf(stdout, "serving %d agents (%s) on %s\n", len(names), strings.Join(names, ", "), url)
	fmt.Fprintf(stdout, "open %s/ to chat, or run: terrarium chat %s\n", url, url)

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	// Drain while the listeners still answer: a load balancer's probe learns the host
	// is not ready, and a request that reaches it anyway is refused with a Retry-After
	// rather than a connection refused.
	log.Info("stopping: draining", "drain-timeout", f.drain, "shutdown-timeout", f.shutdown)
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdown)
	defer cancel()
	dctx, dcancel := context.WithTimeout(sctx, f.drain)
	srv.Drain(dctx)
	dcancel()
	log.Info("stopping: closing the listeners and the sessions")
	done := make(chan error, len(servers))
	for _, s := range servers {
		go func() { done <- s.Shutdown(sctx) }()
	}
	errs := []error{srv.Shutdown(sctx)}
	for range servers {
		errs = append(errs, <-done)
	}
	// Past the deadline, what is left is cut: a client that stopped reading does not
	// hold the process.
	for _, s := range servers {
		s.Close()
	}
	if err := errors.Join(errs...); err != nil {
		log.Warn("stopped, not cleanly", "error", err)
	} else {
		log.Info("stopped")
	}
	return nil
}
