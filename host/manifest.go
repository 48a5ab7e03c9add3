package host

import (
	"encoding/json"
	"fmt"
	"net"
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
	// MemoryPages caps each instance's memory, in 64 KiB WebAssembly pages.
	MemoryPages uint32 `json:"memoryPages,omitempty"`
	// Timeout bounds each call of an export, HTTP exchanges included.
	Timeout Duration `json:"timeout,omitzero"`
	// MaxInstances bounds the instances serving calls at once; more calls wait.
	MaxInstances int `json:"maxInstances,omitempty"`
	// State is the access to the session: none, read or write.
	State plugin.StateAccess `json:"state,omitempty"`
	// HTTP lists the hosts the plugin may call: exact names ("api.openai.com",
	// "127.0.0.1") or "*.example.com" for any subdomain of example.com.
	HTTP []string `json:"http,omitempty"`
	// MaxResponseBytes bounds the body of each HTTP response.
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`
	// Config holds the values the plugin may read with config_get.
	Config map[string]string `json:"config,omitempty"`
	// Secrets are injected into HTTP headers through {{secret:NAME}}.
	Secrets map[string]Secret `json:"secrets,omitempty"`
}

// Secret is a value the host injects into a plugin's HTTP headers.
type Secret struct {
	Value string `json:"-"` // never serialized: it comes from Env or from code
	// Env names the environment variable holding the value, for manifests in files.
	Env string `json:"env,omitempty"`
	// Readable lets the plugin read the value itself with secret_get. Rarely needed.
	Readable bool `json:"readable,omitempty"`
}

// The defaults of a Manifest's zero fields.
const (
	DefaultMemoryPages      = 1024 // 64 MiB
	DefaultTimeout          = 30 * time.Second
	DefaultMaxInstances     = 4
	DefaultMaxResponseBytes = 32 << 20
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
	if m.MaxResponseBytes == 0 {
		m.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if m.State == "" {
		m.State = plugin.StateNone
	}
	return m
}

func (m Manifest) validate() error {
	switch m.State {
	case plugin.StateNone, plugin.StateRead, plugin.StateWrite:
	default:
		return fmt.Errorf("state access %q: want none, read or write", m.State)
	}
	if m.MemoryPages > 65536 {
		return fmt.Errorf("memoryPages %d: at most 65536 (4 GiB)", m.MemoryPages)
	}
	if m.MaxInstances < 0 || m.Timeout.Duration < 0 || m.MaxResponseBytes < 0 {
		return fmt.Errorf("negative limit")
	}
	for _, h := range m.HTTP {
		if err := checkHTTPHost(h); err != nil {
			return err
		}
	}
	return nil
}

// checkHTTPHost checks an HTTP grant or request: a host name, an IP address, or
// *.domain.
func checkHTTPHost(h string) error {
	if h == "" || strings.ContainsAny(h, "/:@ ") && net.ParseIP(h) == nil {
		return fmt.Errorf("http host %q: want a host name, an IP address or *.domain", h)
	}
	return nil
}

// allowsHost reports whether host (a URL's host name) is granted.
func (m Manifest) allowsHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range m.HTTP {
		h = strings.ToLower(h)
		if h == host {
			return true
		}
		if rest, ok := strings.CutPrefix(h, "*."); ok && strings.HasSuffix(host, "."+rest) {
			return true
		}
	}
	return false
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
