package tenant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"

	"github.com/goccy/go-yaml"

	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/oci"
)

// Tenant is one tenant of a deployment, as the tenants file defines it.
type Tenant struct {
	// ID names the tenant in keys, logs and store namespaces: letters, digits, '.',
	// '_' and '-', at most 64.
	ID string `json:"id"`
	// Name is for people.
	Name string `json:"name,omitempty"`
	// Agents lists the agents (by name) the tenant may use; empty allows every agent
	// whose plugins it may load.
	Agents []string `json:"agents,omitempty"`
	// Plugins are the plugins (by name) the tenant's agents may load, each with the
	// most it may be granted. An agent whose file loads another plugin, or grants one
	// more, is not served to the tenant.
	Plugins map[string]host.Ceiling `json:"plugins,omitempty"`
	// Secrets are the tenant's secrets, by the name manifests grant them under.
	Secrets map[string]Secret `json:"secrets,omitempty"`
	// Quotas bound what the tenant's turns may use.
	Quotas Quotas `json:"quotas,omitzero"`
	// Signatures is the cosign signatures the plugins its agents pull from registries
	// (oci:// paths) must carry: the keys and keyless identities it trusts. Paths in it
	// are relative to the tenants file. Without one, the server's own policy applies
	// (terrarium serve --cosign-key).
	Signatures oci.Policy `json:"signatures,omitzero"`
}

// Secret is a tenant's secret: its value, or the environment variable holding it (so
// the tenants file need hold no secret itself).
type Secret struct {
	Value string `json:"value,omitempty"`
	Env   string `json:"env,omitempty"`
}

// Quotas bound what a tenant's turns may use; a zero field is no bound (but for
// WebSockets, which has a default).
type Quotas struct {
	// ConcurrentTurns bounds the tenant's turns running at once.
	ConcurrentTurns int `json:"concurrentTurns,omitempty"`
	// QueuedTurns is how many of the tenant's turns past ConcurrentTurns wait for a
	// place, for at most TurnQueueTimeout (default DefaultTurnQueueTimeout), rather
	// than being refused at once; one more is refused at once. A client that ignores
	// Retry-After then waits on the server without using its CPU.
	QueuedTurns int `json:"queuedTurns,omitempty"`
	// TurnQueueTimeout bounds how long a queued turn waits for a place.
	TurnQueueTimeout host.Duration `json:"turnQueueTimeout,omitzero"`
	// ConcurrentSessions bounds the tenant's sessions open on the server at once (a
	// kept session closed for idleness, or closed by its client, reopens on its next
	// turn, within the bound again).
	ConcurrentSessions int `json:"concurrentSessions,omitempty"`
	// TurnsPerMinute is the rate of turns a tenant may start, sustained; up to
	// TurnBurst (default: TurnsPerMinute, at least 1) may start at once.
	TurnsPerMinute float64 `json:"turnsPerMinute,omitempty"`
	TurnBurst      int     `json:"turnBurst,omitempty"`
	// PluginSecondsPerMinute bounds the time the tenant's plugin calls may run, in
	// seconds a minute, sustained (a minute's worth may be spent at once). A call
	// past it is refused until the budget refills; a call that overran it is paid
	// for by the calls after it.
	PluginSecondsPerMinute float64 `json:"pluginSecondsPerMinute,omitempty"`
	// PluginMemoryPages bounds the linear memory (64 KiB pages) the tenant's plugins
	// may reach together: each plugin's memory limit times its most instances.
	PluginMemoryPages int64 `json:"pluginMemoryPages,omitempty"`
	// ModelTokensPerDay bounds the model tokens (input and output, as the models
	// report them) the tenant's turns may use in any 24 hours. A turn starts while
	// they are not all used, and runs to its end: what it uses past the bound delays
	// the turns after it until the window frees as much.
	ModelTokensPerDay int64 `json:"modelTokensPerDay,omitempty"`
	// WebSockets bounds the tenant's WebSocket connections open at once. Zero is
	// DefaultWebSockets: each holds memory and a goroutine, so none is unbounded.
	WebSockets int `json:"webSockets,omitempty"`
	// StoredBytes bounds what the tenant's sessions take in their stores (as
	// store.Stats counts it, over the tenant's namespaces). It is measured as turns
	// end (at most twice a minute); past it, new turns are refused until the operator
	// raises it or frees space. A turn that starts within it runs to its end, and its
	// snapshot is kept.
	StoredBytes int64 `json:"storedBytes,omitempty"`
}

// ErrInvalid is wrapped by every error about a tenants file.
var ErrInvalid = errors.New("invalid tenants file")

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// file is the tenants file: a list of tenants.
type file struct {
	Tenants []*Tenant `json:"tenants"`
}

// ReadFile reads a tenants file (YAML, or JSON).
func ReadFile(path string) ([]*Tenant, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	ts, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("tenant: %s: %w", path, err)
	}
	return ts, nil
}

// Parse parses a tenants file, refusing unknown keys, and checks it: IDs valid and
// unique, quotas not negative, every ceiling valid.
func Parse(data []byte) ([]*Tenant, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	seen := map[string]bool{}
	for i, t := range f.Tenants {
		if t == nil {
			return nil, fmt.Errorf("%w: tenants[%d]: empty", ErrInvalid, i)
		}
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("%w: tenants[%d]: %w", ErrInvalid, i, err)
		}
		if seen[t.ID] {
			return nil, fmt.Errorf("%w: tenants[%d]: tenant %q is defined twice", ErrInvalid, i, t.ID)
		}
		seen[t.ID] = true
	}
	return f.Tenants, nil
}

func (t *Tenant) check() error {
	if !idPattern.MatchString(t.ID) {
		return fmt.Errorf("id %q: want letters, digits, '.', '_' or '-', at most 64", t.ID)
	}
	q := t.Quotas
	if q.ConcurrentTurns < 0 || q.QueuedTurns < 0 || q.TurnQueueTimeout.Duration < 0 || q.ConcurrentSessions < 0 ||
		q.TurnsPerMinute < 0 || q.TurnBurst < 0 || q.PluginSecondsPerMinute < 0 || q.PluginMemoryPages < 0 ||
		q.ModelTokensPerDay < 0 || q.StoredBytes < 0 || q.WebSockets < 0 {
		return fmt.Errorf("tenant %s: quotas: negative", t.ID)
	}
	if q.QueuedTurns > 0 && q.ConcurrentTurns == 0 {
		// Without a bound on running turns, no turn ever waits.
		return fmt.Errorf("tenant %s: quotas: queuedTurns needs concurrentTurns", t.ID)
	}
	if (len(t.Signatures.Identities) > 0) != (t.Signatures.TrustedRoot != "") {
		return fmt.Errorf("tenant %s: signatures: identities and a trustedRoot (a Sigstore trusted_root.json) go together", t.ID)
	}
	for name, s := range t.Secrets {
		if (s.Value == "") == (s.Env == "") {
			return fmt.Errorf("tenant %s: secrets.%s: give value or env, one of them", t.ID, name)
		}
	}
	return nil
}

// SecretValues returns the tenant's secret values, reading those it keeps in the
// environment; a variable that is not set is a missing secret, not an empty one.
func (t *Tenant) SecretValues() map[string]string {
	out := make(map[string]string, len(t.Secrets))
	for name, s := range t.Secrets {
		v := s.Value
		if s.Env != "" {
			var ok bool
			if v, ok = os.LookupEnv(s.Env); !ok {
				continue
			}
		}
		out[name] = v
	}
	return out
}

// MayUse reports whether the tenant may use the agent named.
func (t *Tenant) MayUse(agent string) bool {
	return len(t.Agents) == 0 || slices.Contains(t.Agents, agent)
}

// ErrPluginNotAllowed is wrapped by the error of a plugin a tenant may not load.
var ErrPluginNotAllowed = errors.New("plugin not allowed")

// ErrOverQuota is wrapped by the error of what a tenant's quota refuses.
var ErrOverQuota = errors.New("over quota")

// Admission returns what decides which plugins the tenant's agents may load (a
// host.TenantConfig's Admit): a plugin listed in Plugins, granted no more than its
// ceiling, within the tenant's plugin memory. It counts the memory of every plugin
// it admits; call it once per deployment.
func (t *Tenant) Admission() func(plugin string, m host.Manifest) error {
	var pages int64
	return func(plugin string, m host.Manifest) error {
		c, ok := t.Plugins[plugin]
		if !ok {
			return fmt.Errorf("tenant %s: %w: %s (allowed: %q)", t.ID, ErrPluginNotAllowed, plugin, slices.Sorted(maps.Keys(t.Plugins)))
		}
		if err := c.Check(m); err != nil {
			return fmt.Errorf("tenant %s: plugin %s: %w", t.ID, plugin, err)
		}
		need := int64(m.MemoryPages) * int64(m.MaxInstances)
		if limit := t.Quotas.PluginMemoryPages; limit > 0 && pages+need > limit {
			return fmt.Errorf("tenant %s: %w: plugin %s needs %d pages of memory (%d per instance, %d instances), %d of the tenant's %d are taken",
				t.ID, ErrOverQuota, plugin, need, m.MemoryPages, m.MaxInstances, pages, limit)
		}
		pages += need
		return nil
	}
}
