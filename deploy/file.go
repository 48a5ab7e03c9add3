package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/oci"
)

// File is an agent file: one agent, as an operator writes it in YAML. Every key is
// checked: an unknown one is an error naming its file and line.
//
// An agent is a prompt agent (session.DefineAgent: a prompt, tools and handlers) or a
// routed agent (seed 002's conversations, package agent/routes: routes, steps,
// guidelines, terms...), never both. A prompt agent:
//
//	name: assistant
//	description: A helpful assistant.
//	model:
//	  name: offline/echo
//	  config: {temperature: 0.2}
//	  backups: [openai/gpt-4o-mini]
//	  retries: 2
//	  timeout: 30s
//	prompt: assistant.prompt        # a .prompt file beside this one, or the prompt itself
//	tools: [askUser, calculator/calc]
//	clientTools: false                # refuse the tools clients bring (default: offered)
//	handlers: [profile/extract]
//	plugins:
//	  - path: ../../plugins/calculator   # a .wasm file, or a Go plugin's directory (built)
//	    sha256: 9f86d0...                # optional pin
//	    grants: {state: none, timeout: 5s}
//	  - path: oci://ghcr.io/acme/weather:1.0.0@sha256:4e1a...  # a plugin in a registry, pinned
//	snapshots:
//	  store: badger                      # badger (the default), postgres, memory or none
//	  on: [turnEnd, invocationEnd]
//
// A routed agent has the keys of routes.Definition instead of prompt, tools and
// handlers; its model, plugins and snapshots are given as a prompt agent's:
//
//	name: travel
//	model: {name: travel/rules}
//	identity: I am Skye, a travel agent.
//	guidelines:
//	  - action: Confirm what you understood before asking the next question.
//	routes:
//	  - id: flight
//	    title: Book a flight
//	    conditions: [The traveller wants to fly somewhere]
//	    schema: {type: object, properties: {destination: {type: string}}}
//	    steps:
//	      - {id: ask_destination, prompt: Ask the destination, collect: [destination], skipIf: destination != nil}
//	plugins:
//	  - path: model
type File struct {
	// Path is where the file was read from; relative paths inside it are relative to
	// its directory.
	Path string `yaml:"-"`

	// Definition holds the agent's name and description and, for a routed agent, the
	// rest of seed 002's definition (routes.Definition's keys at the top of the file:
	// identity, goal, context, composition, responses, terms, guidelines,
	// capabilities, domains, routes, routingMargin, minRouteScore, strict,
	// missingVariables). The name names the agent: its session flow is
	// /session-flow/<name>, and the server serves it under this name; letters,
	// digits, '.', '_' and '-'.
	routes.Definition `yaml:",inline"`

	// Model is the model every turn uses; it overrides the prompt's.
	Model Model `yaml:"model,omitempty"`
	// Prompt is a prompt agent's base prompt: the path of a .prompt file (a single
	// line ending in .prompt) or Dotprompt source, rendered every turn from the
	// session's prompt input and state. A routed agent has none: its definition makes
	// its instructions.
	Prompt string `yaml:"prompt,omitempty"`
	// MaxTurns bounds the rounds of tool calls in one turn (default 5).
	MaxTurns int `yaml:"maxTurns,omitempty"`
	// ToolErrors says what a failing tool (its error, a plugin's fault or timeout, an
	// input from the model that breaks its schema) does to a turn: "model", the
	// default, tells the model (the tool's response carries the error's code and
	// message), which may correct itself within maxTurns; "fail" fails the turn.
	ToolErrors agent.ToolErrorPolicy `yaml:"toolErrors,omitempty"`
	// Tools are the tools offered to a prompt agent's model, by registered name: the
	// plugins' ("calculator/calc"), Terrarium's own (see Builtins) or the
	// application's. A routed agent's tools are in its domains, capabilities,
	// guidelines and steps.
	Tools []string `yaml:"tools,omitempty"`
	// Handlers run at the points of every turn of a prompt agent, in order, by
	// registered name.
	Handlers []string `yaml:"handlers,omitempty"`
	// ClientTools false refuses the tools a client brings to a turn (the
	// OpenAI-compatible endpoint's "tools"), naming the agent; by default a prompt
	// agent offers them to its model beside its own, and the model calling one ends
	// the turn for the client to run it. A routed agent takes none.
	ClientTools *bool `yaml:"clientTools,omitempty"`
	// Plugins are the plugins this agent's models, tools and handlers come from, with
	// what each is granted.
	Plugins []Plugin `yaml:"plugins,omitempty"`
	// Snapshots says where and when the agent's sessions are kept.
	Snapshots Snapshots `yaml:"snapshots,omitempty"`
	// Isolation "session" gives each of the agent's sessions plugin instances of its
	// own, fresh for its first call of each plugin, whatever the plugins' grants say:
	// nothing a plugin keeps in memory crosses the agent's sessions. The default,
	// "pooled", leaves it to each plugin's grants (host.Manifest.Isolation).
	Isolation host.Isolation `yaml:"isolation,omitempty"`

	// Tenants is not an agent file's: the tenants file (serve -tenants) names the
	// agents each tenant may use. Giving it is an error that says so.
	Tenants any `yaml:"tenants,omitempty"`

	lines map[string]int // a field's path ("model.name", "tools[1]") to its line
}

// Model is the model section of an agent file.
type Model struct {
	// Name is the model's registered name ("offline/echo", "openai/gpt-4o").
	Name string `yaml:"name"`
	// Config is passed to the model, checked against its config schema.
	Config map[string]any `yaml:"config,omitempty"`
	// Backups are tried in order when the model still fails after its retries.
	Backups []string `yaml:"backups,omitempty"`
	// Retries is how many times a failed call is retried on transient errors (0: none).
	Retries int `yaml:"retries,omitempty"`
	// Timeout bounds each attempt (default 60s when retries or backups are set).
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// Plugin is a plugin an agent file loads.
type Plugin struct {
	// Path is a .wasm file, the directory of a Go plugin, which is built (and cached)
	// first, or a plugin in an OCI registry, oci://registry/repository:tag@sha256:<digest>
	// (package host/oci), pulled into a cache and loaded from there: pinned by its
	// manifest's digest, it is never fetched again once cached. A tag without a digest
	// is refused unless the deployment's puller allows floating tags.
	Path string `yaml:"path"`
	// SHA256 pins the module: loading fails unless its hex SHA-256 is this.
	SHA256 string `yaml:"sha256,omitempty"`
	// Grants is what the plugin may do: host.Manifest, with the same keys (state,
	// http, secrets, config, timeout, queueTimeout, memoryPages, maxInstances,
	// maxResponseBytes).
	Grants Grants `yaml:"grants,omitempty"`
}

// Grants is the grants section of a plugin: a host.Manifest in YAML.
type Grants struct {
	host.Manifest
}

// Snapshots is the snapshot section of an agent file.
type Snapshots struct {
	// Store is where snapshots are kept: "badger" (the deployment's data directory),
	// "postgres" (the deployment's PostgreSQL database, shared by every host serving
	// the file), "memory" (lost on restart) or "none" (no snapshots: the client keeps
	// the session's state). The default is postgres when the deployment has a
	// PostgreSQL database (terrarium serve -store), badger otherwise.
	Store string `yaml:"store,omitempty"`
	// On lists the events a snapshot is taken at: turnEnd, invocationEnd (default:
	// both).
	On []string `yaml:"on,omitempty"`
}

// The snapshot stores an agent file may name.
const (
	StoreBadger   = "badger"
	StorePostgres = "postgres"
	StoreMemory   = "memory"
	StoreNone     = "none"
)

// ErrInvalid is wrapped by every error about an agent file.
var ErrInvalid = errors.New("invalid agent file")

// FileError is an error in an agent file: the file, the line and the field.
type FileError struct {
	File  string
	Line  int    // 0 when unknown
	Field string // "model.name", "tools[1]"; empty for the file as a whole
	Err   error
}

// Error implements error.
func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Err.Error())
	return b.String()
}

// Unwrap returns the error and ErrInvalid.
func (e *FileError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// errorf returns an error about the field at path, on the line it is written on.
func (f *File) errorf(path, format string, args ...any) error {
	return &FileError{File: f.Path, Line: f.Line(path), Field: path, Err: fmt.Errorf(format, args...)}
}

// wrap returns err as an error about the field at path.
func (f *File) wrap(path string, err error) error {
	return &FileError{File: f.Path, Line: f.Line(path), Field: path, Err: err}
}

// Line returns the line the field at path ("model.name", "tools[1]") is written on, or
// the nearest enclosing field's, or 0.
func (f *File) Line(path string) int {
	for path != "" {
		if l, ok := f.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// ReadFile reads and checks one agent file. What it names (models, tools, plugins)
// is checked when a deployment is built from it.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &FileError{File: path, Err: err}
	}
	return Parse(path, data)
}

// ReadDir reads every agent file (*.yaml, *.yml) in dir, not its subdirectories, in
// name order. A directory without one is an error, and so are two files defining the
// same agent.
func ReadDir(dir string) ([]*File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("deploy: %w: %w", ErrInvalid, err)
	}
	var files []*File
	seen := map[string]*File{}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || ext != ".yaml" && ext != ".yml" {
			continue
		}
		f, err := ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[f.Name]; dup {
			return nil, f.errorf("name", "agent %q is also defined in %s:%d", f.Name, prev.Path, prev.Line("name"))
		}
		seen[f.Name] = f
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("deploy: %w: no agent files (*.yaml) in %s", ErrInvalid, dir)
	}
	return files, nil
}

var (
	agentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Parse reads an agent file from its bytes; path names it in errors and anchors its
// relative paths.
func Parse(path string, data []byte) (*File, error) {
	astFile, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(path, nil, err)
	}
	if len(astFile.Docs) != 1 || astFile.Docs[0].Body == nil {
		return nil, &FileError{File: path, Err: errors.New("want exactly one YAML document, an agent")}
	}
	lines := map[string]int{}
	byLine := map[int]string{}
	walk(astFile.Docs[0].Body, "", lines, byLine)

	f := &File{Path: path, lines: lines}
	if err := decodeStrict(data, f); err != nil {
		return nil, yamlError(path, byLine, err)
	}
	f.Path, f.lines = path, lines
	if err := f.check(); err != nil {
		return nil, err
	}
	return f, nil
}

// decodeStrict decodes an agent file into f, refusing unknown keys. The decoder panics
// on some malformed files (a tag on a value decoded into a list, goccy/go-yaml 1.18 to
// 1.19): that is a bad file too, not a crash.
func decodeStrict(data []byte, f *File) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the YAML decoder failed: %v", p)
		}
	}()
	return yaml.NewDecoder(bytes.NewReader(data), yaml.Strict()).Decode(f)
}

// check checks what can be checked in the file alone.
func (f *File) check() error {
	switch {
	case f.Name == "":
		return f.errorf("name", "missing: every agent has a name")
	case !agentName.MatchString(f.Name):
		return f.errorf("name", "%q: want letters, digits, '.', '_' or '-', at most 64", f.Name)
	case f.Model.Name == "" && f.Routed():
		return f.errorf("model.name", "missing: a routed agent's model is named here")
	case f.Model.Name == "" && f.Prompt == "":
		return f.errorf("model.name", "missing: name the model here or in the prompt")
	case f.Model.Retries < 0:
		return f.errorf("model.retries", "%d: want 0 or more", f.Model.Retries)
	case f.Model.Timeout < 0:
		return f.errorf("model.timeout", "%v: want a positive duration", f.Model.Timeout)
	case f.MaxTurns < 0:
		return f.errorf("maxTurns", "%d: want 1 or more", f.MaxTurns)
	case f.Isolation != "" && f.Isolation != host.IsolationPooled && f.Isolation != host.IsolationSession:
		return f.errorf("isolation", "%q: want pooled or session", f.Isolation)
	case f.ToolErrors != "" && f.ToolErrors != agent.ToolErrorsToModel && f.ToolErrors != agent.ToolErrorsFail:
		return f.errorf("toolErrors", "%q: want model or fail", f.ToolErrors)
	case f.Tenants != nil:
		return f.errorf("tenants", "tenants are not set in agent files: the tenants file (terrarium serve -tenants) names each tenant's agents")
	}
	if err := f.checkKind(); err != nil {
		return err
	}
	for i, p := range f.Plugins {
		at := fmt.Sprintf("plugins[%d]", i)
		switch {
		case p.Path == "":
			return f.errorf(at+".path", "missing: a .wasm file, a Go plugin's directory or an oci:// reference")
		case p.SHA256 != "" && !hexSHA256.MatchString(p.SHA256):
			return f.errorf(at+".sha256", "%q: want 64 lowercase hex digits", p.SHA256)
		case p.Grants.SHA256 != "":
			return f.errorf(at+".grants.sha256", "pin the plugin with sha256 beside its path")
		}
		if oci.IsReference(p.Path) {
			if _, err := oci.ParseReference(p.Path); err != nil {
				return f.wrap(at+".path", err)
			}
			if len(p.Grants.TrustedKeys) > 0 {
				return f.errorf(at+".grants.trustedKeys", "ed25519 keys check plugin files' .sig files: a registry plugin is signed with cosign, and checked against the server's or the tenant's signature policy")
			}
		}
	}
	switch f.Snapshots.Store {
	case "", StoreBadger, StorePostgres, StoreMemory, StoreNone:
	default:
		return f.errorf("snapshots.store", "%q: want badger, postgres, memory or none", f.Snapshots.Store)
	}
	for i, e := range f.Snapshots.On {
		if e != "turnEnd" && e != "invocationEnd" {
			return f.errorf(fmt.Sprintf("snapshots.on[%d]", i), "%q: want turnEnd or invocationEnd", e)
		}
	}
	if f.Snapshots.Store == StoreNone && len(f.Snapshots.On) > 0 {
		return f.errorf("snapshots.on", "no snapshots are taken with store: none")
	}
	return nil
}

// promptKeys are the keys only a prompt agent has, with why a routed agent has none.
var promptKeys = []struct{ key, why string }{
	{"prompt", "its identity, guidelines, routes and steps instruct its model"},
	{"tools", "its tools are those of its domains, capabilities, guidelines and steps"},
	{"handlers", "its turns run no handlers"},
	{"clientTools", "its routes decide its tools"},
}

// checkKind refuses a file that is both a prompt agent and a routed agent, naming a
// key of each.
func (f *File) checkKind() error {
	routed := f.routedKeys()
	if len(routed) == 0 {
		return nil
	}
	given := map[string]bool{"prompt": f.Prompt != "", "tools": len(f.Tools) > 0, "handlers": len(f.Handlers) > 0,
		"clientTools": f.ClientTools != nil && *f.ClientTools}
	for _, k := range promptKeys {
		if given[k.key] {
			return f.errorf(k.key, "a routed agent (it has %s, line %d) has no %s: %s; write a prompt agent or a routed agent, not both",
				routed[0], f.Line(routed[0]), k.key, k.why)
		}
	}
	return nil
}

// Routed reports whether the file defines a routed agent (seed 002): one with any of
// routes.Definition's keys besides name and description.
func (f *File) Routed() bool { return len(f.routedKeys()) > 0 }

// routedKeys returns the keys of routes.Definition the file gives, besides name and
// description, in the order of the Definition's fields.
func (f *File) routedKeys() []string {
	v := reflect.ValueOf(f.Definition)
	var keys []string
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if key != "name" && key != "description" && !v.Field(i).IsZero() {
			keys = append(keys, key)
		}
	}
	return keys
}

// SnapshotStore returns the store the file asks for, badger by default (a deployment
// with a PostgreSQL database makes postgres the default: see WithPostgres).
func (f *File) SnapshotStore() string {
	if f.Snapshots.Store == "" {
		return StoreBadger
	}
	return f.Snapshots.Store
}

// pluginPath is where a plugin comes from: its reference as written, or its path
// resolved.
func (f *File) pluginPath(p Plugin) string {
	if oci.IsReference(p.Path) {
		return p.Path
	}
	return f.Resolve(p.Path)
}

// Resolve returns a path the file names, relative to the file's directory.
func (f *File) Resolve(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(f.Path), p)
}

// PromptFile reports whether Prompt names a file rather than holding the prompt.
func (f *File) PromptFile() bool {
	return !strings.ContainsAny(f.Prompt, "\n") && strings.HasSuffix(strings.TrimSpace(f.Prompt), ".prompt")
}

// walk records the line of every mapping key and sequence item under node, by path,
// and the deepest path on each line.
func walk(node ast.Node, path string, lines map[string]int, byLine map[int]string) {
	switch n := node.(type) {
	case *ast.MappingNode:
		for _, v := range n.Values {
			walk(v, path, lines, byLine)
		}
	case *ast.MappingValueNode:
		key := n.Key.GetToken().Value
		p := key
		if path != "" {
			p = path + "." + key
		}
		line := n.Key.GetToken().Position.Line
		lines[p] = line
		byLine[line] = p
		walk(n.Value, p, lines, byLine)
	case *ast.SequenceNode:
		for i, v := range n.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			line := v.GetToken().Position.Line
			lines[p] = line
			if _, ok := byLine[line]; !ok {
				byLine[line] = p
			}
			walk(v, p, lines, byLine)
		}
	}
}

// yamlError turns a YAML parse or decode error into a FileError with its line and the
// field written on that line.
func yamlError(path string, byLine map[int]string, err error) error {
	var fe *FileError
	if errors.As(err, &fe) {
		fe.File = path
		if fe.Field == "" {
			fe.Field = byLine[fe.Line]
		}
		return fe
	}
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		line := ye.GetToken().Position.Line
		return &FileError{File: path, Line: line, Field: byLine[line], Err: errors.New(ye.GetMessage())}
	}
	return &FileError{File: path, Err: err}
}

// UnmarshalYAML decodes grants as a host.Manifest is decoded from JSON, so that the
// agent file's grants are the manifest's, field for field, and refuses unknown keys.
func (g *Grants) UnmarshalYAML(node ast.Node) error {
	var v any
	if err := yaml.NodeToValue(node, &v); err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g.Manifest); err != nil {
		return grantsError(node, err)
	}
	return nil
}

// grantsError locates an error decoding grants on the key it is about, when it names
// one.
func grantsError(node ast.Node, err error) error {
	line := node.GetToken().Position.Line
	key := ""
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		key, _, _ = strings.Cut(te.Field, ".")
	} else if _, name, ok := strings.Cut(err.Error(), "unknown field "); ok {
		key, _ = strconv.Unquote(name)
	}
	if m, ok := node.(*ast.MappingNode); ok && key != "" {
		if i := slices.IndexFunc(m.Values, func(v *ast.MappingValueNode) bool { return v.Key.GetToken().Value == key }); i >= 0 {
			line = m.Values[i].Key.GetToken().Position.Line
		}
	}
	return &FileError{Line: line, Err: fmt.Errorf("grants: %w", err)}
}
