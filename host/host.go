package host

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/host/internal/redact"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// hostModuleName is the import module of the host functions.
const hostModuleName = plugin.HostModule

// SupportedABIVersions lists the plugin ABI versions this host loads.
var SupportedABIVersions = []int{plugin.Version}

var (
	// ErrPluginFault is wrapped by errors caused by a plugin misbehaving: a trap, a
	// timeout, memory exhausted, output that is not valid, a missing export. The
	// instance involved is discarded; the next call gets a fresh one.
	ErrPluginFault = errors.New("plugin fault")
	// ErrLoad is wrapped by errors loading a plugin.
	ErrLoad = errors.New("cannot load plugin")
	// ErrNoInstance is wrapped by the error of a call that waited longer than the
	// manifest's QueueTimeout for a free instance: the plugin is busy, not at fault.
	ErrNoInstance = errors.New("no instance became free")
)

// CallError is the error of a call into a plugin. It names the plugin and the export;
// Err is an *abi.Error when the plugin reported the error itself, and wraps
// ErrPluginFault when the plugin failed.
type CallError struct {
	Plugin string
	Export string
	Err    error
}

// Error implements error.
func (e *CallError) Error() string {
	return fmt.Sprintf("plugin %s: %s: %v", e.Plugin, e.Export, e.Err)
}

// Unwrap returns the underlying error.
func (e *CallError) Unwrap() error { return e.Err }

// Host loads plugins and serves their models, tools and handlers through an agent
// registry. It is safe for concurrent use. A Host made by New may have tenant views
// (see Tenant): hosts of their own, each with its registry, its plugins and their
// instances, sharing the compiled modules.
type Host struct {
	reg       *agent.Registry
	eng       Engine
	cache     *compileCache // nil: none
	log       *slog.Logger
	transport http.RoundTripper
	// trustedKeys, when any, are the keys every plugin must be signed by one of.
	trustedKeys []ed25519.PublicKey
	// lenientOutputs logs tool outputs that break their schema instead of failing.
	lenientOutputs bool
	// observe, when set, is told of every host function call (WithHostCallObserver).
	observe func(plugin, function string)

	// root is the host made by New: h itself, or the host h is a tenant view of.
	root *Host
	// tenant is the view's tenant, "" for a host made by New.
	tenant  string
	secrets map[string]string
	admit   func(plugin string, m Manifest) error
	gate    Gate

	mu      sync.Mutex
	plugins map[string]*Plugin
	closed  bool

	// Of the root only: the modules compiled, shared by the host and its views, and
	// the views.
	modMu   sync.Mutex
	modules map[moduleKey]*sharedModule
	views   map[string]*Host
}

// Option configures New.
type Option interface {
	apply(*hostConfig)
}

type optionFunc func(*hostConfig)

func (f optionFunc) apply(c *hostConfig) { f(c) }

type hostConfig struct {
	cacheDir       string
	noCache        bool
	cacheLimit     int64
	engine         Engine
	log            *slog.Logger
	transport      http.RoundTripper
	trustedKeys    []ed25519.PublicKey
	lenientOutputs bool
	observe        func(plugin, function string)
}

// WithCompilationCache keeps compiled plugins in dir, so a plugin compiled once (by this
// process or an earlier one) loads in milliseconds. An empty dir turns the cache off.
// The default is terrarium/compiled under the user's cache directory. Processes may
// share the directory.
func WithCompilationCache(dir string) Option {
	return optionFunc(func(c *hostConfig) { c.cacheDir, c.noCache = dir, dir == "" })
}

// WithCompilationCacheLimit keeps the compilation cache under n bytes (default
// DefaultCompilationCacheLimit), removing the plugins loaded least recently.
func WithCompilationCacheLimit(n int64) Option {
	return optionFunc(func(c *hostConfig) { c.cacheLimit = n })
}

// WithLogger sets the logger for the host and for plugins' log calls (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *hostConfig) { c.log = l }) }

// WithHTTPTransport sets the transport of plugins' HTTP requests (default
// http.DefaultTransport).
func WithHTTPTransport(t http.RoundTripper) Option {
	return optionFunc(func(c *hostConfig) { c.transport = t })
}

// New returns a host that registers the plugins it loads in r.
func New(r *agent.Registry, opts ...Option) (*Host, error) {
	var cfg hostConfig
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	if cfg.transport == nil {
		cfg.transport = http.DefaultTransport
	}
	if cfg.engine == nil {
		cfg.engine = nativeEngine{}
	}
	if cfg.cacheLimit == 0 {
		cfg.cacheLimit = DefaultCompilationCacheLimit
	}
	h := &Host{reg: r, eng: cfg.engine, log: cfg.log, transport: cfg.transport, trustedKeys: cfg.trustedKeys,
		lenientOutputs: cfg.lenientOutputs, observe: cfg.observe, plugins: map[string]*Plugin{},
		modules: map[moduleKey]*sharedModule{}, views: map[string]*Host{}}
	h.root = h
	if !cfg.noCache {
		dir := cfg.cacheDir
		if dir == "" {
			var err error
			if dir, err = defaultCacheDir(); err != nil {
				return nil, fmt.Errorf("host: %w", err)
			}
		}
		h.cache = newCompileCache(dir, cfg.cacheLimit)
	}
	return h, nil
}

// Close unloads every plugin. A host made by New closes its tenant views too, then the
// compilation cache; a view leaves the host it views open.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	plugins := slices.Collect(maps.Values(h.plugins))
	h.mu.Unlock()
	var errs []error
	if h.root == h {
		h.modMu.Lock()
		views := slices.Collect(maps.Values(h.views))
		h.modMu.Unlock()
		for _, v := range views {
			errs = append(errs, v.Close(ctx))
		}
	}
	for _, p := range plugins {
		errs = append(errs, p.Unload(ctx))
	}
	if h.root != h {
		h.root.modMu.Lock()
		delete(h.root.views, h.tenant)
		h.root.modMu.Unlock()
		return errors.Join(errs...)
	}
	if h.cache != nil {
		errs = append(errs, h.cache.close(ctx))
	}
	return errors.Join(errs...)
}

// Plugin returns the loaded plugin named name, or nil.
func (h *Host) Plugin(name string) *Plugin {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.plugins[name]
}

// Plugin is a loaded plugin: its descriptor, its manifest and its pool of instances.
type Plugin struct {
	host     *Host
	desc     plugin.Descriptor
	manifest Manifest
	sha256   string
	size     int
	module   module
	release  func() // gives back the host's shared module
	pool     *pool
	logs     *pluginLogs
	keys     []string // registry keys of its actions
	slots    map[string]slot
	outputs  map[string]*schema.Validator // tools' output schemas, by the tools' short names
	// redact hides the values of its secrets, but those granted readable, in what
	// it reads of HTTP responses; nil if it has none.
	redact *redact.Redactor
}

// Name returns the plugin's name, its namespace in the registry.
func (p *Plugin) Name() string { return p.desc.Name }

// Descriptor returns what the plugin described itself as.
func (p *Plugin) Descriptor() plugin.Descriptor { return p.desc }

// Manifest returns the plugin's grants, defaults filled in.
func (p *Plugin) Manifest() Manifest { return p.manifest }

// SHA256 returns the hex SHA-256 of the plugin's module.
func (p *Plugin) SHA256() string { return p.sha256 }

// Size returns the size of the plugin's module in bytes.
func (p *Plugin) Size() int { return p.size }

// Keys returns the registry keys of the plugin's models, tools and handlers (none once
// it is unloaded, or replaced by Reload).
func (p *Plugin) Keys() []string {
	p.host.mu.Lock()
	defer p.host.mu.Unlock()
	return slices.Clone(p.keys)
}

// Instances reports the plugin's live instances and how many of them are idle.
func (p *Plugin) Instances() (live, idle int) { return p.pool.size() }

// LoadFile loads a plugin from a .wasm file, with its detached signature from the
// file beside it (SignatureFile) when the manifest holds none. See Load.
func (h *Host) LoadFile(ctx context.Context, path string, m Manifest) (*Plugin, error) {
	src, err := ReadSource(path, m)
	if err != nil {
		return nil, err
	}
	p, err := h.Load(ctx, src.Wasm, src.Manifest)
	if err != nil {
		return nil, fmt.Errorf("%w (from %s)", err, path)
	}
	return p, nil
}

// Source is a plugin for LoadAll to load: its module, its manifest, and where it came
// from, which LoadAll's error names.
type Source struct {
	From     string
	Wasm     []byte
	Manifest Manifest
}

// ReadSource reads a plugin's .wasm file, with its detached signature from the file
// beside it (SignatureFile) when the manifest holds none.
func ReadSource(path string, m Manifest) (Source, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return Source{}, fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	if m.Signature == nil {
		if m.Signature, err = os.ReadFile(SignatureFile(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return Source{}, fmt.Errorf("host: %w: %w", ErrLoad, err)
		}
	}
	return Source{From: path, Wasm: wasm, Manifest: m}, nil
}

// Load compiles a plugin, asks it to describe itself, checks the description, and
// registers its models, tools and handlers as /model/<plugin>/<model>,
// /tool/<plugin>/<tool> and /handler/<plugin>/<handler>. The manifest grants what
// the plugin may do.
func (h *Host) Load(ctx context.Context, wasm []byte, m Manifest) (*Plugin, error) {
	p, err := h.prepareChecked(ctx, wasm, m)
	if err != nil {
		return nil, err
	}
	return h.finishLoad(p)
}

// LoadAll loads plugins as Load does, registering them one after another in the order
// given, but prepares them (compiles, instantiates, asks them to describe themselves)
// several at once, up to GOMAXPROCS: compiling a Go plugin takes seconds. It stops at
// the first plugin, in that order, that fails to load, whose From its error names, and
// returns those loaded before it, so the one that failed is srcs[len(loaded)].
func (h *Host) LoadAll(ctx context.Context, srcs []Source) ([]*Plugin, error) {
	prepared := make([]*Plugin, len(srcs))
	errs := make([]error, len(srcs))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, src := range srcs {
		g.Go(func() error {
			prepared[i], errs[i] = h.prepareValid(ctx, src.Wasm, src.Manifest)
			return nil // each plugin's error is its own: one failing stops none of the others
		})
	}
	g.Wait()
	loaded := make([]*Plugin, 0, len(srcs))
	for i, p := range prepared {
		// Admission and registration in order: a tenant's admission counts the memory
		// of what it admitted, and which plugin is refused must not depend on timing.
		err := errs[i]
		if err == nil {
			err = h.admitPrepared(p)
		}
		if err == nil {
			p, err = h.finishLoad(p)
		}
		if err != nil {
			for _, rest := range prepared[i+1:] {
				if rest != nil {
					rest.close(context.Background())
				}
			}
			return loaded, fmt.Errorf("%w (from %s)", err, srcs[i].From)
		}
		loaded = append(loaded, p)
	}
	return loaded, nil
}

// prepareChecked prepares a plugin and checks what Load and Reload ask of it before it
// may serve: a valid descriptor, the exports it promises, and a tenant view's
// admission.
func (h *Host) prepareChecked(ctx context.Context, wasm []byte, m Manifest) (*Plugin, error) {
	p, err := h.prepareValid(ctx, wasm, m)
	if err != nil {
		return nil, err
	}
	if err := h.admitPrepared(p); err != nil {
		return nil, err
	}
	return p, nil
}

// prepareValid prepares a plugin, checks its descriptor and the exports it promises
// and compiles its tools' output schemas, closing it if any of that fails.
func (h *Host) prepareValid(ctx context.Context, wasm []byte, m Manifest) (*Plugin, error) {
	p, err := h.prepare(ctx, wasm, m)
	if err != nil {
		return nil, err
	}
	err = ValidateDescriptor(&p.desc)
	if err == nil {
		err = p.checkExports()
	}
	if err == nil {
		err = p.compileOutputSchemas()
	}
	if err != nil {
		p.close(context.Background())
		return nil, fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	return p, nil
}

// admitPrepared asks a tenant view's admission whether a prepared plugin may load,
// closing it if not.
func (h *Host) admitPrepared(p *Plugin) error {
	if h.admit == nil {
		return nil
	}
	if err := h.admit(p.desc.Name, p.manifest); err != nil {
		p.close(context.Background())
		return fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	return nil
}

// finishLoad registers a prepared and checked plugin, which has no other version
// loaded.
func (h *Host) finishLoad(p *Plugin) (*Plugin, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		p.close(context.Background())
		return nil, fmt.Errorf("host: %w: the host is closed", ErrLoad)
	}
	if _, dup := h.plugins[p.desc.Name]; dup {
		h.mu.Unlock()
		p.close(context.Background())
		return nil, fmt.Errorf("host: %w: a plugin named %s is already loaded (Reload replaces it)", ErrLoad, p.desc.Name)
	}
	// Registered under h.mu, so that a Reload of the same name finds every slot.
	err := p.register()
	if err == nil {
		h.plugins[p.desc.Name] = p
	}
	h.mu.Unlock()
	if err != nil {
		for _, k := range p.keys {
			h.reg.Unregister(k)
		}
		p.close(context.Background())
		return nil, fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	p.warnUngranted()
	h.log.Info("plugin loaded", "plugin", p.desc.Name, "version", p.desc.Version, "sha256", p.sha256,
		"models", len(p.desc.Models), "tools", len(p.desc.Tools), "handlers", len(p.desc.Handlers))
	return p, nil
}

// prepare compiles a plugin and asks it to describe itself, checking nothing of what
// it says: Load checks, Inspect reports.
func (h *Host) prepare(ctx context.Context, wasm []byte, m Manifest) (*Plugin, error) {
	p := &Plugin{host: h, sha256: sha256Hex(wasm), size: len(wasm), logs: newPluginLogs()}
	if m.SHA256 != "" && m.SHA256 != p.sha256 {
		return nil, fmt.Errorf("host: %w: its SHA-256 is %s, the manifest pins %s", ErrLoad, p.sha256, m.SHA256)
	}
	if err := h.checkSignature(wasm, m); err != nil {
		return nil, fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	if err := CheckModule(wasm); err != nil {
		return nil, fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	m = m.withDefaults()
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("host: %w: manifest: %w", ErrLoad, err)
	}
	m.Secrets = h.secretValues(m.Secrets)
	p.manifest = m
	p.redact = m.redactor()

	// Instances that serve one session each are reset rather than made anew when the
	// engine can: they keep a snapshot of their state before any session's call.
	cfg := engine.ModuleConfig{MemoryPages: m.MemoryPages, HostFuncs: h.root.hostFuncs(), Resettable: m.Isolation == IsolationSession, Env: m.environ()}
	mod, release, err := h.compile(ctx, wasm, p.sha256, cfg)
	if err != nil {
		return nil, fmt.Errorf("host: %w: compiling: %w", ErrLoad, err)
	}
	p.module, p.release = mod, release
	p.desc.Name = "(loading)"
	p.pool = newPool(m.MaxInstances, m.QueueTimeout.Duration, func(ctx context.Context) (instance, error) {
		inst, _, err := p.start(ctx)
		return inst, err
	})
	inst, out, err := p.start(ctx)
	if err != nil {
		p.close(context.Background())
		return nil, fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	p.pool.warm(inst)
	// A key the host does not know is refused: a misspelt "output_schema" would
	// otherwise leave a tool's output unchecked, silently.
	var desc plugin.Descriptor
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&desc); err != nil {
		p.close(context.Background())
		return nil, fmt.Errorf("host: %w: %s returned an invalid descriptor: %w", ErrLoad, plugin.ExportDescribe, err)
	}
	p.desc = desc
	return p, nil
}

// start makes an instance ready to serve: instantiated (the module's start function
// run) and asked to describe itself, which starts the guest's runtime (a Go guest's
// runs in its first call) so that no caller's call pays for it. Each step is bounded by
// the manifest's timeout, as a call is. It returns the description.
func (p *Plugin) start(ctx context.Context) (instance, []byte, error) {
	ictx, cancel := context.WithTimeoutCause(ctx, p.manifest.Timeout.Duration, errTimedOut)
	inst, err := p.module.Instantiate(ictx)
	if err != nil {
		err = p.fault(ictx, "instantiating", err)
	}
	cancel()
	if err != nil {
		return nil, nil, err
	}
	if !p.module.HasExport(plugin.ExportDescribe) {
		inst.Close(context.Background())
		return nil, nil, fmt.Errorf("it does not export %s: not a Terrarium plugin", plugin.ExportDescribe)
	}
	b := &binding{plugin: p}
	ctx, cancel = context.WithTimeoutCause(context.WithValue(ctx, bindingKey{}, b), p.manifest.Timeout.Duration, errTimedOut)
	defer cancel()
	b.ctx = ctx
	out, err := inst.Call(ctx, plugin.ExportDescribe, nil)
	if err != nil {
		inst.Close(context.Background())
		var pe *pluginError
		if errors.As(err, &pe) {
			return nil, nil, &CallError{Plugin: p.desc.Name, Export: plugin.ExportDescribe, Err: plugin.DecodeError(pe.Msg)}
		}
		return nil, nil, &CallError{Plugin: p.desc.Name, Export: plugin.ExportDescribe, Err: p.fault(ctx, "", err)}
	}
	return inst, out, nil
}

// errTimedOut is the cause of a context that reached the manifest's timeout.
var errTimedOut = errors.New("timed out")

// fault describes what ended a guest run under ctx (bounded by the manifest's timeout
// with errTimedOut): the plugin's fault, unless ctx ended for the caller's own reason.
// what (may be empty) says what the guest was doing.
func (p *Plugin) fault(ctx context.Context, what string, err error) error {
	return p.faultOf(context.Cause(ctx), what, err)
}

// faultOf is fault for a run whose context ended with cause (nil: it had not ended).
func (p *Plugin) faultOf(cause error, what string, err error) error {
	if what != "" {
		what += ": "
	}
	if errors.Is(cause, errTimedOut) {
		// A deadline, so that callers tell a timeout from other faults without knowing
		// the host (agent.AsError's limit_exceeded).
		return fmt.Errorf("%w: %stimed out after %v (%w)", ErrPluginFault, what, p.manifest.Timeout.Duration, context.DeadlineExceeded)
	}
	if cause != nil {
		return cause
	}
	return fmt.Errorf("%w: %s%w", ErrPluginFault, what, err)
}

// checkExports makes sure the exports the descriptor's kinds need are there.
func (p *Plugin) checkExports() error {
	for _, k := range []struct {
		kind     string
		declared bool
		export   string
	}{
		{"models", len(p.desc.Models) > 0, plugin.ExportGenerate},
		{"tools", len(p.desc.Tools) > 0, plugin.ExportCallTool},
		{"handlers", len(p.desc.Handlers) > 0, plugin.ExportHandle},
	} {
		if k.declared && !p.module.HasExport(k.export) {
			return fmt.Errorf("plugin %s declares %s but does not export %s", p.desc.Name, k.kind, k.export)
		}
	}
	return nil
}

// close releases a plugin that is not (or no longer) registered: it waits for the
// calls in flight to finish, or ctx to end, then closes the module (and with it any
// instance still running).
func (p *Plugin) close(ctx context.Context) error {
	var err error
	if p.pool != nil {
		err = p.pool.close(ctx)
	}
	p.release()
	return err
}

// register puts the plugin's actions in the registry.
func (p *Plugin) register() error {
	p.slots = map[string]slot{}
	for _, a := range p.actions() {
		s := newSlot(a)
		if err := p.host.reg.Register(s); err != nil {
			return err
		}
		key := s.Desc().Key
		p.keys = append(p.keys, key)
		p.slots[key] = s
	}
	return nil
}

// actions returns the plugin's models, tools and handlers.
func (p *Plugin) actions() []agent.Action {
	var actions []agent.Action
	for _, md := range p.desc.Models {
		actions = append(actions, &pluginModel{p: p, local: md.Name, info: modelInfo(md.Info)})
	}
	for _, td := range p.desc.Tools {
		actions = append(actions, newPluginTool(p, td))
	}
	for _, hd := range p.desc.Handlers {
		actions = append(actions, &pluginHandler{p: p, local: hd.Name, desc: hd})
	}
	return actions
}

// warnUngranted logs the capabilities the plugin asks for that the manifest does not
// grant: calls needing them will be denied.
func (p *Plugin) warnUngranted() {
	c := p.desc.Capabilities
	var missing []string
	if !p.manifest.State.Allows(c.State) {
		missing = append(missing, "state "+string(c.State))
	}
	for _, host := range c.HTTP {
		if !p.manifest.grants(host) {
			missing = append(missing, "http "+host)
		}
	}
	for _, k := range c.Config {
		if _, ok := p.manifest.Config[k]; !ok {
			missing = append(missing, "config "+k)
		}
	}
	for _, s := range c.Secrets {
		if _, ok := p.manifest.Secrets[s]; !ok {
			missing = append(missing, "secret "+s)
		}
	}
	if len(missing) > 0 {
		p.host.log.Warn("plugin asks for capabilities its manifest does not grant; calls needing them will be denied",
			"plugin", p.desc.Name, "missing", missing)
	}
}

// Unload removes the plugin's actions from the registry and closes its instances.
// Calls in flight finish first, unless ctx ends before they do: they are then ended,
// and the error says so.
func (p *Plugin) Unload(ctx context.Context) error {
	h := p.host
	h.mu.Lock()
	if h.plugins[p.desc.Name] == p {
		delete(h.plugins, p.desc.Name)
	}
	keys := p.keys
	p.keys, p.slots = nil, nil
	h.mu.Unlock()
	for _, k := range keys {
		h.reg.Unregister(k)
	}
	return p.close(ctx)
}

// Call runs an export of the plugin with a raw input, bound to the session in ctx if
// any: what the conformance suite uses to send inputs the registry's adapters never
// would. Models, tools and handlers are better reached through the registry.
func (p *Plugin) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	return p.call(ctx, export, input, &binding{session: agent.AnySessionFromContext(ctx)})
}

// call runs one export on an instance from the pool. Waiting for the instance is
// bounded by the manifest's queue timeout, running the export by its timeout: time
// spent queueing is not the plugin's.
func (p *Plugin) call(ctx context.Context, export string, input []byte, b *binding) ([]byte, error) {
	cerr := func(err error) error { return &CallError{Plugin: p.desc.Name, Export: export, Err: err} }
	b.plugin = p
	if b.session != nil && p.manifest.State.Allows(plugin.StateWrite) {
		// A plugin's state_get then state_set spans two host calls; calls of
		// plugins that may write are serialized per session so those sequences never
		// interleave (tools run concurrently within a turn). The lock is taken before
		// the instance, so that no instance idles while its call waits for it.
		unlock := b.session.LockUpdates()
		defer unlock()
	}
	var ran time.Duration // the guest's time, for the gate
	if g := p.host.gate; g != nil {
		// After the session's lock, before the instance: a call waiting for the gate
		// holds nothing another call of its session or tenant needs.
		leave, err := g.Enter(ctx, p.desc.Name)
		if err != nil {
			return nil, cerr(err)
		}
		defer func() { leave(ran) }()
	}
	c := p.claim(ctx, b)
	e, err := p.pool.get(ctx, c)
	if err != nil {
		return nil, cerr(err)
	}
	start := time.Now()
	b.caller, b.deadline = ctx, start.Add(p.manifest.Timeout.Duration)
	defer b.endContext()
	guest := &b.guest
	guest.begin(b, p.pool.calls)
	defer guest.release()
	out, err := e.inst.Call(guest, export, input)
	ran = time.Since(start)
	b.closeHTTP()
	pe, reported := errors.AsType[*pluginError](err)
	p.pool.put(e, c, err != nil && !reported)
	p.logs.reportDropped(p.host.log, p.desc.Name)
	// The deadline passed, as whichever of the guest's context (by the clock) and
	// the host functions' (by its timer) saw first.
	timedOut := errors.Is(guest.cause(), errTimedOut) || b.ctx != nil && errors.Is(context.Cause(b.ctx), errTimedOut)
	switch {
	case ctx.Err() != nil && !timedOut:
		// The caller gave up: its reason is the answer, whatever the guest said.
		return nil, cerr(context.Cause(ctx))
	case b.stalled && timedOut:
		return nil, cerr(fmt.Errorf("the caller did not take the streamed chunks before the call's deadline: %w", context.DeadlineExceeded))
	case reported:
		return nil, cerr(plugin.DecodeError(pe.Msg))
	case err != nil && p.pool.calls.Err() != nil:
		return nil, cerr(errCallEnded)
	case err != nil:
		return nil, cerr(p.faultOf(guest.cause(), "", err))
	case len(out) > maxOutputBytes:
		return nil, cerr(fmt.Errorf("%w: output of %d bytes exceeds the limit of %d", ErrPluginFault, len(out), maxOutputBytes))
	}
	return out, nil
}

// decode decodes a plugin's output, reporting invalid output as the plugin's fault.
func (p *Plugin) decode(export string, out []byte, v any) error {
	if err := json.Unmarshal(out, v); err != nil {
		return &CallError{Plugin: p.desc.Name, Export: export, Err: fmt.Errorf("%w: invalid output: %w", ErrPluginFault, err)}
	}
	return nil
}

var (
	pluginName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	itemName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// Model names follow the providers' (OpenRouter's "vendor/model", Ollama's
	// "llama3:8b").
	modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)
)

// ValidateDescriptor checks a plugin's description: a supported ABI version, valid and
// unique names, valid JSON Schemas, known hook points and state access.
func ValidateDescriptor(d *plugin.Descriptor) error {
	problems := DescriptorProblems(d)
	if len(problems) == 0 {
		return nil
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = errors.New(p.Message)
	}
	return fmt.Errorf("invalid descriptor: %w", errors.Join(errs...))
}

// DescriptorProblem is one thing wrong with a descriptor, filed under a category:
// "abi version", "names", "schemas", "hook points" or "capabilities".
type DescriptorProblem struct {
	Category string
	Message  string
}

// The categories of descriptor problems.
const (
	ProblemABI          = "abi version"
	ProblemNames        = "names"
	ProblemSchemas      = "schemas"
	ProblemPoints       = "hook points"
	ProblemCapabilities = "capabilities"
)

// DescriptorProblems lists what is wrong with a descriptor (nothing: it is valid).
func DescriptorProblems(d *plugin.Descriptor) []DescriptorProblem {
	var out []DescriptorProblem
	bad := func(cat, format string, args ...any) {
		out = append(out, DescriptorProblem{cat, fmt.Sprintf(format, args...)})
	}
	if !slices.Contains(SupportedABIVersions, d.ABI) {
		bad(ProblemABI, "the plugin speaks ABI version %d; this host supports %v", d.ABI, SupportedABIVersions)
	}
	if !pluginName.MatchString(d.Name) {
		bad(ProblemNames, "plugin name %q: want [a-z0-9][a-z0-9_-]*, at most 64 bytes", d.Name)
	}
	names := func(kind string, list []string) {
		seen := map[string]bool{}
		for _, n := range list {
			if kind == "model" && !modelName.MatchString(n) {
				bad(ProblemNames, "model name %q: want [A-Za-z0-9][A-Za-z0-9_.:/-]*, at most 128 bytes", n)
			}
			if kind != "model" && !itemName.MatchString(n) {
				bad(ProblemNames, "%s name %q: want [A-Za-z0-9][A-Za-z0-9_.-]*, at most 64 bytes", kind, n)
			}
			if seen[n] {
				bad(ProblemNames, "%s %q is declared twice", kind, n)
			}
			seen[n] = true
		}
	}
	var models, tools, handlers []string
	for _, m := range d.Models {
		models = append(models, m.Name)
		if m.Info != nil && m.Info.ConfigSchema != nil {
			if _, err := schema.Compile(m.Info.ConfigSchema); err != nil {
				bad(ProblemSchemas, "model %q: config schema: %v", m.Name, err)
			}
		}
	}
	for _, t := range d.Tools {
		if t == nil {
			bad(ProblemNames, "a tool is null")
			continue
		}
		tools = append(tools, t.Name)
		for _, s := range []struct {
			what string
			s    map[string]any
		}{{"input", t.InputSchema}, {"output", t.OutputSchema}} {
			if _, err := schema.Compile(s.s); err != nil {
				bad(ProblemSchemas, "tool %q: %s schema: %v", t.Name, s.what, err)
			}
		}
	}
	for _, h := range d.Handlers {
		handlers = append(handlers, h.Name)
		if len(h.Points) == 0 {
			bad(ProblemPoints, "handler %q runs at no point", h.Name)
		}
		for _, pt := range h.Points {
			if !pt.Valid() {
				bad(ProblemPoints, "handler %q: unknown point %q (want turnStart, beforeGenerate, afterGenerate or turnEnd)", h.Name, pt)
			}
		}
	}
	names("model", models)
	names("tool", tools)
	names("handler", handlers)
	c := d.Capabilities
	switch c.State {
	case "", plugin.StateNone, plugin.StateRead, plugin.StateWrite:
	default:
		bad(ProblemCapabilities, "state %q: want none, read or write", c.State)
	}
	if c.StateSchema != nil {
		if _, err := schema.Compile(c.StateSchema); err != nil {
			bad(ProblemCapabilities, "state schema: %v", err)
		}
	}
	for _, h := range c.HTTP {
		if _, err := parseHostGrant(h); err != nil {
			bad(ProblemCapabilities, "%v", err)
		}
	}
	for _, list := range []struct {
		what  string
		names []string
	}{{"config key", c.Config}, {"secret", c.Secrets}} {
		for _, n := range list.names {
			if n == "" || strings.ContainsAny(n, " \t\n{}") {
				bad(ProblemCapabilities, "%s %q: want a plain name", list.what, n)
			}
		}
	}
	return out
}

func modelInfo(info *abi.ModelInfo) *abi.ModelInfo {
	if info == nil {
		return &abi.ModelInfo{Supports: &abi.ModelSupports{}}
	}
	if info.Supports == nil {
		c := *info
		c.Supports = &abi.ModelSupports{}
		return &c
	}
	return info
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
