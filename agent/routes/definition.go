package routes

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/terrarium-ai/terrarium/agent"
)

// Definition is an agent described as data: what an agent file holds (YAML or JSON;
// the field names are the JSON tags). Build makes the agent, looking tools up by name
// in the registry. Where code gives Go functions, a definition gives names and
// expressions: a step's skipIf is an expr-lang expression over the route's data
// (https://expr-lang.org), tools are registered names.
type Definition struct {
	Name         string           `json:"name"`
	Description  string           `json:"description,omitempty"`
	Goal         string           `json:"goal,omitempty"`
	Identity     string           `json:"identity,omitempty"`
	Context      map[string]any   `json:"context,omitempty"`
	Composition  CompositionMode  `json:"composition,omitempty"`
	Responses    []CannedResponse `json:"responses,omitempty"`
	Terms        []Term           `json:"terms,omitempty"`
	Guidelines   []GuidelineDef   `json:"guidelines,omitempty"`
	Capabilities []CapabilityDef  `json:"capabilities,omitempty"`
	// Domains maps a domain's name to the names of its tools.
	Domains map[string][]string `json:"domains,omitempty"`
	Routes  []RouteDef          `json:"routes,omitempty"`
	// RoutingMargin and MinRouteScore override DefaultRoutingMargin and
	// DefaultMinRouteScore.
	RoutingMargin *float64 `json:"routingMargin,omitempty"`
	MinRouteScore *float64 `json:"minRouteScore,omitempty"`
	// Strict makes the agent refuse what a model gets wrong (WithStrict).
	Strict bool `json:"strict,omitempty"`
	// MissingVariables is "empty" (the default) or "error" (WithMissingVariables).
	MissingVariables string `json:"missingVariables,omitempty"`
}

// GuidelineDef is a Guideline in a definition: its tools by name, and Enabled as in
// seed 002 (absent means enabled).
type GuidelineDef struct {
	ID        string         `json:"id,omitempty"`
	Condition string         `json:"condition,omitempty"`
	Action    string         `json:"action"`
	Enabled   *bool          `json:"enabled,omitempty"`
	Tags      []string       `json:"tags,omitempty"`
	Tools     []string       `json:"tools,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// CapabilityDef is a Capability in a definition, its tools by name.
type CapabilityDef struct {
	ID          string   `json:"id,omitempty"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Tools       []string `json:"tools,omitempty"`
}

// RouteDef is a route in a definition (RouteOptions). Its steps follow each other in
// the order listed, the last one ending the route, unless a step says where it leads
// (Next).
type RouteDef struct {
	ID          string         `json:"id,omitempty"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	Conditions  []string       `json:"conditions,omitempty"`
	Guidelines  []GuidelineDef `json:"guidelines,omitempty"`
	// Domains limits the route to these domains' tools; absent allows every domain, an
	// empty list none.
	Domains      []string         `json:"domains,omitempty"`
	Rules        []string         `json:"rules,omitempty"`
	Prohibitions []string         `json:"prohibitions,omitempty"`
	Schema       map[string]any   `json:"schema,omitempty"`
	InitialData  map[string]any   `json:"initialData,omitempty"`
	InitialStep  *StepDef         `json:"initialStep,omitempty"`
	Steps        []StepDef        `json:"steps,omitempty"`
	Responses    []CannedResponse `json:"responses,omitempty"`
	// OnComplete names (by ID or title) the route that follows this one once it
	// completes (RouteOptions.OnComplete).
	OnComplete string `json:"onComplete,omitempty"`
}

// StepDef is a step in a definition (StepSpec).
type StepDef struct {
	ID          string `json:"id,omitempty"`
	Description string `json:"description,omitempty"`
	Prompt      string `json:"prompt,omitempty"`
	// Tool is the registered name of the step's tool.
	Tool     string   `json:"tool,omitempty"`
	Collect  []string `json:"collect,omitempty"`
	Requires []string `json:"requires,omitempty"`
	// SkipIf is an expr-lang expression over the route's data, its fields as
	// variables (null until known): `destination != nil`, `passengers == 1`.
	SkipIf string `json:"skipIf,omitempty"`
	// Condition is the condition of the transition into this step from the one
	// before it in the list.
	Condition  string          `json:"condition,omitempty"`
	Next       []TransitionDef `json:"next,omitempty"`
	Guidelines []GuidelineDef  `json:"guidelines,omitempty"`
}

// TransitionDef leads to a step by ID, or to END_ROUTE.
type TransitionDef struct {
	Step      string `json:"step"`
	Condition string `json:"condition,omitempty"`
}

// Build makes the agent a definition describes, its models and tools from r, with opts
// applied first (the model: WithGenerateOpts). Every problem is a *DefinitionError
// whose Path names the field at fault ("routes[0].steps[2].skipIf"), wrapping
// ErrInvalidDefinition.
func Build(r *agent.Registry, def Definition, opts ...Option) (*Agent, error) {
	b := &builder{reg: r}
	a, err := b.agent(def, opts)
	if err != nil {
		var de *DefinitionError
		if !errors.As(err, &de) {
			err = &DefinitionError{Err: err}
		}
		return nil, err
	}
	return a, nil
}

type builder struct {
	reg *agent.Registry
}

// at wraps err with the path of the field at fault.
func at(path string, err error) error {
	if err == nil {
		return nil
	}
	var de *DefinitionError
	if errors.As(err, &de) {
		return err
	}
	if !errors.Is(err, ErrInvalidDefinition) {
		err = fmt.Errorf("routes: %w: %w", ErrInvalidDefinition, err)
	}
	return &DefinitionError{Path: path, Err: err}
}

func (b *builder) tool(path, name string) (agent.Tool, error) {
	t, err := b.reg.LookupTool(name)
	if err != nil {
		return nil, at(path, err)
	}
	return t, nil
}

func (b *builder) tools(path string, names []string) ([]agent.Tool, error) {
	out := make([]agent.Tool, len(names))
	for i, n := range names {
		t, err := b.tool(fmt.Sprintf("%s[%d]", path, i), n)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

func (b *builder) guidelines(path string, defs []GuidelineDef) ([]Guideline, error) {
	out := make([]Guideline, len(defs))
	for i, g := range defs {
		p := fmt.Sprintf("%s[%d]", path, i)
		tools, err := b.tools(p+".tools", g.Tools)
		if err != nil {
			return nil, err
		}
		if g.Action == "" {
			return nil, at(p+".action", invalid("a guideline needs an action"))
		}
		out[i] = Guideline{ID: g.ID, Condition: g.Condition, Action: g.Action, Disabled: g.Enabled != nil && !*g.Enabled, Tags: g.Tags, Tools: tools, Metadata: g.Metadata}
	}
	return out, nil
}

func (b *builder) agent(def Definition, opts []Option) (*Agent, error) {
	if strings.TrimSpace(def.Name) == "" {
		return nil, at("name", invalid("an agent needs a name"))
	}
	a, err := newAgent(b.reg, def.Name, opts)
	if err != nil {
		return nil, err // the caller's options
	}
	// The definition's own options are applied one by one, so that a bad value is
	// blamed on its field.
	type fieldOption struct {
		path string
		opt  Option
	}
	fields := []fieldOption{{"responses", WithCannedResponses(def.Responses...)}}
	if def.Description != "" {
		fields = append(fields, fieldOption{"description", WithDescription(def.Description)})
	}
	if def.Goal != "" {
		fields = append(fields, fieldOption{"goal", WithGoal(def.Goal)})
	}
	if def.Identity != "" {
		fields = append(fields, fieldOption{"identity", WithIdentity(def.Identity)})
	}
	if def.Context != nil {
		fields = append(fields, fieldOption{"context", WithContext(def.Context)})
	}
	if def.Composition != "" {
		fields = append(fields, fieldOption{"composition", WithComposition(def.Composition)})
	}
	if def.RoutingMargin != nil {
		fields = append(fields, fieldOption{"routingMargin", WithRoutingMargin(*def.RoutingMargin)})
	}
	if def.MinRouteScore != nil {
		fields = append(fields, fieldOption{"minRouteScore", WithMinRouteScore(*def.MinRouteScore)})
	}
	if def.Strict {
		fields = append(fields, fieldOption{"strict", WithStrict()})
	}
	switch def.MissingVariables {
	case "", "empty":
	case "error":
		fields = append(fields, fieldOption{"missingVariables", WithMissingVariables(MissingError)})
	default:
		return nil, at("missingVariables", invalid("missingVariables %q: want empty or error", def.MissingVariables))
	}
	for _, f := range fields {
		if err := f.opt.apply(a); err != nil {
			return nil, at(f.path, fmt.Errorf("routes: agent %q: %w", def.Name, err))
		}
	}
	for i, t := range def.Terms {
		if t.Name == "" {
			return nil, at(fmt.Sprintf("terms[%d].name", i), invalid("a term needs a name"))
		}
		a.terms = append(a.terms, t)
	}
	if a.guidelines, err = b.guidelines("guidelines", def.Guidelines); err != nil {
		return nil, err
	}
	for i, c := range def.Capabilities {
		p := fmt.Sprintf("capabilities[%d]", i)
		tools, err := b.tools(p+".tools", c.Tools)
		if err != nil {
			return nil, err
		}
		if c.Title == "" {
			return nil, at(p+".title", invalid("a capability needs a title"))
		}
		a.capabilities = append(a.capabilities, Capability{ID: c.ID, Title: c.Title, Description: c.Description, Tools: tools})
	}
	for _, name := range slices.Sorted(maps.Keys(def.Domains)) {
		tools, err := b.tools("domains."+name, def.Domains[name])
		if err != nil {
			return nil, err
		}
		a.domains[name] = tools
	}
	for i, rd := range def.Routes {
		if err := b.route(a, fmt.Sprintf("routes[%d]", i), rd); err != nil {
			return nil, err
		}
	}
	for i, rt := range a.routes {
		if err := rt.check(); err != nil {
			return nil, at(fmt.Sprintf("routes[%d].steps", i), err)
		}
		if rt.onComplete != "" && a.routeNamed(rt.onComplete) == nil {
			return nil, at(fmt.Sprintf("routes[%d].onComplete", i), invalid("route %q: onComplete names no route of the agent: %q", rt.title, rt.onComplete))
		}
		for j, d := range rt.domains {
			if _, ok := a.domains[d]; !ok {
				return nil, at(fmt.Sprintf("routes[%d].domains[%d]", i, j), invalid("unknown domain %q", d))
			}
		}
	}
	if err := a.Validate(); err != nil {
		return nil, at("composition", err)
	}
	return a, nil
}

func (b *builder) route(a *Agent, path string, rd RouteDef) error {
	guidelines, err := b.guidelines(path+".guidelines", rd.Guidelines)
	if err != nil {
		return err
	}
	o := RouteOptions{
		ID: rd.ID, Title: rd.Title, Description: rd.Description, Conditions: rd.Conditions,
		Guidelines: guidelines, Domains: rd.Domains, Rules: rd.Rules, Prohibitions: rd.Prohibitions,
		Schema: rd.Schema, InitialData: rd.InitialData, Responses: rd.Responses, OnComplete: rd.OnComplete,
	}
	rt, err := a.createRoute(o)
	if err != nil {
		if rd.Title == "" {
			return at(path+".title", err)
		}
		return at(path, err) // the message names the field: schema, initial data...
	}
	if rd.InitialStep != nil {
		if err := b.step(rt, path+".initialStep", rt.initial, *rd.InitialStep); err != nil {
			return err
		}
	}
	steps := make([]*Step, len(rd.Steps))
	for i, sd := range rd.Steps {
		p := fmt.Sprintf("%s.steps[%d]", path, i)
		s, err := rt.newStep(StepSpec{ID: sd.ID})
		if err != nil {
			return at(p+".id", err)
		}
		if err := b.step(rt, p, s, sd); err != nil {
			return err
		}
		steps[i] = s
	}
	byID := map[string]*Step{EndRouteID: EndRoute}
	for _, s := range rt.steps {
		byID[s.id] = s
	}
	if len(steps) > 0 && (rd.InitialStep == nil || len(rd.InitialStep.Next) == 0) {
		rt.initial.transitions = append(rt.initial.transitions, transition{to: steps[0], condition: rd.Steps[0].Condition})
	}
	if rd.InitialStep != nil {
		if err := link(rt.initial, path+".initialStep.next", rd.InitialStep.Next, byID); err != nil {
			return err
		}
	}
	for i, sd := range rd.Steps {
		if len(sd.Next) > 0 {
			if err := link(steps[i], fmt.Sprintf("%s.steps[%d].next", path, i), sd.Next, byID); err != nil {
				return err
			}
			continue
		}
		next := transition{to: EndRoute}
		if i+1 < len(steps) {
			next = transition{to: steps[i+1], condition: rd.Steps[i+1].Condition}
		}
		steps[i].transitions = append(steps[i].transitions, next)
	}
	return nil
}

// link adds the transitions a step's Next lists.
func link(s *Step, path string, next []TransitionDef, byID map[string]*Step) error {
	for i, td := range next {
		to, ok := byID[td.Step]
		if !ok {
			return at(fmt.Sprintf("%s[%d].step", path, i), invalid("route %q: step %q: transition to unknown step %q", s.route.title, s.id, td.Step))
		}
		s.transitions = append(s.transitions, transition{to: to, condition: td.Condition})
	}
	return nil
}

// step configures s from its definition.
func (b *builder) step(rt *Route, path string, s *Step, sd StepDef) error {
	spec := StepSpec{Description: sd.Description, Prompt: sd.Prompt}
	if sd.Tool != "" {
		t, err := b.tool(path+".tool", sd.Tool)
		if err != nil {
			return err
		}
		spec.Tool = t
	}
	var err error
	if spec.Guidelines, err = b.guidelines(path+".guidelines", sd.Guidelines); err != nil {
		return err
	}
	if err := rt.checkFields("step "+strconv.Quote(s.id)+": collect", sd.Collect); err != nil {
		return at(path+".collect", err)
	}
	if err := rt.checkFields("step "+strconv.Quote(s.id)+": requires", sd.Requires); err != nil {
		return at(path+".requires", err)
	}
	spec.Collect, spec.Requires = sd.Collect, sd.Requires
	if err := s.set(spec, true); err != nil {
		return at(path, err)
	}
	if sd.SkipIf != "" {
		skip, err := compileSkipIf(rt, sd.SkipIf)
		if err != nil {
			return at(path+".skipIf", invalid("route %q: step %q: skipIf: %v", rt.title, s.id, err))
		}
		s.skip = skip
	}
	return nil
}

// compileSkipIf compiles an expr-lang expression over the route's data: its fields
// are the variables, so a misspelt field fails here rather than never skipping.
func compileSkipIf(rt *Route, src string) (func(Data) (bool, error), error) {
	env := map[string]any{}
	for f := range rt.properties() {
		env[f] = nil
	}
	prog, err := expr.Compile(src, expr.Env(env), expr.AsBool())
	if err != nil {
		return nil, err
	}
	return func(d Data) (bool, error) {
		vars := make(map[string]any, len(env))
		for f := range env {
			vars[f] = d[f]
		}
		out, err := vm.Run(prog, vars)
		if err != nil {
			return false, fmt.Errorf("routes: route %q: skipIf %q: %w", rt.title, src, err)
		}
		return out.(bool), nil
	}, nil
}
