package host_test

import (
	"errors"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host"
)

func TestCeilingCheck(t *testing.T) {
	ceiling := host.Ceiling{
		State:   plugin.StateRead,
		HTTP:    []string{"api.openai.com", "*.example.com", "127.0.0.1:11434"},
		Secrets: []string{"OPENAI_API_KEY"},
		Timeout: host.Duration{Duration: time.Minute},
	}
	for _, c := range []struct {
		name  string
		m     host.Manifest
		field string // "" when within
	}{
		{"nothing", host.Manifest{}, ""},
		{"all it allows", host.Manifest{State: plugin.StateRead, HTTP: []string{"api.openai.com", "a.example.com", "127.0.0.1:11434"},
			Secrets: map[string]host.Secret{"OPENAI_API_KEY": {}}, Timeout: host.Duration{Duration: time.Minute},
			MemoryPages: host.DefaultMemoryPages, MaxInstances: host.DefaultMaxInstances, Isolation: host.IsolationSession}, ""},
		{"state", host.Manifest{State: plugin.StateWrite}, "state"},
		{"a host", host.Manifest{HTTP: []string{"api.openai.com", "evil.com"}}, "http[1]"},
		{"another port", host.Manifest{HTTP: []string{"api.openai.com:8443"}}, "http[0]"},
		{"the domain itself", host.Manifest{HTTP: []string{"example.com"}}, "http[0]"},
		{"a secret", host.Manifest{Secrets: map[string]host.Secret{"AWS_KEY": {}}}, "secrets.AWS_KEY"},
		{"memory", host.Manifest{MemoryPages: host.DefaultMemoryPages + 1}, "memoryPages"},
		{"timeout", host.Manifest{Timeout: host.Duration{Duration: time.Hour}}, "timeout"},
		{"instances", host.Manifest{MaxInstances: 64}, "maxInstances"},
		{"response size", host.Manifest{MaxResponseBytes: 1 << 40}, "maxResponseBytes"},
	} {
		err := ceiling.Check(c.m)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var ce *host.CeilingError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, host.ErrBeyondCeiling) {
			t.Errorf("%s: %v, want a ceiling error on %s", c.name, err, c.field)
		}
	}
	// The zero ceiling allows the zero manifest and nothing more.
	if err := (host.Ceiling{}).Check(host.Manifest{}); err != nil {
		t.Errorf("the zero ceiling: %v", err)
	}
	if err := (host.Ceiling{}).Check(host.Manifest{State: plugin.StateRead}); err == nil {
		t.Error("the zero ceiling allows reading the state")
	}
}
