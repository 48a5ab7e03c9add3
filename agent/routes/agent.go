package routes

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terrarium-ai/terrarium/agent"
)

// Agent is a routed conversational agent (seed 002's Agent): who it is, what it knows
// (terms, guidelines, capabilities, domains of tools), and the routes its conversations
// follow. Define it first (New, CreateRoute, NextStep...), then use it from any number
// of goroutines: Respond and RespondStream never change it.
type Agent struct {
	reg         *agent.Registry
	name        string
	description string
	goal        string
	identity    string
	settings    *agent.Settings
	composition CompositionMode
	responses   []CannedResponse
	margin      float64
	minScore    float64
	missing     Missing
	strict      bool
	sections    map[Section]SectionFunc
	now         func() time.Time
	log         *slog.Logger
	persist     *Manager
	autoSave    bool

	// varsMu guards the context, which UpdateContext changes between turns; a turn
	// reads it once, at its start.
	varsMu sync.Mutex
	vars   map[string]any

	// mu guards the definition below, which NextStep and friends may still change;
	// checked says the whole of it passed Validate since the last change.
	mu           sync.RWMutex
	checked      bool
	terms        []Term
	guidelines   []Guideline
	capabilities []Capability
	domains      map[string][]agent.Tool
	routes       []*Route
}

// Option configures New.
type Option interface {
	apply(*Agent) error
}

type optionFunc func(*Agent) error

func (f optionFunc) apply(a *Agent) error { return f(a) }

// WithDescription sets what the agent is, shown to the model as it is.
func WithDescription(text string) Option {
	return optionFunc(func(a *Agent) error { a.description = text; return nil })
}

// WithGoal sets what the agent is for, shown to the model as it is.
func WithGoal(text string) Option {
	return optionFunc(func(a *Agent) error { a.goal = text; return nil })
}

// WithIdentity sets the agent's persona, a template rendered from the context each
// turn ("I am {{name}}, here to help you, {{user.firstName}}.").
func WithIdentity(template string) Option {
	return optionFunc(func(a *Agent) error { a.identity = template; return nil })
}

// WithContext sets the context templates read (seed 002's context): any value that
// encodes to a JSON object. Respond's Context overrides it per call, key by key.
func WithContext(vars any) Option {
	return optionFunc(func(a *Agent) error {
		d, err := toData(vars)
		if err != nil {
			return fmt.Errorf("routes: %w: WithContext: %v", agent.ErrInvalidOption, err)
		}
		a.vars = d
		return nil
	})
}

// WithGenerateOpts sets what the model calls are made with: the model, its config,
// tools offered everywhere, middleware (agent.Reliable for retries and backup models).
// The system instructions and the output are the agent's own: WithSystem here adds
// instructions before the prompt's sections, and an output option is refused.
func WithGenerateOpts(opts ...agent.CommonOption) Option {
	return optionFunc(func(a *Agent) error {
		s, err := agent.NewSettings(opts...)
		if err != nil {
			return err
		}
		if s.Output != nil {
			return fmt.Errorf("routes: %w: WithGenerateOpts: the output of a routed agent is its own (a message and the data to collect)", agent.ErrInvalidOption)
		}
		if s.Messages != nil {
			return fmt.Errorf("routes: %w: WithGenerateOpts: a routed agent's messages are its conversation's history", agent.ErrInvalidOption)
		}
		a.settings = s
		return nil
	})
}

// WithComposition sets how answers are written (Fluid unless set).
func WithComposition(mode CompositionMode) Option {
	return optionFunc(func(a *Agent) error {
		if !mode.valid() {
			return fmt.Errorf("routes: %w: WithComposition(%q)", agent.ErrInvalidOption, mode)
		}
		a.composition = mode
		return nil
	})
}

// WithCannedResponses adds canned responses available in every route.
func WithCannedResponses(responses ...CannedResponse) Option {
	return optionFunc(func(a *Agent) error {
		a.responses = append(a.responses, responses...)
		return nil
	})
}

// WithRoutingMargin sets by how many points (of 100) another route must outscore the
// current one for the conversation to switch to it (DefaultRoutingMargin unless set):
// a clear change of mind switches, a small wobble of the scores does not.
func WithRoutingMargin(points float64) Option {
	return optionFunc(func(a *Agent) error {
		if points < 0 || points > 100 {
			return fmt.Errorf("routes: %w: WithRoutingMargin(%v): want 0 to 100", agent.ErrInvalidOption, points)
		}
		a.margin = points
		return nil
	})
}

// WithMinRouteScore sets the score (of 100) a route needs for a conversation outside
// any route to enter it (DefaultMinRouteScore unless set).
func WithMinRouteScore(points float64) Option {
	return optionFunc(func(a *Agent) error {
		if points < 0 || points > 100 {
			return fmt.Errorf("routes: %w: WithMinRouteScore(%v): want 0 to 100", agent.ErrInvalidOption, points)
		}
		a.minScore = points
		return nil
	})
}

// WithMissingVariables says what templates do with a variable the context lacks:
// MissingEmpty (the default) renders it as nothing and reports it; MissingError fails
// the turn.
func WithMissingVariables(m Missing) Option {
	return optionFunc(func(a *Agent) error {
		if m != MissingEmpty && m != MissingError {
			return fmt.Errorf("routes: %w: WithMissingVariables(%d)", agent.ErrInvalidOption, m)
		}
		a.missing = m
		return nil
	})
}

// WithStrict makes the agent refuse what a model gets wrong instead of absorbing it:
// an answer without JSON where fields were asked for, or with fields its schema does
// not allow, fails the turn (agent.ErrInvalidOutput); a field that fails the route's
// schema fails it too (ErrInvalidData), and nothing of the answer is merged. By
// default an agent is forgiving: the turn goes on without the part at fault, with a
// Warning.
func WithStrict() Option {
	return optionFunc(func(a *Agent) error { a.strict = true; return nil })
}

// WithLogger sets where the agent logs (slog.Default() unless set): a line per turn
// whose templates named variables the context lacks.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(a *Agent) error {
		if l == nil {
			return fmt.Errorf("routes: %w: WithLogger(nil)", agent.ErrInvalidOption)
		}
		a.log = l
		return nil
	})
}

// PersistenceOption configures WithPersistence.
type PersistenceOption interface {
	applyPersistence(*Agent)
}

type persistenceFunc func(*Agent)

func (f persistenceFunc) applyPersistence(a *Agent) { f(a) }

// WithAutoSave says whether the agent saves every turn by itself (true unless set).
// Without it, the agent only loads sessions by ID; the application saves them with
// the Manager (SaveState, SaveMessage).
func WithAutoSave(on bool) PersistenceOption {
	return persistenceFunc(func(a *Agent) { a.autoSave = on })
}

// WithPersistence keeps the agent's conversations in m (seed 002's persistence
// option): a turn given a RespondInput.SessionID resumes that session (its State and
// its messages), and every turn is saved (autoSave): the State (routes' data, current
// route and step, route history, context), the turn's messages and the answer. A
// turn given no SessionID starts a session, whose ID is the returned State's. Flows
// (DefineFlow) keep their state in snapshots and do not use it.
func WithPersistence(m *Manager, opts ...PersistenceOption) Option {
	return optionFunc(func(a *Agent) error {
		if m == nil {
			return fmt.Errorf("routes: %w: WithPersistence(nil)", agent.ErrInvalidOption)
		}
		a.persist, a.autoSave = m, true
		for _, o := range opts {
			o.applyPersistence(a)
		}
		return nil
	})
}

// WithClock sets the clock of the times a State records (time.Now unless set), for
// replays and tests that compare states.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(a *Agent) error { a.now = now; return nil })
}

// The routing defaults.
const (
	DefaultRoutingMargin = 20
	DefaultMinRouteScore = 50
)

// New returns a routed agent using the models and tools of r. It panics on an invalid
// option, as the Define functions of package agent do: a definition in code is wrong
// from the start. Build defines an agent from a declarative Definition and returns
// errors instead.
func New(r *agent.Registry, name string, opts ...Option) *Agent {
	a, err := newAgent(r, name, opts)
	if err != nil {
		panic(err)
	}
	return a
}

func newAgent(r *agent.Registry, name string, opts []Option) (*Agent, error) {
	if strings.TrimSpace(name) == "" {
		return nil, invalid("an agent needs a name")
	}
	a := &Agent{
		reg: r, name: name, composition: Fluid, margin: DefaultRoutingMargin,
		minScore: DefaultMinRouteScore, now: time.Now, settings: &agent.Settings{},
		domains: map[string][]agent.Tool{}, log: slog.Default(),
	}
	for _, o := range opts {
		if err := o.apply(a); err != nil {
			return nil, fmt.Errorf("routes: agent %q: %w", name, err)
		}
	}
	return a, nil
}

// define runs a change of the definition under the lock, panicking on its error.
func (a *Agent) define(change func() error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checked = false
	if err := change(); err != nil {
		panic(err)
	}
}

// UpdateContext merges updates (any value that encodes to a JSON object) into the
// agent's context, key by key, a nil value removing its key (seed 002's
// updateContext): turns that start afterwards render their templates from it; turns
// under way keep the context they started with. State.UpdateContext does the same for
// one conversation.
func (a *Agent) UpdateContext(updates any) error {
	d, err := toData(updates)
	if err != nil {
		return fmt.Errorf("routes: %w: UpdateContext: %v", agent.ErrInvalidInput, err)
	}
	a.varsMu.Lock()
	defer a.varsMu.Unlock()
	a.vars = mergeContext(a.vars, d)
	return nil
}

// Context returns a copy of the agent's context.
func (a *Agent) Context() map[string]any {
	a.varsMu.Lock()
	defer a.varsMu.Unlock()
	if a.vars == nil {
		return nil
	}
	return deepCopy(a.vars).(map[string]any)
}

// Name returns the agent's name.
func (a *Agent) Name() string { return a.name }

// Description returns the agent's description.
func (a *Agent) Description() string { return a.description }

// Goal returns the agent's goal.
func (a *Agent) Goal() string { return a.goal }

// CreateRoute adds a route and returns it, to add its steps. It panics on an invalid
// route (no title, a duplicate ID, an invalid schema or step).
func (a *Agent) CreateRoute(o RouteOptions) *Route {
	var rt *Route
	a.define(func() (err error) {
		rt, err = a.createRoute(o)
		return err
	})
	return rt
}

func (a *Agent) createRoute(o RouteOptions) (*Route, error) {
	rt, err := newRoute(a, o)
	if err != nil {
		return nil, err
	}
	for _, other := range a.routes {
		if other.id == rt.id {
			return nil, invalid("routes %q and %q have the same ID %q", other.title, rt.title, rt.id)
		}
	}
	a.routes = append(a.routes, rt)
	return rt, nil
}

// CreateTerm adds a glossary term.
func (a *Agent) CreateTerm(t Term) *Agent {
	a.define(func() error {
		if strings.TrimSpace(t.Name) == "" {
			return invalid("a term needs a name")
		}
		a.terms = append(a.terms, t)
		return nil
	})
	return a
}

// CreateGuideline adds a guideline that applies in every route. It panics on a
// guideline without an action.
func (a *Agent) CreateGuideline(g Guideline) *Agent {
	a.define(func() error {
		if strings.TrimSpace(g.Action) == "" {
			return invalid("a guideline needs an action")
		}
		a.guidelines = append(a.guidelines, g)
		return nil
	})
	return a
}

// CreateCapability adds a capability.
func (a *Agent) CreateCapability(c Capability) *Agent {
	a.define(func() error {
		if strings.TrimSpace(c.Title) == "" {
			return invalid("a capability needs a title")
		}
		a.capabilities = append(a.capabilities, c)
		return nil
	})
	return a
}

// AddDomain registers a named group of tools (seed 002's addDomain, whose domain
// objects of methods are tools here). A route restricted to some domains
// (RouteOptions.Domains) is offered only their tools. It panics if the name is taken.
func (a *Agent) AddDomain(name string, tools ...agent.Tool) {
	a.define(func() error {
		if strings.TrimSpace(name) == "" {
			return invalid("a domain needs a name")
		}
		if _, ok := a.domains[name]; ok {
			return invalid("domain %q is already registered", name)
		}
		a.domains[name] = slices.Clone(tools)
		return nil
	})
}

// Routes returns the agent's routes, in the order they were created.
func (a *Agent) Routes() []*Route {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.routes)
}

// Route returns the route with the given ID, or nil.
func (a *Agent) Route(id string) *Route {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.route(id)
}

func (a *Agent) route(id string) *Route {
	for _, rt := range a.routes {
		if rt.id == id {
			return rt
		}
	}
	return nil
}

// routeNamed returns the route with the given ID or, failing that, title (how seed
// 002's onComplete names routes), or nil.
func (a *Agent) routeNamed(ref string) *Route {
	if rt := a.route(ref); rt != nil {
		return rt
	}
	for _, rt := range a.routes {
		if rt.title == ref {
			return rt
		}
	}
	return nil
}

// DomainsForRoute returns the domains the route may use, by name: those it names, or
// every domain when it names none (seed 002's getDomainsForRoute). An unknown route
// gets none.
func (a *Agent) DomainsForRoute(routeID string) map[string][]agent.Tool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	rt := a.route(routeID)
	if rt == nil {
		return map[string][]agent.Tool{}
	}
	return a.domainsFor(rt)
}

// DomainsForRouteByTitle is DomainsForRoute for the route with the given title.
func (a *Agent) DomainsForRouteByTitle(title string) map[string][]agent.Tool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, rt := range a.routes {
		if rt.title == title {
			return a.domainsFor(rt)
		}
	}
	return map[string][]agent.Tool{}
}

func (a *Agent) domainsFor(rt *Route) map[string][]agent.Tool {
	if rt == nil || rt.domains == nil {
		return maps.Clone(a.domains)
	}
	out := map[string][]agent.Tool{}
	for _, name := range rt.domains {
		if tools, ok := a.domains[name]; ok {
			out[name] = tools
		}
	}
	return out
}

// Validate checks the whole definition: every route's transitions lead to steps of the
// route, every cycle of steps has a way out, every domain a route names exists, and
// strict composition has canned responses to choose from. Respond and DefineFlow call
// it; an error wraps ErrInvalidDefinition.
func (a *Agent) Validate() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.validate()
}

func (a *Agent) validate() error {
	if a.checked {
		return nil
	}
	canned := len(a.responses) > 0
	for _, rt := range a.routes {
		if err := rt.check(); err != nil {
			return err
		}
		for _, d := range rt.domains {
			if _, ok := a.domains[d]; !ok {
				return invalid("route %q: unknown domain %q (registered: %s)", rt.title, d, quoted(slices.Sorted(maps.Keys(a.domains))))
			}
		}
		if rt.onComplete != "" {
			if rt.next = a.routeNamed(rt.onComplete); rt.next == nil {
				return invalid("route %q: OnComplete names no route of the agent: %q", rt.title, rt.onComplete)
			}
		}
		canned = canned || len(rt.responses) > 0
	}
	if a.composition == CannedStrict && !canned {
		return invalid("agent %q: strict composition needs canned responses (WithCannedResponses or RouteOptions.Responses)", a.name)
	}
	a.checked = true
	return nil
}

// Registry returns the registry the agent's models and tools come from.
func (a *Agent) Registry() *agent.Registry { return a.reg }
