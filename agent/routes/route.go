package routes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// EndRouteID is the ID of EndRoute: a session whose route completed has its current
// step set to it.
const EndRouteID = "END_ROUTE"

// EndRoute is the end of a route, as a transition's target: step.NextStep(StepSpec{Step:
// EndRoute}). A turn whose traversal reaches it completes the route: its answer is empty
// and Response.RouteComplete is true. (Seed 002's END_ROUTE symbol.)
var EndRoute = &Step{id: EndRouteID, description: "End of the route"}

// RouteOptions define a route (seed 002's RouteOptions).
type RouteOptions struct {
	// ID identifies the route; when empty it is derived from the title (RouteID), so it
	// stays the same across restarts.
	ID    string
	Title string
	// Description is shown to the model as it is (not a template).
	Description string
	// Conditions say when the route applies; the model scores routes by them. They are
	// templates.
	Conditions []string
	Guidelines []Guideline
	// Domains names the domains whose tools the route may use: nil allows every domain,
	// an empty slice none.
	Domains []string
	// Rules the agent must follow and Prohibitions it must never break in this route.
	Rules        []string
	Prohibitions []string
	// Schema is the JSON Schema of the route's data (an object): SchemaFor[T]() from a
	// Go type, or a schema written by hand. Steps collect its properties. A property
	// may list the values that mean "not stated" (EmptyKeyword).
	Schema map[string]any
	// InitialData is the data a route starts with when it is entered.
	InitialData Data
	// InitialStep configures the initial step (as Step.Configure, plus its ID).
	InitialStep *StepSpec
	// Steps is a linear flow after the initial step: each step follows the one before.
	Steps []StepSpec
	// Responses are the route's canned responses, used with the agent's own in the
	// canned composition modes.
	Responses []CannedResponse
	// OnComplete names (by ID or title) the route the conversation goes on to once
	// this one completes (seed 002's onComplete): the completing turn records it as
	// the State's NextRoute, and the next turn enters it, with its own data. Validate
	// checks the route exists.
	OnComplete string
	// OnCompleteFunc chooses that route from the data this one collected, by ID or
	// title; "" chooses none. A route gives OnComplete or OnCompleteFunc, not both.
	OnCompleteFunc func(Data) string
}

// Route is a conversation flow: steps that collect the fields of its data, from an
// initial step to EndRoute.
type Route struct {
	agent        *Agent
	id, title    string
	description  string
	conditions   []string
	guidelines   []Guideline
	domains      []string
	rules        []string
	prohibitions []string
	schema       map[string]any
	// partial validates data that is still being collected: the schema without its
	// required list.
	partial     *schema.Validator
	initialData Data
	initial     *Step
	steps       []*Step // in the order they were defined, the initial step first
	responses   []CannedResponse
	// empties are the values each field's schema marks as empty (EmptyKeyword).
	empties map[string][]any
	// onComplete and onCompleteFunc choose the next route (RouteOptions); next is
	// onComplete resolved, once the agent is validated.
	onComplete     string
	onCompleteFunc func(Data) string
	next           *Route
	// stepsText describes the steps for prompts, written once the route is checked.
	stepsText string
}

// RouteID returns the deterministic ID of a route titled title: a slug of the title
// and the first 12 hex digits of its SHA-256 ("route_user_onboarding_5d41402abc4b").
func RouteID(title string) string {
	return "route_" + slug(title) + "_" + hash(title)
}

func stepID(routeID, description string, index int) string {
	return "step_" + slug(description) + "_" + hash(routeID+"\x00"+description+"\x00"+strconv.Itoa(index))
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// slug keeps the letters and digits of s, lower-cased, words joined by "_", at most 32
// bytes.
func slug(s string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteRune(r)
		default:
			sep = true
		}
		if b.Len() >= 32 {
			break
		}
	}
	return b.String()
}

// newRoute builds a route of a, checking what can be checked without the whole graph.
func newRoute(a *Agent, o RouteOptions) (*Route, error) {
	if strings.TrimSpace(o.Title) == "" {
		return nil, invalid("a route needs a title")
	}
	rt := &Route{
		agent: a, id: o.ID, title: o.Title, description: o.Description,
		conditions: slices.Clone(o.Conditions), domains: slices.Clone(o.Domains),
		rules: slices.Clone(o.Rules), prohibitions: slices.Clone(o.Prohibitions),
		responses: slices.Clone(o.Responses), onComplete: o.OnComplete, onCompleteFunc: o.OnCompleteFunc,
	}
	if o.OnComplete != "" && o.OnCompleteFunc != nil {
		return nil, invalid("route %q: OnComplete and OnCompleteFunc both choose the next route; give one", o.Title)
	}
	initial, err := toData(o.InitialData)
	if err != nil {
		return nil, invalid("route %q: initial data: %v", o.Title, err)
	}
	rt.initialData = initial
	if o.Domains != nil && rt.domains == nil {
		rt.domains = []string{} // an empty list restricts to no domain; nil allows all
	}
	if rt.id == "" {
		rt.id = RouteID(o.Title)
	}
	if err := rt.setSchema(o.Schema); err != nil {
		return nil, err
	}
	for _, g := range o.Guidelines {
		if err := rt.addGuideline(g); err != nil {
			return nil, err
		}
	}
	if len(rt.initialData) > 0 {
		if err := rt.validate(rt.initialData); err != nil {
			return nil, invalid("route %q: initial data: %v", rt.title, err)
		}
	}
	rt.initial = &Step{route: rt}
	spec := StepSpec{}
	if o.InitialStep != nil {
		spec = *o.InitialStep
	}
	if spec.Step != nil || spec.Condition != "" {
		return nil, invalid("route %q: the initial step has no incoming transition: it takes no Step or Condition", rt.title)
	}
	if err := rt.initial.set(spec, true); err != nil {
		return nil, err
	}
	if err := rt.add(rt.initial); err != nil {
		return nil, err
	}
	last := rt.initial
	for i, s := range o.Steps {
		next, err := last.next(s)
		if err != nil {
			return nil, fmt.Errorf("steps[%d]: %w", i, err)
		}
		last = next
	}
	return rt, nil
}

func (rt *Route) setSchema(s map[string]any) error {
	if s == nil {
		return nil
	}
	if _, err := schema.Compile(s); err != nil {
		return invalid("route %q: schema: %v", rt.title, err)
	}
	if t, _ := s["type"].(string); t != "object" {
		return invalid("route %q: schema: the data of a route is an object (\"type\": \"object\"), not %v", rt.title, s["type"])
	}
	partial := maps.Clone(s)
	delete(partial, "required")
	v, err := schema.Compile(partial)
	if err != nil {
		return invalid("route %q: schema: %v", rt.title, err)
	}
	rt.schema, rt.partial = s, v
	rt.empties = emptyValues(rt.properties())
	return nil
}

// properties returns the route schema's properties.
func (rt *Route) properties() map[string]any {
	p, _ := rt.schema["properties"].(map[string]any)
	return p
}

// defines reports whether field is a property of the route's schema.
func (rt *Route) defines(field string) bool {
	_, ok := rt.properties()[field]
	return ok
}

// checkFields fails unless every field is a property of the route's schema.
func (rt *Route) checkFields(what string, fields []string) error {
	props := rt.properties()
	for _, f := range fields {
		if _, ok := props[f]; !ok {
			if rt.schema == nil {
				return invalid("route %q: %s %q: the route has no schema to define it (RouteOptions.Schema)", rt.title, what, f)
			}
			return invalid("route %q: %s %q: not a property of the route's schema (it has %s)", rt.title, what, f, quoted(slices.Sorted(maps.Keys(props))))
		}
	}
	return nil
}

func (rt *Route) add(s *Step) error {
	for _, o := range rt.steps {
		if o.id == s.id {
			return invalid("route %q: two steps have the ID %q", rt.title, s.id)
		}
	}
	rt.steps = append(rt.steps, s)
	return nil
}

func (rt *Route) addGuideline(g Guideline) error {
	if strings.TrimSpace(g.Action) == "" {
		return invalid("route %q: a guideline needs an action", rt.title)
	}
	rt.guidelines = append(rt.guidelines, g)
	return nil
}

// ID returns the route's ID.
func (rt *Route) ID() string { return rt.id }

// Title returns the route's title.
func (rt *Route) Title() string { return rt.title }

// Description returns the route's description.
func (rt *Route) Description() string { return rt.description }

// Conditions returns the conditions that make the route apply.
func (rt *Route) Conditions() []string { return slices.Clone(rt.conditions) }

// InitialStep returns the route's first step.
func (rt *Route) InitialStep() *Step { return rt.initial }

// Schema returns the JSON Schema of the route's data, or nil.
func (rt *Route) Schema() map[string]any { return rt.schema }

// Step returns the route's step with the given ID, or nil.
func (rt *Route) Step(id string) *Step {
	for _, s := range rt.steps {
		if s.id == id {
			return s
		}
	}
	return nil
}

// CreateGuideline adds a guideline that applies in this route. It panics on a guideline
// without an action.
func (rt *Route) CreateGuideline(g Guideline) *Route {
	rt.agent.define(func() error { return rt.addGuideline(g) })
	return rt
}

// Guidelines returns the route's guidelines.
func (rt *Route) Guidelines() []Guideline { return slices.Clone(rt.guidelines) }

// Domains returns the names of the domains the route may use, or nil when it may use
// every domain.
func (rt *Route) Domains() []string { return slices.Clone(rt.domains) }

// Rules returns what the agent must do in this route.
func (rt *Route) Rules() []string { return slices.Clone(rt.rules) }

// Prohibitions returns what the agent must never do in this route.
func (rt *Route) Prohibitions() []string { return slices.Clone(rt.prohibitions) }

// Describe returns the route's structure as text: its steps, what each collects and
// where it leads.
func (rt *Route) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Route %q (%s)", rt.title, rt.id)
	if rt.description != "" {
		fmt.Fprintf(&b, ": %s", rt.description)
	}
	b.WriteByte('\n')
	for _, s := range rt.steps {
		fmt.Fprintf(&b, "- %s", s.describe())
		b.WriteByte('\n')
	}
	return b.String()
}

// StepSpec is a step and the transition to it (seed 002's TransitionSpec). Given to
// NextStep it creates a new step, unless Step names an existing one (or EndRoute).
type StepSpec struct {
	// ID identifies the step in its route; derived from the route, the description and
	// the step's position when empty.
	ID string
	// Description is shown to the model as it is; it defaults to the prompt.
	Description string
	// Prompt tells the model what to do at this step (a template).
	Prompt string
	// Tool runs when the conversation enters the step, with ToolInput's result as its
	// input (by default the route's data restricted to the tool's input properties);
	// the fields of its output that the route's schema defines are merged into the
	// data, and the whole output reaches the model.
	Tool      agent.Tool
	ToolInput func(Data) (any, error)
	// Collect lists the fields of the route's schema this step asks for.
	Collect []string
	// SkipIf skips the step when it returns true for the data so far.
	SkipIf func(Data) bool
	// Requires lists fields that must be known before the step can be entered.
	Requires []string
	// Condition is the transition's condition, judged by the model when a step has
	// several transitions to choose from.
	Condition string
	// Step makes the transition lead to an existing step of the route, or to EndRoute,
	// instead of creating one; the other fields must then be empty, but Condition.
	Step *Step
	// Guidelines apply at this step only.
	Guidelines []Guideline
}

// Step is one step of a route.
type Step struct {
	route       *Route
	id          string
	description string
	prompt      string
	tool        agent.Tool
	toolInput   func(Data) (any, error)
	collect     []string
	skip        func(Data) (bool, error)
	requires    []string
	guidelines  []Guideline
	transitions []transition
}

// transition leads from a step to another, or to EndRoute.
type transition struct {
	to        *Step
	condition string
}

// ID returns the step's ID.
func (s *Step) ID() string { return s.id }

// RouteID returns the ID of the step's route.
func (s *Step) RouteID() string {
	if s.route == nil {
		return ""
	}
	return s.route.id
}

// Description returns the step's description.
func (s *Step) Description() string { return s.description }

// Prompt returns the step's prompt template.
func (s *Step) Prompt() string { return s.prompt }

// Collect returns the fields the step collects.
func (s *Step) Collect() []string { return slices.Clone(s.collect) }

// NextStep adds a transition from this step and returns its target, so that steps
// chain: route.InitialStep().NextStep(a).NextStep(b).NextStep(StepSpec{Step: EndRoute}).
// It panics on an invalid spec (a field the route's schema lacks, a step of another
// route, a duplicate ID): a programming error, best found where it is made.
func (s *Step) NextStep(spec StepSpec) *Step {
	var next *Step
	s.agent().define(func() (err error) {
		next, err = s.next(spec)
		return err
	})
	return next
}

// Configure changes the step after its creation (seed 002's configure): the fields set
// in spec replace the step's. ID, Step and Condition cannot be configured. It panics on
// an invalid spec, as NextStep does.
func (s *Step) Configure(spec StepSpec) *Step {
	s.agent().define(func() error {
		if spec.ID != "" || spec.Step != nil || spec.Condition != "" {
			return invalid("step %q: Configure cannot change the ID, the target or the condition of a transition", s.id)
		}
		return s.set(spec, false)
	})
	return s
}

// AddGuideline adds a guideline that applies at this step only. It panics on a
// guideline without an action.
func (s *Step) AddGuideline(g Guideline) *Step {
	s.agent().define(func() error {
		if strings.TrimSpace(g.Action) == "" {
			return invalid("step %q: a guideline needs an action", s.id)
		}
		s.guidelines = append(s.guidelines, g)
		return nil
	})
	return s
}

func (s *Step) agent() *Agent {
	if s.route == nil {
		panic("routes: END_ROUTE has no transitions")
	}
	return s.route.agent
}

// next adds the transition spec describes and returns its target.
func (s *Step) next(spec StepSpec) (*Step, error) {
	if s.route == nil {
		return nil, invalid("END_ROUTE has no transitions")
	}
	rt := s.route
	if spec.Step != nil {
		if spec.ID != "" || spec.Description != "" || spec.Prompt != "" || spec.Tool != nil || spec.ToolInput != nil ||
			spec.Collect != nil || spec.SkipIf != nil || spec.Requires != nil || spec.Guidelines != nil {
			return nil, invalid("route %q: step %q: a transition to an existing step takes only Step and Condition", rt.title, s.id)
		}
		if spec.Step != EndRoute && spec.Step.route != rt {
			return nil, invalid("route %q: step %q: transition to step %q of another route", rt.title, s.id, spec.Step.id)
		}
		s.transitions = append(s.transitions, transition{to: spec.Step, condition: spec.Condition})
		return spec.Step, nil
	}
	to, err := rt.newStep(spec)
	if err != nil {
		return nil, err
	}
	s.transitions = append(s.transitions, transition{to: to, condition: spec.Condition})
	return to, nil
}

// newStep adds a step made from spec to the route, with no transition to it yet.
func (rt *Route) newStep(spec StepSpec) (*Step, error) {
	if spec.ID == EndRouteID {
		return nil, invalid("route %q: %q is the ID of the route's end", rt.title, EndRouteID)
	}
	s := &Step{route: rt, id: spec.ID}
	if err := s.set(spec, true); err != nil {
		return nil, err
	}
	if s.id == "" {
		s.id = stepID(rt.id, s.description, len(rt.steps))
	}
	if err := rt.add(s); err != nil {
		return nil, err
	}
	return s, nil
}

// set applies the step fields of spec; all replaces every field, else only those set.
func (s *Step) set(spec StepSpec, all bool) error {
	rt := s.route
	if err := rt.checkFields("step "+strconv.Quote(s.id)+": collect", spec.Collect); err != nil {
		return err
	}
	if err := rt.checkFields("step "+strconv.Quote(s.id)+": requires", spec.Requires); err != nil {
		return err
	}
	for _, g := range spec.Guidelines {
		if strings.TrimSpace(g.Action) == "" {
			return invalid("route %q: step %q: a guideline needs an action", rt.title, s.id)
		}
	}
	if spec.ID != "" {
		s.id = spec.ID
	}
	if all || spec.Prompt != "" {
		s.prompt = spec.Prompt
	}
	if all || spec.Description != "" {
		s.description = spec.Description
	}
	if s.description == "" {
		s.description = s.prompt
	}
	if all || spec.Tool != nil {
		s.tool = spec.Tool
	}
	if all || spec.ToolInput != nil {
		s.toolInput = spec.ToolInput
	}
	if all || spec.Collect != nil {
		s.collect = slices.Clone(spec.Collect)
	}
	if all || spec.Requires != nil {
		s.requires = slices.Clone(spec.Requires)
	}
	if all || spec.SkipIf != nil {
		s.skip = nil
		if f := spec.SkipIf; f != nil {
			s.skip = func(d Data) (bool, error) { return f(d), nil }
		}
	}
	if all || spec.Guidelines != nil {
		s.guidelines = slices.Clone(spec.Guidelines)
	}
	return nil
}

// empty reports whether the step has nothing to do (an initial step that only leads
// on): traversal passes through it.
func (s *Step) empty() bool {
	return s.prompt == "" && s.tool == nil && len(s.collect) == 0
}

func (s *Step) describe() string {
	var b strings.Builder
	b.WriteString(s.id)
	if s.description != "" {
		fmt.Fprintf(&b, ": %s", s.description)
	}
	if s.tool != nil {
		fmt.Fprintf(&b, " [tool %s]", s.tool.Name())
	}
	if len(s.collect) > 0 {
		fmt.Fprintf(&b, " [collects %s]", strings.Join(s.collect, ", "))
	}
	if len(s.requires) > 0 {
		fmt.Fprintf(&b, " [requires %s]", strings.Join(s.requires, ", "))
	}
	if s.skip != nil {
		b.WriteString(" [may be skipped]")
	}
	var next []string
	for _, t := range s.transitions {
		n := t.to.id
		if t.condition != "" {
			n += " (if " + t.condition + ")"
		}
		next = append(next, n)
	}
	if len(next) > 0 {
		fmt.Fprintf(&b, " -> %s", strings.Join(next, " | "))
	}
	return b.String()
}

// check verifies the whole route: every transition leads to a step of the route or to
// EndRoute, and every cycle of steps has a way out.
func (rt *Route) check() error {
	index := map[*Step]int{}
	for i, s := range rt.steps {
		index[s] = i
	}
	for _, s := range rt.steps {
		for _, t := range s.transitions {
			if _, ok := index[t.to]; !ok && t.to != EndRoute {
				return invalid("route %q: step %q: transition to unknown step %q", rt.title, s.id, t.to.id)
			}
		}
	}
	for _, scc := range stronglyConnected(rt.steps) {
		if !cyclic(scc) {
			continue
		}
		in := map[*Step]bool{}
		for _, s := range scc {
			in[s] = true
		}
		exit := false
		for _, s := range scc {
			for _, t := range s.transitions {
				exit = exit || !in[t.to]
			}
		}
		if !exit {
			ids := make([]string, len(scc))
			for i, s := range scc {
				ids[i] = s.id
			}
			slices.Sort(ids)
			return invalid("route %q: steps %s form a cycle with no way out (no transition leaves it for another step or END_ROUTE)", rt.title, quoted(ids))
		}
	}
	rt.stepsText = stepsList(rt)
	return nil
}

// cyclic reports whether a strongly connected component holds a cycle: several steps,
// or one leading to itself.
func cyclic(scc []*Step) bool {
	if len(scc) > 1 {
		return true
	}
	for _, t := range scc[0].transitions {
		if t.to == scc[0] {
			return true
		}
	}
	return false
}

// stronglyConnected returns the strongly connected components of the step graph
// (Tarjan's algorithm). EndRoute is not a node.
func stronglyConnected(steps []*Step) [][]*Step {
	var (
		index   = map[*Step]int{}
		low     = map[*Step]int{}
		onStack = map[*Step]bool{}
		stack   []*Step
		out     [][]*Step
		visit   func(s *Step)
	)
	visit = func(s *Step) {
		index[s], low[s] = len(index), len(index)
		stack = append(stack, s)
		onStack[s] = true
		for _, t := range s.transitions {
			w := t.to
			if w == EndRoute {
				continue
			}
			if _, seen := index[w]; !seen {
				visit(w)
				low[s] = min(low[s], low[w])
			} else if onStack[w] {
				low[s] = min(low[s], index[w])
			}
		}
		if low[s] == index[s] {
			var scc []*Step
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == s {
					break
				}
			}
			out = append(out, scc)
		}
	}
	for _, s := range steps {
		if _, seen := index[s]; !seen {
			visit(s)
		}
	}
	return out
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
