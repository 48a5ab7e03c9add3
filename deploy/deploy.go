package deploy

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/prompt"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/oci"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
	"github.com/terrarium-ai/terrarium/store/pgstore"
)

// The types of a prompt agent's session flow: its status is any JSON its tools and
// handlers report, its custom state what its plugins keep.
type (
	promptStatus = json.RawMessage
	promptState  = map[string]any
)

// Deployment is what a set of agent files defines: their plugins loaded with the
// grants the files give them, and one session flow per agent, in one registry. It is
// what `terrarium serve` serves; an application embedding Terrarium builds one the
// same way.
type Deployment struct {
	reg     *agent.Registry
	host    *host.Host
	tenant  string // "" unless WithTenant
	log     *slog.Logger
	disk    store.Store // the Badger store (or the one given), when an agent keeps snapshots on it
	ownDisk bool
	// shared is the PostgreSQL store (or the one given), when an agent keeps snapshots
	// on it.
	shared    store.Store
	ownShared bool
	memory    *store.Memory
	agents    map[string]*Agent
	plugins   map[string]*loadedPlugin // by resolved path
	meter     *meters
	usage     func(context.Context, *abi.GenerationUsage) // nil without WithUsage
	puller    *oci.Puller
	policy    *oci.Verifier
	trusted   []string // WithTrustedKeys's, as manifests write them
	// toolSessions keeps the sessions of tools run outside the agents' turns.
	toolSessions *ToolSessions
	// defined lists the registry keys the deployment defined (agents, their snapshot
	// actions, prompts, built-in tools), which Close removes.
	defined []string
}

type loadedPlugin struct {
	plugin *host.Plugin
	spec   Plugin // as first given
	by     string // file:line that first loaded it
}

// Option configures New.
type Option interface {
	apply(*config) error
}

type config struct {
	reg      *agent.Registry
	dataDir  string
	store    store.Store
	postgres string
	log      *slog.Logger
	hostOpts []host.Option
	meter    metric.MeterProvider
	usage    func(context.Context, *abi.GenerationUsage)

	root     *host.Host // with WithTenant
	tenant   string
	tenantCf host.TenantConfig

	puller      *oci.Puller   // nil: made when a file names an oci:// plugin
	policy      *oci.Verifier // nil: registry plugins need no signature
	trustedKeys []ed25519.PublicKey
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithRegistry defines the agents in r, where the application may have defined models,
// tools and handlers of its own for agent files to name.
func WithRegistry(r *agent.Registry) Option {
	return optionFunc(func(c *config) error {
		if r == nil {
			return fmt.Errorf("deploy: %w: WithRegistry(nil)", agent.ErrInvalidOption)
		}
		c.reg = r
		return nil
	})
}

// WithDataDir keeps the snapshots of agents with store badger (the default) in a
// Badger database in dir, created if needed and closed by Close.
func WithDataDir(dir string) Option {
	return optionFunc(func(c *config) error {
		c.dataDir = dir
		return nil
	})
}

// WithStore keeps the snapshots of agents with store badger in st instead of a Badger
// database of the deployment's own, and those with store postgres too unless
// WithPostgres is given; Close leaves it open.
func WithStore(st store.Store) Option {
	return optionFunc(func(c *config) error {
		c.store = st
		return nil
	})
}

// WithPostgres keeps the snapshots of agents with store postgres in the PostgreSQL
// database at url (see pgstore.Open), opened by New and closed by Close. It also makes
// postgres the default store, so that every host of a fleet serving the same agent
// files shares their sessions unless a file says otherwise.
func WithPostgres(url string) Option {
	return optionFunc(func(c *config) error {
		if url == "" {
			return fmt.Errorf("deploy: %w: WithPostgres(\"\")", agent.ErrInvalidOption)
		}
		c.postgres = url
		return nil
	})
}

// WithLogger sets where loading is reported (plugins built and loaded with their
// hashes and grants, agents defined) and the plugin host's logger. The default is
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		c.log = l
		return nil
	})
}

// WithHostOptions configures the plugin host (its compilation cache, HTTP transport).
func WithHostOptions(opts ...host.Option) Option {
	return optionFunc(func(c *config) error {
		c.hostOpts = append(c.hostOpts, opts...)
		return nil
	})
}

// WithTenant builds the deployment as the tenant id's, over root's compiled modules:
// its plugins load in a tenant view of root (see host.Host.Tenant) with cfg's secrets,
// admission and gate, so that their instances serve this deployment only, and its
// agents keep their sessions under store namespaces of their own ("id/agent"), which
// no other tenant's agent of the same name reads. cfg.Registry defaults to the
// deployment's. Host options are root's to give; Close closes the view, not root.
func WithTenant(root *host.Host, id string, cfg host.TenantConfig) Option {
	return optionFunc(func(c *config) error {
		if root == nil {
			return fmt.Errorf("deploy: %w: WithTenant of no host", agent.ErrInvalidOption)
		}
		c.root, c.tenant, c.tenantCf = root, id, cfg
		return nil
	})
}

// WithMeterProvider records model and tool latency and plugin calls and faults with
// mp (default: OpenTelemetry's global provider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		c.meter = mp
		return nil
	})
}

// WithUsage hands what each of the agents' model calls used, as its model reported
// it, to record (a tenant.Limiter's CountUsage, to bound its tenant's tokens a day).
// A call whose model reports no usage is not recorded.
func WithUsage(record func(context.Context, *abi.GenerationUsage)) Option {
	return optionFunc(func(c *config) error {
		c.usage = record
		return nil
	})
}

// WithPuller pulls the plugins agent files name by reference
// (oci://registry/repository:tag@sha256:<digest>) with p: its registry client, its
// cache, whether it allows floating tags. Deployments sharing one puller (a server's
// tenants) share its cache. The default is oci.NewPuller's.
func WithPuller(p *oci.Puller) Option {
	return optionFunc(func(c *config) error {
		c.puller = p
		return nil
	})
}

// WithSignaturePolicy requires every plugin pulled from a registry to carry a cosign
// signature that v accepts (see oci.Policy): an unsigned or wrongly signed one fails
// the deployment with an error naming its reference, its digest and the policy.
// Plugins read from files are checked against WithTrustedKeys instead.
func WithSignaturePolicy(v *oci.Verifier) Option {
	return optionFunc(func(c *config) error {
		c.policy = v
		return nil
	})
}

// WithTrustedKeys requires every plugin read from a file to be signed by one of keys,
// its signature (from terrarium plugin sign) in <file>.wasm.sig beside it (as
// host.WithTrustedKeys, for this deployment's files only). A plugin pulled from a
// registry is checked against WithSignaturePolicy, which a deployment trusting keys
// must then have: a registry plugin never loads unchecked where file plugins must be
// signed.
func WithTrustedKeys(keys ...ed25519.PublicKey) Option {
	return optionFunc(func(c *config) error {
		c.trustedKeys = append(c.trustedKeys, keys...)
		return nil
	})
}

// New builds a deployment from agent files: it loads (building first, where a path is
// a Go plugin's directory) every plugin the files name, with their grants, checks that
// every model, tool and handler they name exists, and defines one agent per file.
// Any error names the file, line and field at fault, and nothing stays loaded.
func New(ctx context.Context, files []*File, opts ...Option) (*Deployment, error) {
	cfg := config{log: slog.Default(), meter: otel.GetMeterProvider()}
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.reg == nil {
		cfg.reg = agent.NewRegistry()
	}
	if cfg.root != nil {
		cfg.log = cfg.log.With("tenant", cfg.tenant)
	}
	// The deployment reports each plugin it loads itself, with its grants: the host
	// need only say what goes wrong.
	var h *host.Host
	var err error
	if cfg.root != nil {
		tc := cfg.tenantCf
		if tc.Registry == nil {
			tc.Registry = cfg.reg
		}
		h, err = cfg.root.Tenant(cfg.tenant, tc)
	} else {
		hostLog := slog.New(warnings{cfg.log.Handler()})
		h, err = host.New(cfg.reg, append([]host.Option{host.WithLogger(hostLog)}, cfg.hostOpts...)...)
	}
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	m, err := newMeters(cfg.meter)
	if err != nil {
		return nil, fmt.Errorf("deploy: metrics: %w", err)
	}
	d := &Deployment{reg: cfg.reg, host: h, tenant: cfg.tenant, log: cfg.log, memory: store.NewMemory(),
		agents: map[string]*Agent{}, plugins: map[string]*loadedPlugin{}, meter: m, usage: cfg.usage,
		puller: cfg.puller, policy: cfg.policy}
	for _, k := range cfg.trustedKeys {
		d.trusted = append(d.trusted, host.FormatPublicKey(k))
	}
	if err := d.build(ctx, files, cfg); err != nil {
		d.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	d.toolSessions = d.newToolSessions()
	return d, nil
}

func (d *Deployment) build(ctx context.Context, files []*File, cfg config) error {
	names := map[string]*File{}
	for _, f := range files {
		if prev, dup := names[f.Name]; dup {
			return f.errorf("name", "agent %q is also defined in %s:%d", f.Name, prev.Path, prev.Line("name"))
		}
		names[f.Name] = f
		if err := d.openStore(ctx, f, cfg); err != nil {
			return err
		}
	}
	if err := d.loadPlugins(ctx, files); err != nil {
		return err
	}
	for _, f := range files {
		a, err := d.define(f, cfg.storeOf(f))
		if err != nil {
			return err
		}
		d.agents[a.Name] = a
		d.log.Info("agent ready", "agent", a.Name, "file", a.File, "model", a.Model, "tools", a.Tools, "snapshots", a.SnapshotStore)
	}
	return nil
}

// storeOf returns the store a file's agent keeps its snapshots in: the one the file
// names, or else postgres with WithPostgres and badger without.
func (c config) storeOf(f *File) string {
	if f.Snapshots.Store == "" && c.postgres != "" {
		return StorePostgres
	}
	return f.SnapshotStore()
}

// openStore opens the on-disk or shared store a file's agent needs, if not yet open.
func (d *Deployment) openStore(ctx context.Context, f *File, cfg config) error {
	switch cfg.storeOf(f) {
	case StorePostgres:
		if d.shared != nil {
			return nil
		}
		if cfg.postgres == "" && cfg.store != nil {
			d.shared = cfg.store
			return nil
		}
		if cfg.postgres == "" {
			return f.errorf("snapshots.store", "postgres needs the database's URL (terrarium serve -store postgres://...)")
		}
		st, err := pgstore.Open(ctx, cfg.postgres, pgstore.WithLogger(d.log))
		if err != nil {
			return fmt.Errorf("deploy: opening the snapshot store in PostgreSQL: %w", err)
		}
		d.shared, d.ownShared = st, true
		d.log.Info("snapshots in PostgreSQL")
	case StoreBadger:
		if d.disk != nil {
			return nil
		}
		switch {
		case cfg.store != nil:
			d.disk = cfg.store
		case cfg.dataDir != "":
			st, err := badgerstore.Open(cfg.dataDir)
			if err != nil {
				return fmt.Errorf("deploy: opening the snapshot store in %s: %w", cfg.dataDir, err)
			}
			d.disk, d.ownDisk = st, true
			d.log.Info("snapshots in Badger", "dir", cfg.dataDir)
		default:
			return f.errorf("snapshots.store", "badger needs a data directory (or say store: memory or none)")
		}
	}
	return nil
}

// loadPlugins loads the plugins the files name, compiling them at once
// (host.LoadAll). A plugin several files name is loaded once, and only if they grant
// it the same.
func (d *Deployment) loadPlugins(ctx context.Context, files []*File) error {
	type pending struct {
		f    *File
		at   string
		path string
		spec Plugin
	}
	var (
		wanted []pending
		srcs   []host.Source
		first  = map[string]pending{} // by resolved path
	)
	for _, f := range files {
		for i, spec := range f.Plugins {
			at := fmt.Sprintf("plugins[%d]", i)
			path := f.pluginPath(spec)
			if prev, ok := first[path]; ok {
				if !reflect.DeepEqual(prev.spec, spec) {
					return f.errorf(at, "plugin %s is also loaded by %s:%d with other grants or pin: one plugin, one set of grants",
						spec.Path, prev.f.Path, prev.f.Line(prev.at))
				}
				continue
			}
			src, err := d.pluginSource(ctx, path, spec)
			if err != nil {
				return f.wrap(at+".path", err)
			}
			if spec.SHA256 != "" {
				if sum := sha256.Sum256(src.Wasm); hex.EncodeToString(sum[:]) != spec.SHA256 {
					return f.errorf(at+".sha256", "the module's SHA-256 is %x, not the pinned one", sum)
				}
			}
			p := pending{f: f, at: at, path: path, spec: spec}
			first[path] = p
			wanted = append(wanted, p)
			srcs = append(srcs, src)
		}
	}
	loaded, err := d.host.LoadAll(ctx, srcs)
	for i, p := range loaded {
		w := wanted[i]
		d.plugins[w.path] = &loadedPlugin{plugin: p, spec: w.spec, by: fmt.Sprintf("%s:%d", w.f.Path, w.f.Line(w.at))}
		d.log.Info("plugin loaded", "plugin", p.Name(), "version", p.Descriptor().Version, "sha256", p.SHA256(),
			"grants", describeGrants(p.Manifest()), "actions", p.Keys())
	}
	if err != nil {
		w := wanted[len(loaded)]
		return w.f.wrap(w.at, err)
	}
	return nil
}

// pluginSource reads a plugin (building a Go plugin's directory, pulling a
// reference) with the grants and pin of its spec, and the signature beside its .wasm
// file if any: a built directory has none, and so loads only where no signature is
// required.
func (d *Deployment) pluginSource(ctx context.Context, path string, spec Plugin) (host.Source, error) {
	m := spec.Grants.Manifest
	m.SHA256 = spec.SHA256
	if oci.IsReference(path) {
		return d.pull(ctx, path, m)
	}
	wasm, err := d.pluginFile(ctx, path)
	if err != nil {
		return host.Source{}, err
	}
	m.TrustedKeys = append(slices.Clone(m.TrustedKeys), d.trusted...)
	return host.ReadSource(wasm, m)
}

// pull pulls a plugin from a registry (or finds it in the cache), its signature
// checked against the deployment's policy.
func (d *Deployment) pull(ctx context.Context, ref string, m host.Manifest) (host.Source, error) {
	r, err := oci.ParseReference(ref)
	if err != nil {
		return host.Source{}, err
	}
	if d.policy == nil && len(d.trusted) > 0 {
		return host.Source{}, fmt.Errorf("%s: plugins must be signed here (trusted keys), and a registry plugin is signed with cosign: "+
			"give the policy its signatures are checked against (terrarium serve --cosign-key, signatures in the tenants file)", r)
	}
	if d.puller == nil {
		if d.puller, err = oci.NewPuller(oci.WithLogger(d.log)); err != nil {
			return host.Source{}, err
		}
	}
	p, err := d.puller.Pull(ctx, r, d.policy)
	if err != nil {
		return host.Source{}, err
	}
	d.log.Info("plugin pulled", "ref", r.String(), "digest", p.Digest.String(), "cached", p.Cached, "signed", p.Signer)
	return host.Source{From: p.Ref.String(), Wasm: p.Module, Manifest: m}, nil
}

// pluginFile returns the .wasm file of a plugin path: the file itself, or the build of
// a Go plugin's directory.
func (d *Deployment) pluginFile(ctx context.Context, path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return path, nil
	}
	d.log.Info("building plugin", "dir", path)
	start := time.Now()
	wasm, err := pluginbuild.Build(ctx, path)
	if err != nil {
		return "", err
	}
	d.log.Info("plugin built", "dir", path, "took", time.Since(start).Round(time.Millisecond))
	return wasm, nil
}

// describeGrants summarises a manifest for the log: what was granted, secrets by name.
func describeGrants(m host.Manifest) string {
	parts := []string{"state " + string(m.State), "timeout " + m.Timeout.String(), fmt.Sprintf("memory %d pages", m.MemoryPages)}
	if len(m.HTTP) > 0 {
		parts = append(parts, "http "+strings.Join(m.HTTP, ","))
	}
	if len(m.Config) > 0 {
		parts = append(parts, "config "+strings.Join(slices.Sorted(maps.Keys(m.Config)), ","))
	}
	if len(m.Secrets) > 0 {
		parts = append(parts, "secrets "+strings.Join(slices.Sorted(maps.Keys(m.Secrets)), ","))
	}
	return strings.Join(parts, "; ")
}

// define defines a file's agent.
func (d *Deployment) define(f *File, kind string) (*Agent, error) {
	mine := map[string]bool{}
	for _, spec := range f.Plugins {
		mine[d.plugins[f.pluginPath(spec)].plugin.Name()] = true
	}
	tools := f.tools()
	if err := d.checkNames(f, tools, mine); err != nil {
		return nil, err
	}
	a := &Agent{Name: f.Name, Description: f.Description, File: f.Path, Model: f.Model.Name,
		Plugins: slices.Sorted(maps.Keys(mine)), SnapshotStore: kind, namespace: f.Name}
	if d.tenant != "" {
		a.namespace = d.tenant + "/" + f.Name
	}
	for _, t := range tools {
		if !slices.Contains(a.Tools, t.name) {
			a.Tools = append(a.Tools, t.name)
		}
	}
	switch a.SnapshotStore {
	case StoreBadger:
		a.store = d.disk
	case StorePostgres:
		a.store = d.shared
	case StoreMemory:
		a.store = d.memory
	}
	if d.reg.Lookup(agent.Key(agent.ActionTypeSessionFlow, f.Name)) != nil {
		return nil, f.errorf("name", "a session flow named %q is already defined", f.Name)
	}
	define := d.definePrompted
	if f.Routed() {
		define = d.defineRouted
	}
	if err := define(f, a); err != nil {
		return nil, err
	}
	if f.Isolation == host.IsolationSession {
		a.flow = isolatedFlow{a.flow}
	}
	// Genkit's CLI and Developer UI run flows, not session flows: the agent's turn
	// flow is what they run (genkit flow:run <agent>).
	turn := session.NewTurnFlow(a.flow)
	if err := d.reg.Register(turn); err != nil {
		return nil, f.errorf("name", "the flow of agent %q: %v", f.Name, err)
	}
	d.defined = append(d.defined, turn.Desc().Key)
	return a, nil
}

// generateOpts are what the agent's model calls are made with: the model, its
// config, retries and backups, the metrics, the tool error policy.
func (d *Deployment) generateOpts(f *File) []agent.CommonOption {
	common := []agent.CommonOption{agent.WithMiddleware(d.meter.middleware(d.pluginOf))}
	if d.usage != nil {
		common = append(common, agent.WithMiddleware(recordUsage(d.usage)))
	}
	if f.Model.Name != "" {
		common = append(common, agent.WithModelName(f.Model.Name))
	}
	if f.Model.Config != nil {
		common = append(common, agent.WithConfig(f.Model.Config))
	}
	if f.Model.Retries > 0 || f.Model.Timeout > 0 || len(f.Model.Backups) > 0 {
		retries := f.Model.Retries
		if retries == 0 {
			retries = -1 // none, where Reliability's zero means its default
		}
		common = append(common, agent.WithMiddleware(agent.Reliable(d.reg, agent.Reliability{
			Retries: retries, Timeout: f.Model.Timeout, Backups: f.Model.Backups})))
	}
	if f.MaxTurns > 0 {
		common = append(common, agent.WithMaxTurns(f.MaxTurns))
	}
	// Routed agents' calls too: an agent file's agent tells its model of a failing tool
	// unless the file says fail.
	common = append(common, agent.WithReturnToolErrors(f.ToolErrors != agent.ToolErrorsFail))
	return common
}

// snapshotOpts keep the agent's sessions in its store (none without one), when the
// file says.
func snapshotOpts[State any](f *File, a *Agent) []session.FlowOption[State] {
	if a.store == nil {
		return nil
	}
	opts := []session.FlowOption[State]{session.WithSnapshotStore(session.NewSnapshotStore[State](a.store, session.WithNamespace(a.namespace)))}
	if len(f.Snapshots.On) > 0 {
		events := make([]session.SnapshotEvent, len(f.Snapshots.On))
		for i, e := range f.Snapshots.On {
			events[i] = session.SnapshotEvent(e)
		}
		opts = append(opts, session.WithSnapshotCallback(session.SnapshotOn[State](events...)))
	}
	return opts
}

// definePrompted defines a prompt agent: session.DefineAgent with the file's prompt,
// tools and handlers.
func (d *Deployment) definePrompted(f *File, a *Agent) error {
	common := d.generateOpts(f)
	if len(f.Tools) > 0 {
		common = append(common, agent.WithToolNames(f.Tools...))
	}
	opts := []session.AgentOption[promptState]{session.WithGenerateOpts[promptState](common...)}
	a.ClientTools = f.ClientTools == nil || *f.ClientTools
	if !a.ClientTools {
		opts = append(opts, session.WithClientTools[promptState](false))
	}
	if f.Prompt != "" {
		p, err := d.parsePrompt(f)
		if err != nil {
			return err
		}
		opts = append(opts, session.WithBasePrompt[promptState, any](p, nil))
	}
	var handlers []agent.Handler
	for _, name := range f.Handlers {
		h, _ := d.reg.LookupHandler(name) // checked
		handlers = append(handlers, d.meter.handler(h, d.pluginOf(name)))
	}
	if len(handlers) > 0 {
		opts = append(opts, session.WithHandlers[promptState](handlers...))
	}
	for _, o := range snapshotOpts[promptState](f, a) {
		opts = append(opts, o)
	}
	flow, err := recovered(func() *session.SessionFlow[promptStatus, promptState] {
		return session.DefineAgent[promptStatus, promptState](d.reg, f.Name, opts...)
	})
	if err != nil {
		return f.wrap("prompt", err)
	}
	bind(d, a, flow)
	return nil
}

// recovered returns what define returns, or its panic (an invalid prompt, say) as an
// error: the Define functions panic on a definition that is wrong from the start.
func recovered[T any](define func() T) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return define(), nil
}

// parsePrompt parses the file's prompt, registered under the agent's name.
func (d *Deployment) parsePrompt(f *File) (*prompt.Prompt, error) {
	if f.PromptFile() {
		path := f.Resolve(strings.TrimSpace(f.Prompt))
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, f.wrap("prompt", err)
		}
		return d.registerPrompt(f, path, src)
	}
	return d.registerPrompt(f, fmt.Sprintf("%s (the prompt of line %d)", f.Path, f.Line("prompt")), []byte(f.Prompt))
}

func (d *Deployment) registerPrompt(f *File, where string, src []byte) (*prompt.Prompt, error) {
	p, err := prompt.Parse(d.reg, f.Name, where, src)
	if err != nil {
		return nil, f.wrap("prompt", err)
	}
	d.defined = append(d.defined, p.Desc().Key)
	return p, nil
}

// checkNames checks that the models, tools and handlers a file names exist, and that
// those coming from plugins come from plugins the file itself loads: an agent's
// plugins are granted what its own file says.
func (d *Deployment) checkNames(f *File, tools []toolRef, mine map[string]bool) error {
	check := func(path, kind, name string, exists bool) error {
		if !exists {
			return f.errorf(path, "no %s named %q is registered (loaded plugins: %s)", kind, name, d.pluginNames())
		}
		if p := d.pluginOf(name); p != "" && !mine[p] {
			return f.errorf(path, "%s %q comes from plugin %s, which this file does not load: add it under plugins", kind, name, p)
		}
		return nil
	}
	models := append([]string{}, f.Model.Name)
	paths := []string{"model.name"}
	for i, b := range f.Model.Backups {
		models = append(models, b)
		paths = append(paths, fmt.Sprintf("model.backups[%d]", i))
	}
	for i, name := range models {
		if name == "" {
			continue
		}
		_, err := d.reg.LookupModel(name)
		if err := check(paths[i], "model", name, err == nil); err != nil {
			return err
		}
	}
	routed := f.Routed()
	for _, t := range tools {
		b, isBuiltin := builtin(t.name)
		if isBuiltin && routed {
			// Its interrupt would end a routed turn, which has nothing to resume.
			return f.errorf(t.path, "%s waits for the user's answer, which a routed agent's turn cannot: let a step ask the user instead", t.name)
		}
		if _, err := d.reg.LookupTool(t.name); err != nil && isBuiltin {
			if err := d.reg.Register(b); err != nil {
				return f.wrap(t.path, err)
			}
			d.defined = append(d.defined, b.Desc().Key)
		}
		_, err := d.reg.LookupTool(t.name)
		if err := check(t.path, "tool", t.name, err == nil); err != nil {
			return err
		}
	}
	for i, name := range f.Handlers {
		_, err := d.reg.LookupHandler(name)
		if err := check(fmt.Sprintf("handlers[%d]", i), "handler", name, err == nil); err != nil {
			return err
		}
	}
	return nil
}

// pluginOf returns the plugin a model, tool or handler name comes from, or "".
func (d *Deployment) pluginOf(name string) string {
	prefix, _, ok := strings.Cut(name, "/")
	if !ok {
		return ""
	}
	if d.host.Plugin(prefix) == nil {
		return ""
	}
	return prefix
}

func (d *Deployment) pluginNames() string {
	var names []string
	for _, p := range d.plugins {
		names = append(names, p.plugin.Name())
	}
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// warnings passes on the records of level Warn and above.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnings{w.Handler.WithAttrs(attrs)}
}
func (w warnings) WithGroup(name string) slog.Handler { return warnings{w.Handler.WithGroup(name)} }

// Registry returns the registry the agents, their prompts and their plugins' actions
// are in.
func (d *Deployment) Registry() *agent.Registry { return d.reg }

// Host returns the plugin host.
func (d *Deployment) Host() *host.Host { return d.host }

// Agents returns the agents, by name.
func (d *Deployment) Agents() []*Agent {
	out := make([]*Agent, 0, len(d.agents))
	for _, name := range slices.Sorted(maps.Keys(d.agents)) {
		out = append(out, d.agents[name])
	}
	return out
}

// StoredBytes returns what the agents' sessions and the tool sessions take in their
// stores: the Bytes of store.Stats over their namespaces, one per agent and the tool
// sessions'. It may read every key of them (see the store's Stats), so it is for
// measuring now and then, not for every request.
func (d *Deployment) StoredBytes(ctx context.Context) (int64, error) {
	ts := d.toolSessions
	st, err := ts.st.Stats(ctx, ts.namespace)
	if err != nil {
		return 0, fmt.Errorf("deploy: tool sessions: stored bytes: %w", err)
	}
	total := st.Bytes
	for _, a := range d.agents {
		if a.store == nil {
			continue
		}
		st, err := a.store.Stats(ctx, a.namespace)
		if err != nil {
			return 0, fmt.Errorf("deploy: agent %s: stored bytes: %w", a.Name, err)
		}
		total += st.Bytes
	}
	return total, nil
}

// Agent returns the agent named name, or an error wrapping agent.ErrNotFound.
func (d *Deployment) Agent(name string) (*Agent, error) {
	a, ok := d.agents[name]
	if !ok {
		return nil, fmt.Errorf("deploy: %w: agent %q", agent.ErrNotFound, name)
	}
	return a, nil
}

// Close removes the agents from the registry, unloads the plugins and closes the
// snapshot store the deployment opened, which makes every snapshot saved durable on
// disk (Badger syncs each commit already).
func (d *Deployment) Close(ctx context.Context) error {
	for _, key := range d.defined {
		d.reg.Unregister(key)
	}
	errs := []error{d.host.Close(ctx)}
	if d.ownDisk {
		errs = append(errs, d.disk.Close())
	}
	if d.ownShared {
		errs = append(errs, d.shared.Close())
	}
	return errors.Join(errs...)
}

// Ready checks that the deployment can keep snapshots: that the stores which can be
// down while it runs (PostgreSQL) answer. Its error wraps store.ErrUnavailable.
func (d *Deployment) Ready(ctx context.Context) error {
	for _, st := range []store.Store{d.disk, d.shared} {
		if p, ok := st.(store.Pinger); ok {
			if err := p.Ping(ctx); err != nil {
				return fmt.Errorf("deploy: %w", err)
			}
		}
	}
	return nil
}
