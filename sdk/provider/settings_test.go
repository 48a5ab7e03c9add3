package provider

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

// isCode reports whether err is an *abi.Error with the code.
func isCode(err error, code abi.ErrorCode) bool {
	var e *abi.Error
	return errors.As(err, &e) && e.Code == code
}

var testDefaults = Settings{BaseURL: "https://api.example.com/v1", KeySecret: "EXAMPLE_API_KEY", Models: []string{"a-1", "b-2"}}

func TestReadSettings(t *testing.T) {
	denied := func(string) (string, error) { return "", abi.Errorf(abi.CodePermissionDenied, "not granted") }
	s := readSettings(denied, testDefaults)
	if s.BaseURL != testDefaults.BaseURL || s.KeySecret != "EXAMPLE_API_KEY" || !slices.Equal(s.Models, testDefaults.Models) {
		t.Errorf("defaults = %+v", s)
	}
	granted := func(cfg map[string]string) func(string) (string, error) {
		return func(k string) (string, error) {
			v, ok := cfg[k]
			if !ok {
				return denied(k)
			}
			return v, nil
		}
	}
	s = readSettings(granted(map[string]string{"baseURL": " http://127.0.0.1:8080/v1/ ", "models": " a , b,, a,meta-llama/llama-3.1-8b:free", "apiKeySecret": ""}), testDefaults)
	if s.BaseURL != "http://127.0.0.1:8080/v1" || strings.Join(s.Models, "|") != "a|b|meta-llama/llama-3.1-8b:free" || s.KeySecret != "" {
		t.Errorf("configured = %+v", s)
	}
	// Empty baseURL and models keep the defaults; apiKeySecret is trimmed.
	s = readSettings(granted(map[string]string{"baseURL": "  ", "models": " , ", "apiKeySecret": " TEAM_KEY "}), testDefaults)
	if s.BaseURL != testDefaults.BaseURL || !slices.Equal(s.Models, testDefaults.Models) || s.KeySecret != "TEAM_KEY" {
		t.Errorf("empty values = %+v", s)
	}
	// Outside a plugin every key is ungranted.
	if s := ReadSettings(testDefaults); s.BaseURL != testDefaults.BaseURL || s.KeySecret != testDefaults.KeySecret {
		t.Errorf("ReadSettings = %+v", s)
	}
}

func TestCapabilitiesAndValidate(t *testing.T) {
	jsonOf := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	s := Settings{BaseURL: "http://127.0.0.1:41234/v1", KeySecret: "ANTHROPIC_API_KEY"}
	if got, want := jsonOf(s.Capabilities()), `{"http":["127.0.0.1:41234"],"config":["baseURL","models","apiKeySecret"],"secrets":["ANTHROPIC_API_KEY"]}`; got != want {
		t.Errorf("capabilities = %s, want %s", got, want)
	}
	if err := s.Validate("x"); err != nil {
		t.Error(err)
	}
	if got := s.KeyPlaceholder(); got != "{{secret:ANTHROPIC_API_KEY}}" {
		t.Errorf("placeholder = %q", got)
	}
	// No key: no secret, no placeholder.
	s.KeySecret = ""
	if c := s.Capabilities(); c.Secrets != nil || s.KeyPlaceholder() != "" || s.Validate("x") != nil {
		t.Errorf("no key: %+v %q", c, s.KeyPlaceholder())
	}
	// What a descriptor could not hold is left out, and Validate says why.
	bad := Settings{BaseURL: "not a url", KeySecret: "A B"}
	if c := bad.Capabilities(); c.HTTP != nil || c.Secrets != nil {
		t.Errorf("bad capabilities = %+v", c)
	}
	if err := bad.Validate("openai"); !isCode(err, abi.CodeInvalidInput) || !strings.HasPrefix(abi.AsError(err).Message, "openai: config baseURL") {
		t.Errorf("bad baseURL: %v", err)
	}
	bad.BaseURL = "https://api.example.com"
	if err := bad.Validate("openai"); !isCode(err, abi.CodeInvalidInput) || !strings.Contains(err.Error(), `apiKeySecret "A B"`) {
		t.Errorf("bad secret: %v", err)
	}
	for name, want := range map[string]bool{"GEMINI_API_KEY": true, "key.v2-x": true, "": false, "A B": false, "x}}": false} {
		if validSecretName(name) != want {
			t.Errorf("validSecretName(%q) != %v", name, want)
		}
	}
}

func TestHost(t *testing.T) {
	for u, want := range map[string]string{
		"https://api.anthropic.com/v1":  "api.anthropic.com",
		"http://127.0.0.1:41234/v1":     "127.0.0.1:41234",
		"http://user@Example.COM:80":    "example.com",
		"https://example.com:80":        "example.com:80",
		"http://[::1]:8080/v1":          "[::1]:8080",
		"http://[::1]/v1":               "::1",
		"https://proxy.example/a?b=c:d": "proxy.example",
		"api.openai.com/v1":             "api.openai.com",
		"http://a b/":                   "",
		"http://[nope]/":                "",
		"":                              "",
	} {
		if got := Host(u); got != want {
			t.Errorf("Host(%q) = %q, want %q", u, got, want)
		}
	}
}

func TestConfigObject(t *testing.T) {
	m, err := ConfigObject("p", nil)
	if err != nil || m == nil || len(m) != 0 {
		t.Errorf("nil: %v %v", m, err)
	}
	in := map[string]any{"temperature": 0.5}
	m, err = ConfigObject("p", in)
	m["other"] = true
	if err != nil || m["temperature"] != 0.5 || len(in) != 1 {
		t.Errorf("map: %v %v (the request's config changed: %v)", m, err, in)
	}
	type typed struct {
		Temperature float64 `json:"temperature"`
		Tier        string  `json:"service_tier"`
	}
	m, err = ConfigObject("p", typed{0.5, "auto"})
	if err != nil || m["temperature"] != 0.5 || m["service_tier"] != "auto" {
		t.Errorf("typed: %v %v", m, err)
	}
	for _, bad := range []any{"hot", []int{1}, func() {}} {
		if _, err := ConfigObject("p", bad); !isCode(err, abi.CodeInvalidInput) || !strings.HasPrefix(abi.AsError(err).Message, "p: config") {
			t.Errorf("%T: %v", bad, err)
		}
	}
}
