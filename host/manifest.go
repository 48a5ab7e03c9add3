package host

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// Manifest is what the operator grants a plugin. Everything is denied unless granted;
// zero fields take the defaults below.
type Manifest struct {
	// SHA256, when set, pins the plugin: loading fails unless the module's hex SHA-256
	// is this.
	SHA256 string `json:"sha256,omitempty"`
	// TrustedKeys, when any, require the plugin to be signed by one of them (or by a
	// key the host trusts, WithTrustedKeys): public keys as FormatPublicKey writes
	// them, "ed25519:<base64>".
	TrustedKeys []string `json:"trustedKeys,omitempty"`
	// Signature is the plugin's detached signature, the contents of its .sig file
	// (see Sign). It is checked when the host or the manifest trusts any key.
	// LoadFile and LoadDir read it from the file beside the module.
	Signature []byte `json:"-"`
	// MemoryPages caps each instance's memory, in 64 KiB WebAssembly pages.
	MemoryPages uint32 `json:"memoryPages,omitempty"`
	// Timeout bounds each call of an export, HTTP exchanges and streaming included,
	// from the moment it has an instance; it bounds making an instance too.
	Timeout Duration `json:"timeout,omitzero"`
	// MaxInstances bounds the instances serving calls at once; more calls wait.
	MaxInstances int `json:"maxInstances,omitempty"`
	// QueueTimeout bounds how long a call waits for a free instance; past it the call
	// fails with ErrNoInstance.
	QueueTimeout Duration `json:"queueTimeout,omitzero"`
	// Isolation says which calls one instance may serve: pooled (any call of the
	// host or tenant view that loaded the plugin, the default) or session (one
	// session's calls only, starting fresh).
	Isolation Isolation `json:"isolation,omitempty"`
	// State is the access to the session: none, read or write.
	State plugin.StateAccess `json:"state,omitempty"`
	// HTTP lists the hosts the plugin may call: exact names ("api.openai.com",
	// "127.0.0.1") or "*.example.com" for any subdomain of example.com, each with an
	// optional port ("127.0.0.1:11434"). Without a port a grant reaches the scheme's
	// default port only (80 for http, 443 for https).
	HTTP []string `json:"http,omitempty"`
	// MaxResponseBytes bounds the body of each HTTP response.
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`
	// Config holds the values the plugin may read with config_get.
	Config map[string]string `json:"config,omitempty"`
	// Secrets are injected into HTTP headers through {{secret:NAME}}, each only into
	// its header of requests to its hosts.
	Secrets map[string]Secret `json:"secrets,omitempty"`
	// Env is the plugin's WASI environment, which a guest reads as its process
	// environment; nothing of the host's own environment is passed. A Go guest's
	// runtime reads GOGC and GOMEMLIMIT from it as it starts. GOGC is DefaultGOGC
	// unless set here ("100" is Go's own default, "off" turns the collector off).
	Env map[string]string `json:"env,omitempty"`
}

// Secret is a value the host injects into a plugin's HTTP headers. It is bound to the
// hosts and the header it is for: a {{secret:NAME}} anywhere else fails the request,
// and a redirect to another origin drops the header.
type Secret struct {
	Value string `json:"-"` // never serialized: it comes from Env or from code
	// Env names the environment variable holding the value, for manifests in files.
	Env string `json:"env,omitempty"`
	// Hosts are the hosts the secret may be sent to, written as HTTP grants are
	// ("api.openai.com", "127.0.0.1:11434"). Empty, it is the manifest's one HTTP
	// grant; a manifest granting several hosts must name the secret's.
	Hosts []string `json:"hosts,omitempty"`
	// Header is the header the secret may be sent in (default "Authorization").
	Header string `json:"header,omitempty"`
	// Readable lets the plugin read the value itself with secret_get. Rarely needed.
	Readable bool `json:"readable,omitempty"`
}

// The defaults of a Manifest's zero fields.
const (
	DefaultMemoryPages      = 1024 // 64 MiB
	DefaultTimeout          = 30 * time.Second
	DefaultMaxInstances     = 4
	DefaultQueueTimeout     = 30 * time.Second
	DefaultMaxResponseBytes = 32 << 20
	DefaultSecretHeader     = "Authorization"
	// DefaultGOGC is a plugin's GOGC: a Go guest's linear memory never shrinks, so it
	// keeps the high-water mark of its heap; collecting at a quarter's growth rather
	// than Go's doubling keeps a warm calculator instance at 5.8 MiB instead of 8.5,
	// at no cost in time (BENCHMARKS.md, "A Go guest's garbage collector").
	DefaultGOGC = "25"
)

// Limits of the protocol (ABI.md, section 4).
const (
	maxOutputBytes = 16 << 20
	maxChunkBytes  = 1 << 20
	maxOpenHTTP    = 8
	maxRedirects   = 10
)

func (m Manifest) withDefaults() Manifest {
	if m.MemoryPages == 0 {
		m.MemoryPages = DefaultMemoryPages
	}
	if m.Timeout.Duration == 0 {
		m.Timeout.Duration = DefaultTimeout
	}
	if m.MaxInstances == 0 {
		m.MaxInstances = DefaultMaxInstances
	}
	if m.QueueTimeout.Duration == 0 {
		m.QueueTimeout.Duration = DefaultQueueTimeout
	}
	if m.MaxResponseBytes == 0 {
		m.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if m.State == "" {
		m.State = plugin.StateNone
	}
	if m.Isolation == "" {
		m.Isolation = IsolationPooled
	}
	if _, ok := m.Env["GOGC"]; !ok {
		env := maps.Clone(m.Env)
		if env == nil {
			env = map[string]string{}
		}
		env["GOGC"] = DefaultGOGC
		m.Env = env
	}
	if len(m.Secrets) > 0 {
		secrets := make(map[string]Secret, len(m.Secrets))
		for name, s := range m.Secrets {
			if len(s.Hosts) == 0 && len(m.HTTP) == 1 {
				s.Hosts = m.HTTP
			}
			if s.Header == "" {
				s.Header = DefaultSecretHeader
			}
			secrets[name] = s
		}
		m.Secrets = secrets
	}
	return m
}

// Validate checks a manifest as loading a plugin with it would: what it grants is
// well formed, its limits are in range, its trusted keys are keys.
func (m Manifest) Validate() error {
	for _, k := range m.TrustedKeys {
		if _, err := ParsePublicKey(k); err != nil {
			return fmt.Errorf("trustedKeys: %w", err)
		}
	}
	return m.withDefaults().validate()
}

func (m Manifest) validate() error {
	switch m.State {
	case plugin.StateNone, plugin.StateRead, plugin.StateWrite:
	default:
		return fmt.Errorf("state access %q: want none, read or write", m.State)
	}
	switch m.Isolation {
	case IsolationPooled, IsolationSession:
	default:
		return fmt.Errorf("isolation %q: want pooled or session", m.Isolation)
	}
	if m.MemoryPages > 65536 {
		return fmt.Errorf("memoryPages %d: at most 65536 (4 GiB)", m.MemoryPages)
	}
	if m.MaxInstances < 0 || m.Timeout.Duration < 0 || m.QueueTimeout.Duration < 0 || m.MaxResponseBytes < 0 {
		return fmt.Errorf("negative limit")
	}
	for _, h := range m.HTTP {
		if _, err := parseHostGrant(h); err != nil {
			return err
		}
	}
	for k, v := range m.Env {
		// wazero would refuse these only when an instance is made; Validate checks a
		// manifest before any plugin is loaded with it.
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("env %q: want a name without '=' or NUL, and a value without NUL", k)
		}
	}
	for name, s := range m.Secrets {
		if len(s.Hosts) == 0 && len(m.HTTP) > 1 {
			return fmt.Errorf("secret %q: name the hosts it is for (hosts): the manifest grants %d", name, len(m.HTTP))
		}
		for _, h := range s.Hosts {
			if _, err := parseHostGrant(h); err != nil {
				return fmt.Errorf("secret %q: %w", name, err)
			}
		}
		if s.Header == "" || strings.ContainsAny(s.Header, " \t\r\n:") {
			return fmt.Errorf("secret %q: header %q is not a header name", name, s.Header)
		}
	}
	return nil
}

// environ is the manifest's environment as "KEY=value" pairs sorted by key.
func (m Manifest) environ() []string {
	env := make([]string, 0, len(m.Env))
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		env = append(env, k+"="+m.Env[k])
	}
	return env
}

// hostGrant is an HTTP grant: a host name (lower case, "*.domain" for its
// subdomains) or an IP address, and a port ("": the scheme's default).
type hostGrant struct {
	host, port string
}

// parseHostGrant parses an HTTP grant: a host name, an IP address or *.domain, with
// an optional :port (an IPv6 address with a port is written [::1]:8080).
func parseHostGrant(s string) (hostGrant, error) {
	bad := fmt.Errorf("http host %q: want a host name, an IP address or *.domain, with an optional :port", s)
	if a, err := netip.ParseAddr(s); err == nil {
		return hostGrant{host: a.String()}, nil
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return hostGrant{}, bad
		}
		host, port = h, p
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return hostGrant{host: a.String(), port: port}, nil
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	name := strings.TrimPrefix(host, "*.")
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" {
		return hostGrant{}, bad
	}
	return hostGrant{host: host, port: port}, nil
}

// defaultPort is the port of a URL of scheme that names none.
func defaultPort(scheme string) string {
	if strings.EqualFold(scheme, "https") {
		return "443"
	}
	return "80"
}

// allowsURL reports whether any of grants reaches u's host and port.
func allowsURL(grants []string, u *url.URL) bool {
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	for _, s := range grants {
		g, err := parseHostGrant(s)
		if err != nil {
			continue
		}
		gport := g.port
		if gport == "" {
			gport = defaultPort(u.Scheme)
		}
		if gport == port && g.covers(host) {
			return true
		}
	}
	return false
}

// covers reports whether the grant's host pattern covers host (a name, an IP address
// or, for the capabilities a plugin asks for, itself a *.domain pattern).
func (g hostGrant) covers(host string) bool {
	if g.host == host {
		return true
	}
	rest, ok := strings.CutPrefix(g.host, "*.")
	return ok && strings.HasSuffix(host, "."+rest)
}

// grants reports whether the manifest grants what a plugin asks for in its
// descriptor: a host with the same port (or none).
func (m Manifest) grants(asked string) bool {
	a, err := parseHostGrant(asked)
	if err != nil {
		return false
	}
	for _, s := range m.HTTP {
		if g, err := parseHostGrant(s); err == nil && g.port == a.port && g.covers(a.host) {
			return true
		}
	}
	return false
}

// origin is a URL's scheme, host and port: where a redirect leaves the origin of the
// request, the headers carrying secrets are dropped.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// Duration is a time.Duration written as "30s" in JSON.
type Duration struct{ time.Duration }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}
