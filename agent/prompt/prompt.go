// Package prompt defines prompts: Dotprompt templates with their generation settings,
// in code (Define, DefineData) or in .prompt files (Load, LoadDir), rendered with
// google/dotprompt. {{name}} reads the prompt's input, {{@state.field}} the custom state
// of the session in the context, and {{role "system"}} starts a message.
//
// Rendering fails, naming the template's file and line, when a template refers to an
// input variable or a state field that is missing (Handlebars alone renders nothing).
// A prompt is a base prompt for session.DefineAgent as it is.
package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/google/dotprompt/go/dotprompt"
	"github.com/mbleigh/raymond/ast"
	"github.com/mbleigh/raymond/parser"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// ErrTemplate is wrapped by errors in a prompt template: a parse error, a missing
// variable, a failed rendering.
var ErrTemplate = errors.New("prompt template error")

// Prompt is a prompt template with its generation settings. It is an agent.Action,
// registered as /prompt/<name>.
type Prompt struct {
	reg  *agent.Registry
	name string
	// where is the prompt's origin for error messages: a file path, or "prompt <name>".
	where     string
	templates []*template
	// static messages follow the system template and precede the user template
	// (code-defined prompts' WithMessages).
	static []*abi.Message
	// settings are the prompt's generation settings; System and Messages are kept out
	// of them (they are templates and static messages above).
	settings  agent.Settings
	hasSystem bool
	defaults  map[string]any
}

// template is one compiled template of a prompt.
type template struct {
	source string
	line   int // line of the template's first line in its file (1 for code)
	prog   *ast.Program
	mu     sync.Mutex // dotprompt renders through state held on its instance
	fn     dotprompt.PromptFunction
}

// Define defines a prompt in code and registers it as /prompt/<name>. WithSystem and
// WithPrompt are templates; WithMessages are fixed messages placed between them; the
// other options (model, tools, config, output, middleware...) are the prompt's
// settings. It panics if an option is invalid or repeated, a template does not parse,
// or the name is taken.
func Define(r *agent.Registry, name string, opts ...agent.PromptOption) *Prompt {
	p, err := newCodePrompt(r, name, opts)
	if err != nil {
		panic(err)
	}
	r.MustRegister(p)
	return p
}

func newCodePrompt(r *agent.Registry, name string, opts []agent.PromptOption) (*Prompt, error) {
	cfg, err := agent.NewPromptConfig(opts...)
	if err != nil {
		return nil, fmt.Errorf("prompt %q: %w", name, err)
	}
	p := &Prompt{reg: r, name: name, where: "prompt " + strconv.Quote(name), static: cfg.Messages, settings: cfg.Settings}
	p.settings.System, p.settings.Messages = "", nil
	if cfg.System != "" {
		p.hasSystem = true
		t, err := compileTemplate(p.where, `{{role "system"}}`+cfg.System, 1, nil)
		if err != nil {
			return nil, err
		}
		p.templates = append(p.templates, t)
	}
	if cfg.Prompt != "" {
		t, err := compileTemplate(p.where, `{{role "user"}}`+cfg.Prompt, 1, nil)
		if err != nil {
			return nil, err
		}
		p.templates = append(p.templates, t)
	}
	return p, nil
}

// Load loads one .prompt file and registers it under its file name without the
// extension (greeting.prompt: /prompt/greeting; greeting.casual.prompt:
// /prompt/greeting.casual). Errors name the file and line.
func Load(r *agent.Registry, path string) (*Prompt, error) {
	p, err := loadPrompt(r, path, nil)
	if err != nil {
		return nil, err
	}
	if err := r.Register(p); err != nil {
		return nil, err
	}
	return p, nil
}

// LoadDir loads every .prompt file in dir (not its subdirectories). Files whose name
// starts with an underscore are partials, usable by the others as {{> name}}.
func LoadDir(r *agent.Registry, dir string) ([]*Prompt, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("prompt: loading prompts: %w", err)
	}
	partials := map[string]string{}
	var files []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".prompt") {
			continue
		}
		if strings.HasPrefix(e.Name(), "_") {
			src, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("prompt: loading prompts: %w", err)
			}
			partials[strings.TrimSuffix(strings.TrimPrefix(e.Name(), "_"), ".prompt")] = string(src)
			continue
		}
		files = append(files, filepath.Join(dir, e.Name()))
	}
	sort.Strings(files)
	var out []*Prompt
	for _, f := range files {
		p, err := loadPrompt(r, f, partials)
		if err != nil {
			return nil, err
		}
		if err := r.Register(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Lookup returns the prompt registered under name.
func Lookup(r *agent.Registry, name string) (*Prompt, error) {
	p, ok := r.Lookup(agent.Key(agent.ActionTypePrompt, name)).(*Prompt)
	if !ok {
		return nil, fmt.Errorf("prompt: %w: prompt %q", agent.ErrNotFound, name)
	}
	return p, nil
}

var yamlLine = regexp.MustCompile(`^\[(\d+):(\d+)\]\s*`)

// Parse parses Dotprompt source (what a .prompt file holds) into a prompt named name and
// registers it as /prompt/<name>. where names the source in errors, with the line in
// it: an agent file, say, whose prompt is inline.
func Parse(r *agent.Registry, name, where string, src []byte) (*Prompt, error) {
	p, err := parsePrompt(r, name, where, string(src), nil)
	if err != nil {
		return nil, err
	}
	if err := r.Register(p); err != nil {
		return nil, err
	}
	return p, nil
}

func loadPrompt(r *agent.Registry, path string, partials map[string]string) (*Prompt, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prompt: loading prompt: %w", err)
	}
	return parsePrompt(r, strings.TrimSuffix(filepath.Base(path), ".prompt"), path, string(data), partials)
}

func parsePrompt(r *agent.Registry, name, path, src string, partials map[string]string) (*Prompt, error) {
	// dotprompt swallows front matter errors (it prints them and treats the whole file
	// as the template), so the front matter is parsed here first, with line numbers.
	if m := dotprompt.FrontmatterAndBodyRegex.FindStringSubmatch(src); m != nil {
		var front map[string]any
		if err := yaml.Unmarshal([]byte(m[1]), &front); err != nil {
			msg := err.Error()
			line := 0
			if lm := yamlLine.FindStringSubmatch(msg); lm != nil {
				n, _ := strconv.Atoi(lm[1])
				line = n + 1 // the front matter starts after the opening ---
				msg = strings.TrimSpace(strings.SplitN(yamlLine.ReplaceAllString(msg, ""), "\n", 2)[0])
			}
			return nil, fmt.Errorf("prompt: %w: %s:%d: front matter: %s", ErrTemplate, path, line, msg)
		}
	} else if strings.HasPrefix(strings.TrimSpace(src), "---") {
		return nil, fmt.Errorf("prompt: %w: %s:1: front matter is not closed with a --- line", ErrTemplate, path)
	}
	parsed, err := dotprompt.ParseDocument(src)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w: %s: %v", ErrTemplate, path, err)
	}
	line := 1
	if i := strings.LastIndex(src, parsed.Template); i >= 0 && parsed.Template != "" {
		line = strings.Count(src[:i], "\n") + 1
	}
	t, err := compileTemplate(path, src, line, partials)
	if err != nil {
		return nil, err
	}
	t.source = parsed.Template
	p := &Prompt{reg: r, name: name, where: path, templates: []*template{t}, defaults: parsed.Input.Default}
	meta := parsed.PromptMetadata
	var opts []agent.CommonOption
	if meta.Model != "" {
		opts = append(opts, agent.WithModelName(meta.Model))
	}
	if len(meta.Config) > 0 {
		opts = append(opts, agent.WithConfig(map[string]any(meta.Config)))
	}
	if len(meta.Tools) > 0 {
		opts = append(opts, agent.WithToolNames(meta.Tools...))
	}
	if meta.MaxTurns != 0 {
		opts = append(opts, agent.WithMaxTurns(meta.MaxTurns))
	}
	// The rendered metadata carries the output schema converted from Picoschema.
	rendered, err := dotprompt.NewDotprompt(nil).RenderMetadata(parsed, nil)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w: %s: %v", ErrTemplate, path, err)
	}
	if rendered.Output.Schema != nil {
		s, err := toSchemaMap(rendered.Output.Schema)
		if err != nil {
			return nil, fmt.Errorf("prompt: %w: %s: output schema: %v", ErrTemplate, path, err)
		}
		opts = append(opts, agent.WithOutputSchema(s))
	}
	if f := meta.Output.Format; f != "" && (f != "json" || rendered.Output.Schema == nil) {
		opts = append(opts, agent.WithOutputFormat(f))
	}
	settings, err := agent.NewSettings(opts...)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w: %s: front matter: %v", ErrTemplate, path, err)
	}
	p.settings = *settings
	return p, nil
}

func toSchemaMap(s any) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "$schema")
	return m, nil
}

var raymondLine = regexp.MustCompile(`(?i)line (\d+)`)

// helperNamedVar matches a variable used alone whose name is also a dotprompt helper
// that needs arguments ({{role}} in "You are a {{role}} assistant"). Handlebars would
// call the helper; it can only mean the variable, so it is rewritten to {{./role}}.
var helperNamedVar = regexp.MustCompile(`\{\{(~?)\s*(role|json|media|section|ifEquals|unlessEquals)\s*(~?)\}\}`)

// compileTemplate parses and compiles a template; where and line locate it in errors.
func compileTemplate(where, src string, line int, partials map[string]string) (*template, error) {
	src = helperNamedVar.ReplaceAllString(src, "{{$1./$2$3}}")
	body := src
	if m := dotprompt.FrontmatterAndBodyRegex.FindStringSubmatch(src); m != nil {
		body = m[2]
	}
	prog, err := parser.Parse(body)
	if err != nil {
		msg := err.Error()
		at := line
		if m := raymondLine.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			at = line + n - 1
		}
		return nil, fmt.Errorf("prompt: %w: %s:%d: %s", ErrTemplate, where, at, strings.Join(strings.Fields(msg), " "))
	}
	dp := dotprompt.NewDotprompt(&dotprompt.DotpromptOptions{Partials: partials})
	fn, err := dp.Compile(src, nil)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w: %s:%d: %v", ErrTemplate, where, line, err)
	}
	return &template{source: body, line: line, prog: prog, fn: fn}, nil
}

// Name returns the prompt's name.
func (p *Prompt) Name() string { return p.name }

// Desc implements agent.Action.
func (p *Prompt) Desc() agent.ActionDesc {
	d := agent.ActionDesc{Key: agent.Key(agent.ActionTypePrompt, p.name), Type: agent.ActionTypePrompt, Name: p.name}
	if !strings.HasPrefix(p.where, "prompt ") {
		d.Metadata = map[string]any{"file": p.where}
	}
	return d
}

// Settings returns the prompt's generation settings (model, config, tools, output,
// middleware...), without its messages, which Render renders.
func (p *Prompt) Settings() *agent.Settings {
	s := p.settings
	return &s
}

// Render renders the prompt for the input (a struct or a map; nil for none) into the
// serializable form of a generate call: the rendered messages and the settings.
func (p *Prompt) Render(ctx context.Context, input any) (*abi.GenerateActionOptions, error) {
	in, err := asMap(input)
	if err != nil {
		return nil, fmt.Errorf("prompt: %s: the input is not an object: %w", p.where, err)
	}
	for k, v := range p.defaults {
		if _, ok := in[k]; !ok {
			in[k] = v
		}
	}
	state := map[string]any{}
	if s := agent.AnySessionFromContext(ctx); s != nil {
		raw, err := s.CustomJSON()
		if err != nil {
			return nil, fmt.Errorf("prompt: %s: encoding the session state: %w", p.where, err)
		}
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil && m != nil {
			state = m
		}
	}
	var msgs []*abi.Message
	for i, t := range p.templates {
		if err := checkVars(p.where, t, in, state); err != nil {
			return nil, err
		}
		t.mu.Lock()
		rendered, err := t.fn(&dotprompt.DataArgument{Input: in, Context: map[string]any{"state": state}}, nil)
		t.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("prompt: %w: %s:%d: %v", ErrTemplate, p.where, t.line, err)
		}
		for _, m := range rendered.Messages {
			msgs = append(msgs, fromDotprompt(m))
		}
		if i == 0 && len(p.static) > 0 && p.hasSystem {
			msgs = append(msgs, p.static...)
		}
	}
	if len(p.static) > 0 && !p.hasSystem {
		msgs = append(append([]*abi.Message(nil), p.static...), msgs...)
	}
	s := p.settings
	a := &abi.GenerateActionOptions{
		Model:      s.ModelName,
		Messages:   msgs,
		Tools:      slices.Clone(s.ToolNames),
		ToolChoice: s.ToolChoice,
		Config:     s.Config,
		Output:     s.Output,
		MaxTurns:   s.MaxTurns,
	}
	if s.Model != nil {
		a.Model = s.Model.Name()
	}
	for _, t := range s.Tools {
		a.Tools = append(a.Tools, t.Name())
	}
	return a, nil
}

// Execute renders the prompt and generates with it. opts come first: a single setting
// they give (the model, the config...) overrides the prompt's, and tools add up.
func (p *Prompt) Execute(ctx context.Context, input any, opts ...agent.GenerateOption) (*abi.GenerateResponse, error) {
	a, err := p.Render(ctx, input)
	if err != nil {
		return nil, err
	}
	opts = append(opts, agent.WithMessages(a.Messages...), agent.WithDefaults(p.Settings()))
	return agent.Generate(ctx, p.reg, opts...)
}

// DataPrompt is a prompt with a typed input and output: the compiler checks the input's
// type, and Execute decodes the output.
type DataPrompt[In, Out any] struct {
	p *Prompt
}

// DefineData defines a prompt with typed input and output, as Define does. Unless Out
// is string, the prompt asks for JSON output with Out's schema.
func DefineData[In, Out any](r *agent.Registry, name string, opts ...agent.PromptOption) *DataPrompt[In, Out] {
	var out Out
	if _, isString := any(out).(string); !isString {
		opts = append([]agent.PromptOption{agent.WithOutputType(out)}, opts...)
	}
	p, err := newCodePrompt(r, name, opts)
	if err != nil {
		panic(err)
	}
	r.MustRegister(p)
	return &DataPrompt[In, Out]{p: p}
}

// Name returns the prompt's name.
func (d *DataPrompt[In, Out]) Name() string { return d.p.name }

// Prompt returns the untyped prompt.
func (d *DataPrompt[In, Out]) Prompt() *Prompt { return d.p }

// Settings returns the prompt's generation settings.
func (d *DataPrompt[In, Out]) Settings() *agent.Settings { return d.p.Settings() }

// Render renders the prompt for a typed input.
func (d *DataPrompt[In, Out]) Render(ctx context.Context, input In) (*abi.GenerateActionOptions, error) {
	return d.p.Render(ctx, input)
}

// Execute renders the prompt, generates with it, and decodes the output.
func (d *DataPrompt[In, Out]) Execute(ctx context.Context, input In, opts ...agent.GenerateOption) (*Out, *abi.GenerateResponse, error) {
	resp, err := d.p.Execute(ctx, input, opts...)
	if err != nil {
		return nil, resp, err
	}
	var out Out
	if s, ok := any(&out).(*string); ok {
		*s = resp.Text()
		return &out, resp, nil
	}
	if err := resp.Output(&out); err != nil {
		return nil, resp, fmt.Errorf("prompt: %w: %v", agent.ErrInvalidOutput, err)
	}
	return &out, resp, nil
}

// asMap turns a prompt input into the map templates read.
func asMap(input any) (map[string]any, error) {
	switch v := input.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = e
		}
		return out, nil
	}
	b, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// fromDotprompt converts a rendered message.
func fromDotprompt(m dotprompt.Message) *abi.Message {
	out := abi.NewMessage(abi.Role(m.Role))
	for _, part := range m.Content {
		var p *abi.Part
		switch v := part.(type) {
		case *dotprompt.TextPart:
			p = abi.NewTextPart(v.Text)
		case *dotprompt.MediaPart:
			p = abi.NewMediaPart(v.Media.ContentType, v.Media.URL)
		case *dotprompt.DataPart:
			p = abi.NewDataPart(v.Data)
		default:
			continue
		}
		if md := part.GetMetadata(); len(md) > 0 {
			p.Metadata = map[string]any(md)
		}
		out.Content = append(out.Content, p)
	}
	if len(m.Metadata) > 0 {
		out.Metadata = map[string]any(m.Metadata)
	}
	return out
}

// helpersWithoutArgs are dotprompt helpers that look like variables.
var helpersWithoutArgs = map[string]bool{"history": true}

// checkVars reports the first variable a template reads that neither the input nor
// the state has, by file and line. Only references in the root context are checked:
// inside {{#each}} and {{#with}} the context changes. A reference inside {{#if x}} (or
// the {{else}} of {{#unless x}}) that starts with x is guarded by the test.
func checkVars(where string, t *template, input, state map[string]any) error {
	check := func(n ast.Node, guarded []string) error {
		path, ok := n.(*ast.PathExpression)
		if !ok || path.Depth > 0 || len(path.Parts) == 0 {
			return nil
		}
		name := strings.TrimPrefix(path.Original, "./")
		for _, g := range guarded {
			if name == g || strings.HasPrefix(name, g+".") {
				return nil
			}
		}
		line := t.line + path.Line - 1
		if path.Data {
			if path.Parts[0] != "state" {
				return nil // @root, @index and the like
			}
			if !has(state, path.Parts[1:]) {
				return fmt.Errorf("prompt: %w: %s:%d: {{%s}} is not in the session state", ErrTemplate, where, line, name)
			}
			return nil
		}
		if !has(input, path.Parts) {
			return fmt.Errorf("prompt: %w: %s:%d: variable {{%s}} is not in the prompt input", ErrTemplate, where, line, name)
		}
		return nil
	}
	var walk func(nodes []ast.Node, guarded []string) error
	walk = func(nodes []ast.Node, guarded []string) error {
		for _, n := range nodes {
			switch s := n.(type) {
			case *ast.MustacheStatement:
				e := s.Expression
				if len(e.Params) == 0 && e.Hash == nil {
					if helpersWithoutArgs[e.HelperName()] {
						continue
					}
					if err := check(e.Path, guarded); err != nil {
						return err
					}
					continue
				}
				for _, p := range e.Params {
					if err := check(p, guarded); err != nil {
						return err
					}
				}
			case *ast.BlockStatement:
				then, otherwise := guarded, guarded
				switch s.Expression.HelperName() {
				case "each", "with":
					if len(s.Expression.Params) > 0 {
						if err := check(s.Expression.Params[0], guarded); err != nil {
							return err
						}
					}
					continue // the block body reads another context
				case "if", "unless":
					// The condition may be absent: that is what it tests.
					if len(s.Expression.Params) > 0 {
						if p, ok := s.Expression.Params[0].(*ast.PathExpression); ok {
							cond := strings.TrimPrefix(p.Original, "./")
							if s.Expression.HelperName() == "if" {
								then = append(slices.Clone(guarded), cond)
							} else {
								otherwise = append(slices.Clone(guarded), cond)
							}
						}
					}
				default:
					for _, p := range s.Expression.Params {
						if err := check(p, guarded); err != nil {
							return err
						}
					}
				}
				if s.Program != nil {
					if err := walk(s.Program.Body, then); err != nil {
						return err
					}
				}
				if s.Inverse != nil {
					if err := walk(s.Inverse.Body, otherwise); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return walk(t.prog.Body, nil)
}

// has reports whether the path exists in m.
func has(m map[string]any, path []string) bool {
	var cur any = m
	for _, k := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = obj[k]; !ok {
			return false
		}
	}
	return true
}
