package provider

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/sdk"
)

// The config keys ReadSettings reads.
const (
	configBaseURL   = "baseURL"
	configModels    = "models"
	configKeySecret = "apiKeySecret"
)

// Settings is the configuration of a plugin serving a remote model API.
type Settings struct {
	// BaseURL is the API's base URL, without a trailing '/' ("https://api.openai.com/v1").
	BaseURL string
	// KeySecret names the secret that holds the API key, which the host puts into the
	// request's headers (KeyPlaceholder); empty, no key is sent (a local server).
	KeySecret string
	// Models are the names of the models the plugin declares.
	Models []string
}

// ReadSettings reads the config keys "baseURL", "models" (comma-separated names) and
// "apiKeySecret" with sdk.Config. A key the manifest does not grant keeps its value in
// defaults, and so do an empty baseURL and a models list naming no model; an empty
// apiKeySecret means no key. Spaces around values and names are dropped, as are a
// trailing '/' of baseURL and repeated model names.
func ReadSettings(defaults Settings) Settings {
	return readSettings(sdk.Config, defaults)
}

// readSettings is ReadSettings with the config read by get.
func readSettings(get func(key string) (string, error), defaults Settings) Settings {
	s := Settings{
		BaseURL:   strings.TrimRight(strings.TrimSpace(defaults.BaseURL), "/"),
		KeySecret: strings.TrimSpace(defaults.KeySecret),
		Models:    modelNames(strings.Join(defaults.Models, ",")),
	}
	if v, err := get(configBaseURL); err == nil {
		if v = strings.TrimRight(strings.TrimSpace(v), "/"); v != "" {
			s.BaseURL = v
		}
	}
	if v, err := get(configModels); err == nil {
		if names := modelNames(v); len(names) > 0 {
			s.Models = names
		}
	}
	if v, err := get(configKeySecret); err == nil {
		s.KeySecret = strings.TrimSpace(v)
	}
	return s
}

// modelNames splits a comma-separated list of names: spaces and empty entries dropped,
// each name once.
func modelNames(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Capabilities are what the settings need: the host of BaseURL (the one the plugin
// will call, so that the manifest's grant matches it), the secret KeySecret names, if
// any, and the three config keys. A host or secret name the descriptor could not hold
// is left out; Validate reports it.
func (s Settings) Capabilities() plugin.Capabilities {
	c := plugin.Capabilities{Config: []string{configBaseURL, configModels, configKeySecret}}
	if h := Host(s.BaseURL); h != "" {
		c.HTTP = []string{h}
	}
	if s.KeySecret != "" && validSecretName(s.KeySecret) {
		c.Secrets = []string{s.KeySecret}
	}
	return c
}

// Validate reports settings a call cannot be made with, as an invalid_input error
// whose message starts with the provider's name: a baseURL that is not an http or
// https URL with a host, or an apiKeySecret that is not a secret name.
func (s Settings) Validate(provider string) error {
	if lower := strings.ToLower(s.BaseURL); !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") || Host(s.BaseURL) == "" {
		return abi.Errorf(abi.CodeInvalidInput, "%sconfig %s %q is not an http or https URL", prefix(provider), configBaseURL, s.BaseURL)
	}
	if s.KeySecret != "" && !validSecretName(s.KeySecret) {
		return abi.Errorf(abi.CodeInvalidInput, "%sconfig %s %q is not a secret name ([A-Za-z0-9_.-]+)", prefix(provider), configKeySecret, s.KeySecret)
	}
	return nil
}

// KeyPlaceholder is the {{secret:NAME}} placeholder of the API key, which the host
// replaces in a request's headers without the plugin ever seeing the key; empty when
// no key is sent.
func (s Settings) KeyPlaceholder() string {
	if s.KeySecret == "" {
		return ""
	}
	return "{{secret:" + s.KeySecret + "}}"
}

// validSecretName reports whether name can be the name of a {{secret:NAME}}
// placeholder.
func validSecretName(name string) bool {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return name != ""
}

// Host returns the host of a URL as a manifest grants it: the host name in lower
// case, with the port when the URL names one other than its scheme's default, without
// scheme, user info or path ("http://user@Example.COM:80/v1" gives "example.com",
// "http://127.0.0.1:8080/v1" gives "127.0.0.1:8080", "http://[::1]:8080" gives
// "[::1]:8080"). It returns "" when the URL holds no host a manifest could name.
func Host(url string) string {
	u := strings.TrimSpace(url)
	scheme := "https"
	if s, rest, ok := strings.Cut(u, "://"); ok {
		scheme, u = strings.ToLower(s), rest
	}
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		u = u[:i]
	}
	if i := strings.LastIndexByte(u, '@'); i >= 0 {
		u = u[i+1:]
	}
	host, port := u, ""
	if h, p, err := net.SplitHostPort(u); err == nil {
		host, port = h, p
	}
	host = strings.ToLower(host)
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		host = a.String()
	} else if host == "" || strings.HasPrefix(u, "[") || strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" {
		return ""
	}
	if port == "" || port == map[string]string{"http": "80", "https": "443"}[scheme] {
		return host
	}
	return net.JoinHostPort(host, port)
}

// prefix is what starts the messages of a provider's errors: "name: ", or nothing.
func prefix(provider string) string {
	if provider == "" {
		return ""
	}
	return provider + ": "
}
