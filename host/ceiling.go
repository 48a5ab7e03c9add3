package host

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// Ceiling is the most a plugin may be granted: what an operator lets a tenant's agent
// files grant it. A zero field allows what a manifest's zero field grants, so the zero
// Ceiling allows exactly the zero Manifest: no state, no hosts, no secrets, the
// default limits. Config values and the queue timeout are not capabilities and have
// no ceiling; session isolation only ever narrows what an instance serves.
type Ceiling struct {
	// State is the most access to the session: none, read or write.
	State plugin.StateAccess `json:"state,omitempty"`
	// HTTP lists the hosts grants may name, written as grants are; "*.example.com"
	// allows example.com's subdomains.
	HTTP []string `json:"http,omitempty"`
	// Secrets lists the secrets, by name, that may be granted.
	Secrets []string `json:"secrets,omitempty"`
	// MemoryPages, Timeout, MaxInstances and MaxResponseBytes bound the manifest's
	// limits of the same names.
	MemoryPages      uint32   `json:"memoryPages,omitempty"`
	Timeout          Duration `json:"timeout,omitzero"`
	MaxInstances     int      `json:"maxInstances,omitempty"`
	MaxResponseBytes int64    `json:"maxResponseBytes,omitempty"`
}

// ErrBeyondCeiling is wrapped by the error of a manifest granting more than a ceiling
// allows.
var ErrBeyondCeiling = errors.New("beyond the ceiling")

// CeilingError is the error of a manifest granting more than a ceiling allows. Field
// is the manifest's key at fault ("http[1]", "secrets.OPENAI_API_KEY", "timeout").
type CeilingError struct {
	Field   string
	Granted string
	Allowed string
}

// Error implements error.
func (e *CeilingError) Error() string {
	return fmt.Sprintf("%s: grants %s, beyond the ceiling of %s", e.Field, e.Granted, e.Allowed)
}

// Unwrap returns ErrBeyondCeiling.
func (e *CeilingError) Unwrap() error { return ErrBeyondCeiling }

// Check returns a *CeilingError naming the first grant of m beyond the ceiling, or
// nil. Both are compared with their defaults filled in.
func (c Ceiling) Check(m Manifest) error {
	m = m.withDefaults()
	limits := Manifest{MemoryPages: c.MemoryPages, Timeout: c.Timeout, MaxInstances: c.MaxInstances,
		MaxResponseBytes: c.MaxResponseBytes}.withDefaults()
	beyond := func(field, granted, allowed string) error {
		return &CeilingError{Field: field, Granted: granted, Allowed: allowed}
	}
	if !c.State.Allows(m.State) {
		allowed := c.State
		if allowed == "" {
			allowed = plugin.StateNone
		}
		return beyond("state", string(m.State), string(allowed))
	}
	within := Manifest{HTTP: c.HTTP}
	for i, h := range m.HTTP {
		if !within.grants(h) {
			return beyond(fmt.Sprintf("http[%d]", i), h, fmt.Sprintf("%q", c.HTTP))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.Secrets)) {
		if !slices.Contains(c.Secrets, name) {
			return beyond("secrets."+name, "secret "+name, fmt.Sprintf("secrets %q", c.Secrets))
		}
	}
	for _, l := range []struct {
		field            string
		granted, allowed int64
		show             func(int64) string
	}{
		{"memoryPages", int64(m.MemoryPages), int64(limits.MemoryPages), func(n int64) string { return strconv.FormatInt(n, 10) + " pages" }},
		{"timeout", int64(m.Timeout.Duration), int64(limits.Timeout.Duration), func(n int64) string { return time.Duration(n).String() }},
		{"maxInstances", int64(m.MaxInstances), int64(limits.MaxInstances), func(n int64) string { return strconv.FormatInt(n, 10) + " instances" }},
		{"maxResponseBytes", m.MaxResponseBytes, limits.MaxResponseBytes, func(n int64) string { return strconv.FormatInt(n, 10) + " bytes" }},
	} {
		if l.granted > l.allowed {
			return beyond(l.field, l.show(l.granted), l.show(l.allowed))
		}
	}
	return nil
}
