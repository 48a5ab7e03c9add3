package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
)

// Gate admits the plugin calls of a tenant view and learns what each cost: a tenant's
// share of the plugin calls running at once and its budget of plugin time live behind
// it (package tenant implements it).
type Gate interface {
	// Enter returns once a call of the named plugin may run, or with the error that
	// refuses it, which the call returns. The call ends by calling leave with how long
	// the guest ran.
	Enter(ctx context.Context, plugin string) (leave func(ran time.Duration), err error)
}

// TenantConfig is what a tenant view of a host holds of its own.
type TenantConfig struct {
	// Registry receives the models, tools and handlers of the plugins the view loads.
	// Required: a tenant's actions live in a registry of their own.
	Registry *agent.Registry
	// Secrets are the tenant's secret values, by name. A plugin the view loads gets,
	// for each secret its manifest grants, the value of that name here; a secret the
	// tenant does not have is not granted. A view never reads the environment (or a
	// manifest's own values): another tenant's, or the operator's, keys stay theirs.
	Secrets map[string]string
	// Admit, when set, decides whether a plugin may be loaded with the manifest
	// given (defaults filled in), knowing its name: a tenant's ceiling of grants. Its
	// error refuses the plugin, wrapped in ErrLoad.
	Admit func(plugin string, m Manifest) error
	// Gate, when set, admits every call of the view's plugins.
	Gate Gate
}

var tenantID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Tenant returns a view of the host for one tenant: a Host of its own, whose plugins
// register their actions in cfg.Registry and whose instances serve this view's calls
// only, so that no instance ever serves two tenants, and nothing one tenant's call
// leaves in a plugin's memory reaches another's. Modules are compiled once for the
// host and its views, whichever loads them first: a tenant costs its instances, not
// its compilations. Closing the view unloads its plugins; closing the host closes its
// views. id is letters, digits, '.', '_' and '-', and one view per id is open at a
// time.
func (h *Host) Tenant(id string, cfg TenantConfig) (*Host, error) {
	if h.root != h {
		return nil, fmt.Errorf("host: %w: a tenant view has no tenant views", agent.ErrInvalidOption)
	}
	if !tenantID.MatchString(id) {
		return nil, fmt.Errorf("host: %w: tenant %q: want letters, digits, '.', '_' or '-', at most 64", agent.ErrInvalidOption, id)
	}
	if cfg.Registry == nil {
		return nil, fmt.Errorf("host: %w: tenant %q: no registry", agent.ErrInvalidOption, id)
	}
	v := &Host{reg: cfg.Registry, eng: h.eng, cache: h.cache, log: h.log.With("tenant", id), transport: h.transport,
		trustedKeys: h.trustedKeys, lenientOutputs: h.lenientOutputs, observe: h.observe,
		root: h, tenant: id, secrets: maps.Clone(cfg.Secrets), admit: cfg.Admit, gate: cfg.Gate, plugins: map[string]*Plugin{}}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	h.modMu.Lock()
	defer h.modMu.Unlock()
	if closed {
		return nil, errors.New("host: the host is closed")
	}
	if _, dup := h.views[id]; dup {
		return nil, fmt.Errorf("host: %w: tenant %q has a view already", agent.ErrInvalidOption, id)
	}
	if v.secrets == nil {
		v.secrets = map[string]string{}
	}
	h.views[id] = v
	return v, nil
}

// TenantID returns the tenant of a view, or "" for a host made by New.
func (h *Host) TenantID() string { return h.tenant }

// secretValues returns a manifest's secrets with their values: from the environment
// (or as given) for a host made by New, from the tenant's secrets for a view, where a
// secret the tenant lacks is dropped, so not granted.
func (h *Host) secretValues(secrets map[string]Secret) map[string]Secret {
	out := make(map[string]Secret, len(secrets))
	for name, s := range secrets {
		if h.root != h {
			v, ok := h.secrets[name]
			if !ok {
				continue
			}
			s.Value = v
		} else if s.Value == "" && s.Env != "" {
			s.Value = os.Getenv(s.Env)
		}
		out[name] = s
	}
	return out
}

// moduleKey names a compiled module: what was compiled, and with which limits.
type moduleKey struct {
	sha256      string
	memoryPages uint32
	resettable  bool
	env         string // the guest's environment, its pairs joined by NUL
}

// sharedModule is a module the host and its views share, closed with its last user.
type sharedModule struct {
	module
	users int
}

// compile returns the module of wasm (whose hex SHA-256 is sum) compiled with cfg,
// compiling it unless the host or a view did already, and the function that gives it
// back.
func (h *Host) compile(ctx context.Context, wasm []byte, sum string, cfg engine.ModuleConfig) (module, func(), error) {
	r := h.root
	key := moduleKey{sum, cfg.MemoryPages, cfg.Resettable, strings.Join(cfg.Env, "\x00")}
	r.modMu.Lock()
	sm := r.modules[key]
	if sm != nil {
		sm.users++
	}
	r.modMu.Unlock()
	if sm == nil {
		// Compiling takes long: two views loading one module at once may both compile
		// it, and the second keeps the first's.
		if r.cache != nil {
			var err error
			if cfg.Cache, cfg.CacheDir, err = r.cache.forModule(r.eng.Name(), sum); err != nil {
				return nil, nil, err
			}
		}
		m, err := r.eng.Compile(ctx, wasm, cfg)
		if err != nil {
			return nil, nil, err
		}
		r.modMu.Lock()
		dup := r.modules[key]
		if dup != nil {
			dup.users++
			sm = dup
		} else {
			sm = &sharedModule{module: m, users: 1}
			r.modules[key] = sm
		}
		r.modMu.Unlock()
		if dup != nil {
			m.Close(context.Background())
		}
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			r.modMu.Lock()
			sm.users--
			last := sm.users == 0
			if last {
				delete(r.modules, key)
			}
			r.modMu.Unlock()
			if last {
				sm.module.Close(context.Background())
			}
		})
	}
	return sm.module, release, nil
}
