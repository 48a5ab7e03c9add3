package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/cassette"
	"github.com/terrarium-ai/terrarium/host/conformance"
	"github.com/terrarium-ai/terrarium/host/oci"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

func pluginCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "build":
		return pluginBuild(ctx, args[1:], stdout, stderr)
	case "inspect":
		return pluginInspect(ctx, args[1:], stdout, stderr)
	case "test":
		return pluginTest(ctx, args[1:], stdout, stderr)
	case "new":
		return pluginNew(ctx, args[1:], stdout, stderr)
	case "call":
		return pluginCall(ctx, args[1:], stdout, stderr)
	case "keygen":
		return pluginKeygen(ctx, args[1:], stdout, stderr)
	case "sign":
		return pluginSign(ctx, args[1:], stdout, stderr)
	case "verify":
		return pluginVerify(ctx, args[1:], stdout, stderr)
	case "push":
		return pluginPush(ctx, args[1:], stdout, stderr)
	case "pull":
		return pluginPull(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "terrarium plugin: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// parse parses flags that may come before or after the one positional argument.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (string, bool) {
	pos, ok := parseArgs(fs, args, 1, stderr)
	if !ok {
		return "", false
	}
	return pos[0], true
}

// parseArgs parses flags that may come before, between or after n positional
// arguments.
func parseArgs(fs *flag.FlagSet, args []string, n int, stderr io.Writer) ([]string, bool) {
	fs.SetOutput(stderr)
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if len(pos) != n {
		want := fmt.Sprintf("%d arguments", n)
		if n == 1 {
			want = "exactly one argument"
		}
		fmt.Fprintf(stderr, "terrarium %s: want %s, got %d\n", fs.Name(), want, len(pos))
		fs.Usage()
		return nil, false
	}
	return pos, true
}

func pluginBuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin build", flag.ContinueOnError)
	out := fs.String("o", "", "write the .wasm here (default: print the cached file's path)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium plugin build <dir> [-o file.wasm]\n\nBuilds the Go main package in <dir> with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared.")
		fs.PrintDefaults()
	}
	dir, ok := parse(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	fmt.Fprintf(stderr, "building %s ...\n", dir)
	start := time.Now()
	path, err := pluginbuild.Build(ctx, dir)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin build: %v\n", err)
		return exitFailed
	}
	module, err := os.ReadFile(path)
	if err == nil {
		err = host.CheckModule(module)
	}
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin build: %s built, but: %v\n", dir, err)
		return exitFailed
	}
	if *out != "" {
		data, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(*out, data, 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "terrarium plugin build: %v\n", err)
			return exitFailed
		}
		path = *out
	}
	info, err := os.Stat(path)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin build: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "built in %v: %d bytes\n", time.Since(start).Round(time.Millisecond), info.Size())
	fmt.Fprintln(stdout, path)
	return exitOK
}

// grants are the manifest flags shared by inspect and test.
type grants struct {
	manifest    string
	state       string
	timeout     time.Duration
	memoryPages uint
	http, cfg   multiFlag
	secrets     multiFlag
}

func (g *grants) register(fs *flag.FlagSet) {
	fs.StringVar(&g.manifest, "manifest", "", "a JSON manifest file (host.Manifest); the flags below add to it")
	fs.StringVar(&g.state, "state", "", "grant session state access: none, read or write")
	fs.DurationVar(&g.timeout, "timeout", 0, "the timeout per call (default 30s)")
	fs.UintVar(&g.memoryPages, "memory-pages", 0, "the memory limit per instance, in 64 KiB pages (default 1024)")
	fs.Var(&g.http, "http", "grant an HTTP host, host[:port]; without a port, the scheme's default only (repeatable)")
	fs.Var(&g.cfg, "config", "grant a config value, key=value (repeatable)")
	fs.Var(&g.secrets, "secret", "grant a secret from the environment, NAME or NAME=ENVVAR, sent only to the one --http host\nin the Authorization header (other hosts or headers: --manifest) (repeatable)")
}

func (g *grants) build() (host.Manifest, error) {
	var m host.Manifest
	if g.manifest != "" {
		var err error
		if m, err = host.ReadManifest(g.manifest); err != nil {
			return m, err
		}
	}
	if g.state != "" {
		m.State = plugin.StateAccess(g.state)
	}
	if g.timeout > 0 {
		m.Timeout = host.Duration{Duration: g.timeout}
	}
	if g.memoryPages > 0 {
		m.MemoryPages = uint32(g.memoryPages)
	}
	m.HTTP = append(m.HTTP, g.http...)
	for _, kv := range g.cfg {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return m, fmt.Errorf("--config %q: want key=value", kv)
		}
		if m.Config == nil {
			m.Config = map[string]string{}
		}
		m.Config[k] = v
	}
	for _, s := range g.secrets {
		name, env, ok := strings.Cut(s, "=")
		if !ok {
			env = name
		}
		if m.Secrets == nil {
			m.Secrets = map[string]host.Secret{}
		}
		m.Secrets[name] = host.Secret{Env: env}
	}
	return m, nil
}

// wasmCommand is what inspect and test share: a .wasm argument, grants and --json.
type wasmCommand struct {
	name     string // "plugin inspect"
	file     string
	asJSON   bool
	verbose  bool
	manifest host.Manifest
	wasm     []byte
	oci      ociFlags
}

// parseWasmCommand parses the command line of a command taking a .wasm file and
// grants, and reads the file. It returns the exit status to stop with, if any.
func parseWasmCommand(name, help, jsonHelp string, args []string, stderr io.Writer, more ...func(*flag.FlagSet)) (*wasmCommand, int, bool) {
	c := &wasmCommand{name: name}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	for _, register := range more {
		register(fs)
	}
	fs.BoolVar(&c.asJSON, "json", false, jsonHelp)
	fs.BoolVar(&c.verbose, "v", false, "show the plugin's log lines (on stderr)")
	var g grants
	g.register(fs)
	c.oci.register(fs, false)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: terrarium %s <file.wasm | oci://registry/repository:tag[@sha256:...]> [--json] [grants]\n\n%s\n", name, help)
		fs.PrintDefaults()
	}
	file, ok := parse(fs, args, stderr)
	if !ok {
		return nil, exitUsage, false
	}
	c.file = file
	m, err := g.build()
	if err != nil {
		fmt.Fprintf(stderr, "terrarium %s: %v\n", name, err)
		return nil, exitUsage, false
	}
	if err := m.Validate(); err != nil {
		fmt.Fprintf(stderr, "terrarium %s: manifest: %v\n", name, err)
		return nil, exitUsage, false
	}
	c.manifest = m
	if oci.IsReference(file) {
		return c, exitOK, true // the command fetches what it needs
	}
	if c.wasm, err = os.ReadFile(file); err != nil {
		fmt.Fprintf(stderr, "terrarium %s: %v\n", name, err)
		return nil, exitFailed, false
	}
	return c, exitOK, true
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func pluginInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, code, ok := parseWasmCommand("plugin inspect",
		"Shows what a plugin is without loading it. Grants matter when its description reads config.",
		"print JSON", args, stderr)
	if !ok {
		return code
	}
	if oci.IsReference(c.file) {
		return inspectReference(ctx, c, stdout, stderr)
	}
	in, err := inspect(ctx, c.wasm, c.manifest)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin inspect: %s: %v\n", c.file, err)
		return exitFailed
	}
	if c.asJSON {
		out := map[string]any{"file": c.file, "sha256": in.SHA256, "size": in.Size, "imports": in.Imports, "exports": in.Exports, "descriptor": in.Descriptor}
		if in.DescribeErr != nil {
			out["describeError"] = in.DescribeErr.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(out)
	} else {
		printInspection(stdout, c.file, in)
	}
	if in.Descriptor == nil {
		return exitFailed
	}
	return exitOK
}

// inspect inspects a module in a host of its own.
func inspect(ctx context.Context, wasm []byte, m host.Manifest) (*host.Inspection, error) {
	h, err := host.New(nil, host.WithLogger(quietLogger()))
	if err != nil {
		return nil, err
	}
	defer h.Close(context.Background())
	return h.Inspect(ctx, wasm, m)
}

func printInspection(w io.Writer, file string, in *host.Inspection) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s\n", filepath.Clean(file))
	fmt.Fprintf(tw, "size\t%d bytes\n", in.Size)
	fmt.Fprintf(tw, "sha256\t%s\n", in.SHA256)
	if d := in.Descriptor; d != nil {
		fmt.Fprintf(tw, "plugin\t%s %s (ABI %d)\n", d.Name, d.Version, d.ABI)
		if d.Description != "" {
			fmt.Fprintf(tw, "description\t%s\n", d.Description)
		}
		for _, m := range d.Models {
			label := ""
			if m.Info != nil && m.Info.Label != "" {
				label = " — " + m.Info.Label
			}
			fmt.Fprintf(tw, "model\t/model/%s/%s%s\n", d.Name, m.Name, label)
		}
		for _, t := range d.Tools {
			fmt.Fprintf(tw, "tool\t/tool/%s/%s — %s\n", d.Name, t.Name, t.Description)
		}
		for _, h := range d.Handlers {
			fmt.Fprintf(tw, "handler\t/handler/%s/%s at %v\n", d.Name, h.Name, h.Points)
		}
		printAsks(tw, d.Capabilities)
	} else {
		fmt.Fprintf(tw, "describe\tFAILED: %v\n", in.DescribeErr)
	}
	fmt.Fprintf(tw, "exports\t%s\n", strings.Join(in.Exports, ", "))
	byModule := map[string][]string{}
	var modules []string
	for _, imp := range in.Imports {
		mod, name, _ := strings.Cut(imp, ".")
		if _, seen := byModule[mod]; !seen {
			modules = append(modules, mod)
		}
		if !slices.Contains(byModule[mod], name) {
			byModule[mod] = append(byModule[mod], name)
		}
	}
	for i, mod := range modules {
		label := ""
		if i == 0 {
			label = "imports"
		}
		fmt.Fprintf(tw, "%s\t%s: %s\n", label, mod, strings.Join(byModule[mod], ", "))
	}
	tw.Flush()
}

// printAsks prints what a plugin asks to be granted.
func printAsks(w io.Writer, c plugin.Capabilities) {
	state := string(c.State)
	if state == "" {
		state = "none"
	}
	fmt.Fprintf(w, "asks for\tstate %s; http %v; config %v; secrets %v\n", state, c.HTTP, c.Config, c.Secrets)
}

func pluginTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var record, replay string
	c, code, ok := parseWasmCommand("plugin test",
		"Runs the conformance suite; exits 1 if any check fails. Grant what the plugin needs\n(e.g. --state write, --http 127.0.0.1:8080 --config baseURL=http://127.0.0.1:8080/v1).\nA provider plugin is tested offline with --replay of a cassette made once with --record.",
		"print the report as JSON (for CI)", args, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&record, "record", "", "record the plugin's HTTP exchanges, secrets redacted, to this cassette file")
			fs.StringVar(&replay, "replay", "", "answer the plugin's HTTP requests from this cassette file, offline")
		})
	if !ok {
		return code
	}
	if record != "" && replay != "" {
		fmt.Fprintln(stderr, "terrarium plugin test: give --record or --replay, not both")
		return exitUsage
	}
	if oci.IsReference(c.file) {
		// Exactly what operators will pull: the same module, its signature checked
		// when a policy is given.
		pulled, err := c.oci.pull(ctx, c.file, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "terrarium plugin test: %v\n", err)
			return exitFailed
		}
		c.wasm = pulled.Module
	}
	var hostOpts []host.Option
	var recorder *cassette.Recorder
	switch {
	case record != "":
		recorder = cassette.NewRecorder(nil, secretValues(c.manifest))
		hostOpts = append(hostOpts, host.WithHTTPTransport(recorder))
	case replay != "":
		player, err := cassette.Load(replay, secretValues(c.manifest))
		if err != nil {
			fmt.Fprintf(stderr, "terrarium plugin test: %v\n", err)
			return exitUsage
		}
		hostOpts = append(hostOpts, host.WithHTTPTransport(player))
	}
	fmt.Fprintf(stderr, "testing %s ...\n", c.file)
	n := 0
	var log *slog.Logger
	if c.verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	rep, err := conformance.Run(ctx, c.wasm, conformance.Options{
		Manifest: c.manifest,
		Log:      log,
		Host:     hostOpts,
		Progress: func(r conformance.Result) {
			n++
			fmt.Fprintf(stderr, "  %3d  %-4s  %s\n", n, r.Outcome, r.Check)
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin test: %v\n", err)
		return exitFailed
	}
	if recorder != nil {
		if err := recorder.Save(record); err != nil {
			fmt.Fprintf(stderr, "terrarium plugin test: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stderr, "recorded %d HTTP exchanges in %s\n", len(recorder.Cassette().Exchanges), record)
	}
	if c.asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		fmt.Fprintln(stdout)
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin test: %v\n", err)
		return exitFailed
	}
	if !rep.Passed {
		return exitFailed
	}
	return exitOK
}

// secretValues are the values of a manifest's secrets by name: what a cassette
// must never hold.
func secretValues(m host.Manifest) map[string]string {
	out := map[string]string{}
	for name, s := range m.Secrets {
		v := s.Value
		if v == "" && s.Env != "" {
			v = os.Getenv(s.Env)
		}
		out[name] = v
	}
	return out
}

// quietLogger keeps the host's logs out of the command's output.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
