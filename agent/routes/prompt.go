package routes

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Section names a part of the prompts the agent sends (seed 002's BuiltInSection, plus
// the sections its PromptBuilder adds without naming them).
type Section string

// The sections, in the order the prompt of an answer holds them. The routing prompt
// holds identity, context, glossary and routing.
const (
	SectionIdentity     Section = "identity"
	SectionContext      Section = "context"
	SectionGlossary     Section = "glossary"
	SectionGuidelines   Section = "guidelines"
	SectionCapabilities Section = "capabilities"
	SectionActiveRoutes Section = "active_routes"
	SectionRules        Section = "rules_and_prohibitions"
	SectionCollect      Section = "data_to_collect"
	SectionComposition  Section = "composition"
	SectionRouting      Section = "routing"
)

var (
	answerSections  = []Section{SectionIdentity, SectionContext, SectionGlossary, SectionGuidelines, SectionCapabilities, SectionActiveRoutes, SectionRules, SectionCollect, SectionComposition}
	routingSections = []Section{SectionIdentity, SectionContext, SectionGlossary, SectionRouting}
)

// SectionFunc writes one section of a prompt from what the turn knows; an empty string
// leaves the section out.
type SectionFunc func(in *PromptInput) (string, error)

// WithSection replaces a section of the prompts with fn; a nil fn removes it.
// DefaultSection returns the built-in one, to wrap it.
func WithSection(name Section, fn SectionFunc) Option {
	return optionFunc(func(a *Agent) error {
		if DefaultSection(name) == nil {
			return invalid("WithSection: unknown section %q", name)
		}
		if a.sections == nil {
			a.sections = map[Section]SectionFunc{}
		}
		a.sections[name] = fn
		return nil
	})
}

// DefaultSection returns the built-in writer of a section, or nil for an unknown name.
func DefaultSection(name Section) SectionFunc {
	return defaultSections[name]
}

var defaultSections = map[Section]SectionFunc{
	SectionIdentity:     identitySection,
	SectionContext:      contextSection,
	SectionGlossary:     glossarySection,
	SectionGuidelines:   guidelinesSection,
	SectionCapabilities: capabilitiesSection,
	SectionActiveRoutes: activeRouteSection,
	SectionRules:        rulesSection,
	SectionCollect:      collectSection,
	SectionComposition:  compositionSection,
	SectionRouting:      routingSection,
}

// PromptInput is what a turn knows when it writes a prompt: templates are already
// rendered with the context.
type PromptInput struct {
	Name, Description, Goal string
	// Identity is the rendered identity template.
	Identity string
	// Context is the context of the turn: the agent's, overridden by the call's.
	Context map[string]any
	Terms   []Term
	// Guidelines are those that apply here: the agent's, the route's and the step's,
	// enabled ones only.
	Guidelines   []Guideline
	Capabilities []Capability
	// Route is the current route (nil outside any); Step its current step (nil before
	// its first); StepPrompt the step's rendered prompt.
	Route      *Route
	Step       *Step
	StepPrompt string
	// Data is the current route's data.
	Data Data
	// Collect lists the fields this answer may fill; Missing, the fields of the route's
	// schema still unknown.
	Collect, Missing []string
	// ToolCalls are the step tools run this turn, with their results.
	ToolCalls   []ToolCall
	Composition CompositionMode
	// Responses are the canned responses, rendered with the context and data.
	Responses []CannedResponse
	// Routes are the routes the routing prompt scores, with their rendered conditions;
	// Candidates, the steps the current route may go to next when it must choose.
	Routes     []RouteChoice
	Candidates []StepChoice
	// Extract lists the routes whose data the routing call may fill from the user's
	// message.
	Extract []string
}

// StepChoice is a step the conversation may go to next (or EndRoute), with the
// condition of the transition to it.
type StepChoice struct {
	Step      *Step
	Condition string
}

// RouteChoice is a route as the routing prompt shows it.
type RouteChoice struct {
	Route      *Route
	Conditions []string
}

// build writes the sections in order, each replaced or removed as configured.
func (a *Agent) build(in *PromptInput, order []Section) (string, error) {
	var parts []string
	if a.settings.System != "" {
		parts = append(parts, a.settings.System)
	}
	for _, name := range order {
		fn := defaultSections[name]
		if custom, ok := a.sections[name]; ok {
			fn = custom
		}
		if fn == nil {
			continue
		}
		text, err := fn(in)
		if err != nil {
			return "", fmt.Errorf("routes: prompt section %s: %w", name, err)
		}
		if text = strings.TrimSpace(text); text != "" {
			parts = append(parts, text)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}

func identitySection(in *PromptInput) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s.", in.Name)
	if in.Description != "" {
		fmt.Fprintf(&b, " %s", in.Description)
	}
	if in.Goal != "" {
		fmt.Fprintf(&b, "\nYour goal: %s", in.Goal)
	}
	if in.Identity != "" {
		fmt.Fprintf(&b, "\n%s", in.Identity)
	}
	return b.String(), nil
}

func contextSection(in *PromptInput) (string, error) {
	if len(in.Context) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("## Context")
	for _, k := range slices.Sorted(maps.Keys(in.Context)) {
		fmt.Fprintf(&b, "\n- %s: %s", k, format(in.Context[k]))
	}
	return b.String(), nil
}

func glossarySection(in *PromptInput) (string, error) {
	if len(in.Terms) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("## Glossary")
	for _, t := range in.Terms {
		fmt.Fprintf(&b, "\n- %s", t.Name)
		if len(t.Synonyms) > 0 {
			fmt.Fprintf(&b, " (also: %s)", strings.Join(t.Synonyms, ", "))
		}
		fmt.Fprintf(&b, ": %s", t.Description)
	}
	return b.String(), nil
}

func guidelinesSection(in *PromptInput) (string, error) {
	if len(in.Guidelines) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("## Guidelines\nFollow each guideline whose condition holds:")
	for _, g := range in.Guidelines {
		if g.Condition != "" {
			fmt.Fprintf(&b, "\n- When %s: %s", g.Condition, g.Action)
		} else {
			fmt.Fprintf(&b, "\n- %s", g.Action)
		}
	}
	return b.String(), nil
}

func capabilitiesSection(in *PromptInput) (string, error) {
	if len(in.Capabilities) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("## Capabilities")
	for _, c := range in.Capabilities {
		fmt.Fprintf(&b, "\n- %s: %s", c.Title, c.Description)
	}
	return b.String(), nil
}

func activeRouteSection(in *PromptInput) (string, error) {
	if in.Route == nil {
		return "", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Active route: %s", in.Route.title)
	if in.Route.description != "" {
		fmt.Fprintf(&b, "\n%s", in.Route.description)
	}
	fmt.Fprintf(&b, "\nSteps:\n%s", in.Route.stepsText)
	if in.Step != nil {
		fmt.Fprintf(&b, "\nCurrent step: %s", in.Step.id)
		if in.StepPrompt != "" {
			fmt.Fprintf(&b, "\nDo now: %s", in.StepPrompt)
		}
	}
	for _, tc := range in.ToolCalls {
		fmt.Fprintf(&b, "\nTool %s returned: %s", tc.ToolName, asJSON(tc.Result))
	}
	return b.String(), nil
}

// stepsList describes the route's steps for the prompt (empty steps left out).
func stepsList(rt *Route) string {
	var lines []string
	for _, s := range rt.steps {
		if !s.empty() {
			lines = append(lines, "- "+s.describe())
		}
	}
	return strings.Join(lines, "\n")
}

func rulesSection(in *PromptInput) (string, error) {
	if in.Route == nil || len(in.Route.rules)+len(in.Route.prohibitions) == 0 {
		return "", nil
	}
	var b strings.Builder
	if len(in.Route.rules) > 0 {
		b.WriteString("## Rules you MUST follow")
		for _, r := range in.Route.rules {
			fmt.Fprintf(&b, "\n- %s", r)
		}
	}
	if len(in.Route.prohibitions) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("## You must NEVER")
		for _, p := range in.Route.prohibitions {
			fmt.Fprintf(&b, "\n- %s", p)
		}
	}
	return b.String(), nil
}

func collectSection(in *PromptInput) (string, error) {
	if in.Route == nil || (len(in.Collect) == 0 && len(in.Missing) == 0 && len(in.Data) == 0) {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("## Data")
	if len(in.Data) > 0 {
		fmt.Fprintf(&b, "\nKnown: %s", asJSON(in.Data))
	}
	if len(in.Missing) > 0 {
		fmt.Fprintf(&b, "\nStill to collect: %s", strings.Join(in.Missing, ", "))
	}
	if len(in.Collect) > 0 {
		fmt.Fprintf(&b, "\nFill %s in your answer with what the user said; leave out (or null) what they did not say. Never invent a value.", strings.Join(in.Collect, ", "))
	}
	return b.String(), nil
}

func compositionSection(in *PromptInput) (string, error) {
	if in.Composition == Fluid || in.Composition == "" || len(in.Responses) == 0 {
		return "", nil
	}
	var b strings.Builder
	switch in.Composition {
	case CannedStrict:
		b.WriteString("## Responses\nAnswer ONLY with one of these responses, by its id in the \"response\" field:")
	case CannedFluid:
		b.WriteString("## Responses\nWhen one of these responses fits, answer with it by its id in the \"response\" field; otherwise write your own message:")
	case CannedComposited:
		b.WriteString("## Responses\nWrite your message from these responses, keeping their wording as far as the conversation allows:")
	}
	for _, r := range in.Responses {
		fmt.Fprintf(&b, "\n- %s: %s", r.ID, r.Template)
	}
	return b.String(), nil
}

func routingSection(in *PromptInput) (string, error) {
	var b strings.Builder
	if len(in.Routes) > 0 {
		b.WriteString("## Routes\nScore from 0 to 100 how well each route fits what the user wants now, in the \"routes\" field by route id. A user who changed their mind wants another route now.")
		for _, rc := range in.Routes {
			fmt.Fprintf(&b, "\n- %s: %s", rc.Route.id, rc.Route.title)
			if rc.Route.description != "" {
				fmt.Fprintf(&b, ". %s", rc.Route.description)
			}
			if len(rc.Conditions) > 0 {
				fmt.Fprintf(&b, " (applies when: %s)", strings.Join(rc.Conditions, "; "))
			}
		}
	}
	if in.Route != nil {
		fmt.Fprintf(&b, "\n\nThe conversation is in route %s", in.Route.id)
		if in.Step != nil {
			fmt.Fprintf(&b, ", at step %s: %s", in.Step.id, in.Step.description)
		}
		b.WriteString(".")
	}
	if len(in.Candidates) > 0 {
		b.WriteString("\n\n## Next step\nChoose the step the conversation goes to next, by id in the \"step\" field:")
		for _, c := range in.Candidates {
			fmt.Fprintf(&b, "\n- %s: %s", c.Step.id, c.Step.description)
			if c.Condition != "" {
				fmt.Fprintf(&b, " (when: %s)", c.Condition)
			}
		}
	}
	if len(in.Extract) > 0 {
		b.WriteString("\n\n## Data\nIn the \"data\" field, by route id, give the values of the route's fields that the user stated; leave out what they did not say. Never invent a value.")
		if in.Route != nil && len(in.Data) > 0 {
			fmt.Fprintf(&b, "\nKnown for %s: %s", in.Route.id, asJSON(in.Data))
		}
	}
	return b.String(), nil
}
