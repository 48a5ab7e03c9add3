package mcp

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"runtime/debug"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of a ServerConfig's zero timeouts.
const (
	// DefaultTimeout bounds each call of a tool.
	DefaultTimeout = 30 * time.Second
	// DefaultConnectTimeout bounds connecting: starting a command (npx may first
	// download the server), the handshake, and listing the tools.
	DefaultConnectTimeout = time.Minute
)

// ServerConfig names an MCP server whose tools an agent may use. It decodes from JSON
// and from YAML, so that an agent file can list the servers its agent uses:
//
//	mcp:
//	  - name: github
//	    url: https://api.githubcopilot.com/mcp/
//	    headers: {Authorization: "Bearer {{secret:GITHUB_TOKEN}}"}
//	    allow: [get_issue, list_issues]
//	  - name: files
//	    command: npx
//	    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
//	    timeout: 10s
//	    allow: ["read_*"]
type ServerConfig struct {
	// Name namespaces the server's tools: the agent sees them as "<name>/<tool>".
	// Letters, digits, "_" and "-".
	Name string `json:"name" yaml:"name"`
	// Command starts a server that speaks MCP on its standard input and output.
	Command string `json:"command,omitempty" yaml:"command,omitempty"`
	// Args are the command's arguments.
	Args []string `json:"args,omitempty" yaml:"args,omitempty"`
	// Env is the command's environment on top of the few variables any program
	// expects (PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, TMPDIR): the rest of the
	// host's environment, with whatever secrets it holds, is not passed on. Values may
	// hold {{secret:NAME}}.
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// URL reaches a server over streamable HTTP instead.
	URL string `json:"url,omitempty" yaml:"url,omitempty"`
	// Headers go with every HTTP request; values may hold {{secret:NAME}}
	// ("Bearer {{secret:GITHUB_TOKEN}}").
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`
	// Timeout bounds each tool call (DefaultTimeout when zero).
	Timeout Duration `json:"timeout,omitzero" yaml:"timeout,omitempty"`
	// ConnectTimeout bounds connecting, again after the server exited (default
	// DefaultConnectTimeout).
	ConnectTimeout Duration `json:"connectTimeout,omitzero" yaml:"connectTimeout,omitempty"`
	// Allow lists the server's tools the agent may use, by the server's names, as
	// path.Match patterns ("read_*", or "*" for all). Nothing is allowed unless
	// listed, and a pattern matching none of the server's tools is an error.
	Allow []string `json:"allow" yaml:"allow"`
}

var serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// Validate reports what is wrong with the config, naming the server.
func (c ServerConfig) Validate() error {
	if !serverName.MatchString(c.Name) {
		return fmt.Errorf("mcp: server name %q: want letters, digits, _ and - (at most 64)", c.Name)
	}
	switch {
	case c.Command == "" && c.URL == "":
		return fmt.Errorf("mcp: server %s: give a command or a url", c.Name)
	case c.Command != "" && c.URL != "":
		return fmt.Errorf("mcp: server %s: give a command or a url, not both", c.Name)
	case c.Command != "" && len(c.Headers) > 0:
		return fmt.Errorf("mcp: server %s: headers go with a url, not a command", c.Name)
	case c.URL != "" && (len(c.Args) > 0 || len(c.Env) > 0):
		return fmt.Errorf("mcp: server %s: args and env go with a command, not a url", c.Name)
	case c.Timeout.Duration < 0 || c.ConnectTimeout.Duration < 0:
		return fmt.Errorf("mcp: server %s: negative timeout", c.Name)
	case len(c.Allow) == 0:
		return fmt.Errorf("mcp: server %s: allow lists no tools: name the tools the agent may use, or \"*\"", c.Name)
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp: server %s: url %q: want an http or https URL", c.Name, c.URL)
		}
	}
	return nil
}

func (c ServerConfig) timeout() time.Duration {
	return cmp.Or(c.Timeout.Duration, DefaultTimeout)
}

func (c ServerConfig) connectTimeout() time.Duration {
	return cmp.Or(c.ConnectTimeout.Duration, DefaultConnectTimeout)
}

// Duration is a time.Duration written "30s" in JSON and YAML.
type Duration struct{ time.Duration }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: want a number with a unit, like 30s", b)
	}
	d.Duration = v
	return nil
}

// SecretFunc returns the value of the secret named name.
type SecretFunc func(ctx context.Context, name string) (string, error)

// EnvSecrets reads a secret from the environment variable of its name: the default.
func EnvSecrets(_ context.Context, name string) (string, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("secret %s: the environment variable %s is not set", name, name)
	}
	return v, nil
}

var secretRef = regexp.MustCompile(`\{\{secret:([A-Za-z0-9_.-]+)\}\}`)

// expandSecrets replaces each {{secret:NAME}} in s with the secret's value.
func expandSecrets(ctx context.Context, s string, secrets SecretFunc) (string, error) {
	var err error
	out := secretRef.ReplaceAllStringFunc(s, func(ref string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = secrets(ctx, secretRef.FindStringSubmatch(ref)[1])
		return v
	})
	return out, err
}

// Option configures NewServer and Connect.
type Option interface {
	ServerOption
	apply(*options)
}

// ServerOption configures NewServer only (WithSessions); every Option is one too.
type ServerOption interface {
	applyServer(*serverOptions)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options)             { f(o) }
func (f optionFunc) applyServer(o *serverOptions) { f(&o.options) }

// serverOptions are NewServer's.
type serverOptions struct {
	options
	sessions Sessions
}

type serverOptionFunc func(*serverOptions)

func (f serverOptionFunc) applyServer(o *serverOptions) { f(o) }

type options struct {
	impl    mcpsdk.Implementation
	log     *slog.Logger
	secrets SecretFunc
}

func newOptions(opts []Option) options {
	o := options{
		impl:    mcpsdk.Implementation{Name: "terrarium", Version: version()},
		log:     slog.Default(),
		secrets: EnvSecrets,
	}
	for _, opt := range opts {
		opt.apply(&o)
	}
	return o
}

// WithImplementation sets the name and version the server or client gives its peer
// (default "terrarium" and the module's version).
func WithImplementation(name, version string) Option {
	return optionFunc(func(o *options) { o.impl.Name, o.impl.Version = name, version })
}

// WithLogger sets the logger (default slog.Default()). A stdio server's standard
// output is the protocol's: log to standard error.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.log = l }) }

// WithSecrets sets where Connect finds the secrets that headers and env name
// (default EnvSecrets).
func WithSecrets(fn SecretFunc) Option { return optionFunc(func(o *options) { o.secrets = fn }) }

// version is Terrarium's module version in this build, "(devel)" for a checkout.
func version() string {
	const module = "github.com/terrarium-ai/terrarium"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if info.Main.Path == module {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == module {
			return d.Version
		}
	}
	return "(devel)"
}
