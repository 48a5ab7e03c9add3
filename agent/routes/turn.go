package routes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/tracing"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// ToolCall is a tool a turn ran: a step's tool, or one the model called while it
// answered.
type ToolCall struct {
	ToolName  string `json:"toolName"`
	Arguments any    `json:"arguments,omitempty"`
	Result    any    `json:"result,omitempty"`
}

// turn is one answer in the making.
type turn struct {
	a       *Agent
	st      *State // the working copy, returned at the end
	history []*abi.Message
	vars    map[string]any
	now     time.Time
	calls   []ToolCall
	// emit streams the answer's text as it comes; nil when nobody listens.
	emit func(delta string) error
	// asked records the routes whose next step the model already chose this turn.
	asked map[*Route]bool
	// span is the turn's trace span; warnings, what the turn absorbed; absent, the
	// template variables the context lacked, each once.
	span     trace.Span
	warnings []Warning
	absent   []string
}

// decision is what the routing call said.
type decision struct {
	scores map[string]float64
	step   string
	data   map[string]Data
}

// ready waits until the definition is valid and holds it unchanged for the turn.
func (a *Agent) ready() (unlock func(), err error) {
	for {
		a.mu.RLock()
		if a.checked {
			return a.mu.RUnlock, nil
		}
		a.mu.RUnlock()
		if err := a.Validate(); err != nil {
			return nil, err
		}
	}
}

// respond runs the turn pipeline of seed 002: routing (with step choice and data
// extraction folded into one call), step traversal (skipIf, requires, step tools),
// the answer (message and collected fields in one call), the merge of the data. It
// records the turn as a span whose events are the turn's warnings.
func (a *Agent) respond(ctx context.Context, in RespondInput, emit func(string) error) (res *Response, err error) {
	unlock, err := a.ready()
	if err != nil {
		return nil, err
	}
	defer unlock()
	ctx, span := tracing.Start(ctx, a.name, tracing.Step, nil)
	defer func() {
		var out any
		if res != nil {
			out = turnSummary(res)
		}
		span.End(out, err)
	}()
	override, err := toData(in.Context)
	if err != nil {
		return nil, fmt.Errorf("routes: context: %w", err)
	}
	t := &turn{a: a, st: in.Session.clone(), history: in.History, now: a.now(), emit: emit, asked: map[*Route]bool{}, span: trace.SpanFromContext(ctx)}
	// The context's layers, each over the one before: the agent's, the conversation's,
	// the call's.
	t.vars = map[string]any{}
	a.varsMu.Lock()
	maps.Copy(t.vars, a.vars)
	a.varsMu.Unlock()
	maps.Copy(t.vars, t.st.Context)
	maps.Copy(t.vars, override)
	if t.st.DataByRoute == nil {
		t.st.DataByRoute = map[string]Data{}
	}
	if t.st.StepByRoute == nil {
		t.st.StepByRoute = map[string]string{}
	}
	if t.st.CreatedAt.IsZero() {
		t.st.CreatedAt = t.now
	}
	t.st.UpdatedAt = t.now
	t.enterNext()

	cur := t.current()
	dec, err := t.decide(ctx, cur)
	if err != nil {
		return nil, err
	}
	rt := t.chooseRoute(cur, dec)
	if rt != nil && rt != cur {
		t.st.enter(rt, t.now)
	} else if rt == nil && cur == nil && t.st.CurrentRoute != nil {
		t.st.exit(t.now, false) // a completed route is left
	}
	if rt != nil && len(dec.data[rt.id]) > 0 {
		if err := t.collect(rt, stepID0(t.st), pick(dec.data[rt.id], slices.Collect(maps.Keys(rt.properties())))); err != nil {
			return nil, err
		}
	}

	var step *Step
	if rt != nil {
		var complete bool
		if step, complete, err = t.traverse(ctx, rt, dec.step); err != nil {
			return nil, err
		}
		if complete {
			t.st.complete(t.now)
			t.chain(rt)
			return t.result(ctx, "", true), nil
		}
		if step != nil {
			t.st.moveTo(step, t.now)
		}
	}
	msg, err := t.answer(ctx, rt, step)
	if err != nil {
		return nil, err
	}
	return t.result(ctx, msg, false), nil
}

// result is the turn's Response. The template variables the context lacked are
// reported here, once: a warning, and a log line.
func (t *turn) result(ctx context.Context, msg string, complete bool) *Response {
	if len(t.absent) > 0 {
		names := make([]string, len(t.absent))
		for i, p := range t.absent {
			names[i] = "{{" + p + "}}"
		}
		w := Warning{Code: WarnMissingVariables, Message: "the context lacks " + strings.Join(names, ", ") + ": rendered as nothing"}
		if r := t.st.CurrentRoute; r != nil {
			w.Route = r.ID
		}
		t.warn(w)
		t.a.log.WarnContext(ctx, "routes: template variables missing from the context rendered as nothing",
			"agent", t.a.name, "session", t.st.ID, "route", w.Route, "variables", t.absent)
	}
	return &Response{Message: msg, Session: t.st, ToolCalls: t.calls, RouteComplete: complete, Warnings: t.warnings}
}

// turnSummary is what the turn's span records as its output.
func turnSummary(r *Response) map[string]any {
	out := map[string]any{"routeComplete": r.RouteComplete, "warnings": len(r.Warnings)}
	if cr := r.Session.CurrentRoute; cr != nil {
		out["route"] = cr.ID
	}
	if cs := r.Session.CurrentStep; cs != nil {
		out["step"] = cs.ID
	}
	return out
}

// collect merges data a model gave for rt: forgivingly (absorb) unless the agent is
// strict, when data that fails the route's schema fails the turn.
func (t *turn) collect(rt *Route, step string, update Data) error {
	if !t.a.strict {
		t.absorb(rt, step, update)
		return nil
	}
	merged, err := rt.merge(t.st.DataByRoute[rt.id], update)
	if err != nil {
		return err
	}
	t.st.DataByRoute[rt.id] = merged
	return nil
}

// render renders a template of the turn. A variable the context lacks fails the turn
// with MissingError; otherwise it renders as nothing and is reported at the turn's
// end (result).
func (t *turn) render(what, tmpl string, vars map[string]any) (string, error) {
	out, absent := render(tmpl, vars)
	if len(absent) > 0 && t.a.missing == MissingError {
		return "", fmt.Errorf("routes: %s: %w", what, missingVariable(absent[0], tmpl))
	}
	for _, p := range absent {
		if !slices.Contains(t.absent, p) {
			t.absent = append(t.absent, p)
		}
	}
	return out, nil
}

// renderAll renders each template of a list (render).
func (t *turn) renderAll(what string, tmpls []string, vars map[string]any) ([]string, error) {
	out := make([]string, len(tmpls))
	for i, tmpl := range tmpls {
		var err error
		if out[i], err = t.render(what, tmpl, vars); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// enterNext enters the route a completed route's OnComplete chose, if any: the
// conversation is in it before routing, which may still leave it for a route the user
// clearly wants more (the margin).
func (t *turn) enterNext() {
	id := t.st.NextRoute
	if id == "" {
		return
	}
	t.st.NextRoute = ""
	rt := t.a.route(id)
	if rt == nil {
		t.warn(Warning{Code: WarnNextRoute, Route: id, Message: fmt.Sprintf("the next route %q is not a route of the agent (any more): the conversation goes on without it", id)})
		return
	}
	from := ""
	if cr := t.st.CurrentRoute; cr != nil {
		from = cr.ID
	}
	t.st.enter(rt, t.now)
	t.st.RouteHistory[len(t.st.RouteHistory)-1].From = from
}

// chain records the route rt's OnComplete chooses as the next turn's.
func (t *turn) chain(rt *Route) {
	next := rt.next
	if rt.onCompleteFunc != nil {
		ref := rt.onCompleteFunc(t.st.DataByRoute[rt.id].clone())
		if ref == "" {
			return
		}
		if next = t.a.routeNamed(ref); next == nil {
			t.warn(Warning{Code: WarnNextRoute, Route: rt.id, Message: fmt.Sprintf("OnCompleteFunc chose %q, which is not a route of the agent: no route follows", ref)})
			return
		}
	}
	if next != nil {
		t.st.NextRoute = next.id
	}
}

// current returns the route the conversation is in, or nil outside any route or once
// it completed.
func (t *turn) current() *Route {
	if t.st.CurrentRoute == nil || t.st.RouteComplete() {
		return nil
	}
	return t.a.route(t.st.CurrentRoute.ID)
}

// decide makes the routing call when there is something to decide: which route fits
// (several routes), which step comes next (several candidates). The same call extracts
// the data the user's message gives for each route, so that traversal sees it; only
// the chosen route's is merged, once the route is entered.
func (t *turn) decide(ctx context.Context, cur *Route) (decision, error) {
	var dec decision
	multi := len(t.a.routes) > 1
	// The step after the current one is chosen now when it may have to be: the
	// user's message may well complete the step (the data this call extracts).
	var cands []StepChoice
	if cur != nil {
		if from := cur.Step(stepID0(t.st)); from != nil && len(from.transitions) > 1 {
			for _, tr := range from.transitions {
				cands = append(cands, StepChoice{Step: tr.to, Condition: tr.condition})
			}
		}
	}
	choose := len(cands) > 1
	if !multi && !choose {
		return dec, nil
	}
	var at *Step
	if cur != nil {
		at = cur.Step(stepID0(t.st))
	}
	in, err := t.promptInput(cur, at)
	if err != nil {
		return dec, err
	}
	props := map[string]any{}
	var required []string
	extract := map[string]any{}
	for _, rt := range t.a.routes {
		if !multi && rt != cur {
			continue
		}
		if multi {
			conds, err := t.renderAll(fmt.Sprintf("route %q: conditions", rt.title), rt.conditions, t.vars)
			if err != nil {
				return dec, err
			}
			in.Routes = append(in.Routes, RouteChoice{Route: rt, Conditions: conds})
		}
		if rt.schema != nil {
			fields := slices.Sorted(maps.Keys(rt.properties()))
			extract[rt.id] = map[string]any{"type": "object", "properties": nullable(rt, fields), "additionalProperties": false}
		}
	}
	if multi {
		scores := map[string]any{}
		ids := make([]string, len(t.a.routes))
		for i, rt := range t.a.routes {
			ids[i] = rt.id
			scores[rt.id] = map[string]any{"type": "number", "minimum": 0, "maximum": 100}
		}
		props["routes"] = map[string]any{"type": "object", "properties": scores, "required": ids, "additionalProperties": false}
		required = append(required, "routes")
	}
	if choose {
		props["step"] = stepEnum(cands)
		required = append(required, "step")
		in.Candidates = cands
	}
	if len(extract) > 0 {
		props["data"] = map[string]any{"type": "object", "properties": extract, "additionalProperties": false}
		in.Extract = slices.Sorted(maps.Keys(extract))
	}
	system, err := t.a.build(in, routingSections)
	if err != nil {
		return dec, err
	}
	out := map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	resp, err := t.generate(ctx, system, nil, out, nil)
	if err != nil && (t.a.strict || !errors.Is(err, agent.ErrInvalidOutput)) || resp == nil {
		if t.a.strict && errors.Is(err, agent.ErrInvalidOutput) && resp != nil {
			// Say which field was wrong, against the route's own schema.
			var raw struct {
				Data map[string]Data `json:"data"`
			}
			resp.Message.Output(&raw)
			var errs []error
			for _, rt := range t.a.routes {
				errs = append(errs, fieldErrors(rt, raw.Data[rt.id]))
			}
			if derr := errors.Join(errs...); derr != nil {
				return dec, derr
			}
		}
		return dec, fmt.Errorf("routes: routing: %w", err)
	}
	fields, _, perr := decodeOutput(resp.Text())
	if perr != nil {
		// Nothing to decide with: the conversation stays where it is.
		t.warn(Warning{Code: WarnRouting, Route: routeID(cur), Message: fmt.Sprintf("the routing answer held no JSON (%v): the conversation keeps its route and step, and nothing was extracted", perr)})
		return dec, nil
	}
	dec = t.decisionOf(fields, cur)
	if choose && dec.step != "" {
		t.asked[cur] = true
	}
	return dec, nil
}

// decisionOf reads a routing answer, taking what it can: scores that are numbers (or
// numbers in strings), a step that is a string, data that is an object by route. A
// part of the wrong shape is left out, with a warning.
func (t *turn) decisionOf(fields map[string]any, cur *Route) decision {
	dec := decision{scores: map[string]float64{}, data: map[string]Data{}}
	var wrong []string
	if raw, ok := fields["routes"]; ok {
		scores, ok := raw.(map[string]any)
		if !ok {
			wrong = append(wrong, "routes")
		}
		for id, v := range scores {
			switch v := v.(type) {
			case float64:
				dec.scores[id] = v
			case string:
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					wrong = append(wrong, "routes."+id)
					continue
				}
				dec.scores[id] = f
			default:
				wrong = append(wrong, "routes."+id)
			}
		}
	}
	if raw, ok := fields["step"]; ok && raw != nil {
		if dec.step, ok = raw.(string); !ok {
			wrong = append(wrong, "step")
		}
	}
	if raw, ok := fields["data"]; ok && raw != nil {
		byRoute, ok := raw.(map[string]any)
		if !ok {
			wrong = append(wrong, "data")
		}
		for id, d := range byRoute {
			if d, ok := d.(map[string]any); ok {
				dec.data[id] = d
			} else if d != nil {
				wrong = append(wrong, "data."+id)
			}
		}
	}
	if len(wrong) > 0 {
		slices.Sort(wrong)
		t.warn(Warning{Code: WarnRouting, Route: routeID(cur), Message: "the routing answer's " + strings.Join(wrong, ", ") + " had the wrong type and were left out"})
	}
	return dec
}

// routeID is rt's ID, or "" for none.
func routeID(rt *Route) string {
	if rt == nil {
		return ""
	}
	return rt.id
}

func stepID0(st *State) string {
	if st.CurrentStep == nil {
		return ""
	}
	return st.CurrentStep.ID
}

func stepEnum(cands []StepChoice) map[string]any {
	ids := make([]any, len(cands))
	for i, c := range cands {
		ids[i] = c.Step.id
	}
	return map[string]any{"type": "string", "enum": ids}
}

// nullable returns the schemas of the given fields of the route, each also allowing
// null: a model says "not stated" with null as often as by leaving a field out.
func nullable(rt *Route, fields []string) map[string]any {
	props := rt.properties()
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		out[f] = map[string]any{"anyOf": []any{props[f], map[string]any{"type": "null"}}}
	}
	return out
}

// fieldErrors explains invalid extracted data field by field, against the route's own
// schema, or returns nil when the fields are valid.
func fieldErrors(rt *Route, d Data) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(d)) {
		if d[k] == nil {
			continue
		}
		if err := rt.validate(Data{k: d[k]}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// chooseRoute picks the route of this turn. One route needs no routing call: it is the
// route (unless it just completed). Several are scored: a conversation outside any
// route enters the best one scoring at least the minimum; one in a route switches
// only to a route that outscores it by the margin.
func (t *turn) chooseRoute(cur *Route, dec decision) *Route {
	switch len(t.a.routes) {
	case 0:
		return nil
	case 1:
		// With no routing call to ask, a completed route is not started again: the
		// application decides what follows it.
		if only := t.a.routes[0]; t.st.StepByRoute[only.id] != EndRouteID {
			return only
		}
		return nil
	}
	best := t.a.routes[0]
	for _, rt := range t.a.routes[1:] {
		if dec.scores[rt.id] > dec.scores[best.id] {
			best = rt
		}
	}
	if cur == nil {
		if dec.scores[best.id] >= t.a.minScore {
			return best
		}
		return nil
	}
	if best != cur && dec.scores[best.id] >= dec.scores[cur.id]+t.a.margin {
		return best
	}
	return cur
}

// done reports whether the conversation may leave a step it stands at: its skipIf
// holds, every field it collects is known, or, collecting nothing, it was shown.
func done(s *Step, d Data) (bool, error) {
	if s.skip != nil {
		skip, err := s.skip(d)
		if err != nil || skip {
			return skip, err
		}
	}
	return len(missing(d, s.collect)) == 0, nil
}

// candidates lists where a step may lead: its transitions whose target's requires are
// known (EndRoute always may be reached).
func candidates(s *Step, d Data) []StepChoice {
	var out []StepChoice
	for _, tr := range s.transitions {
		if tr.to != EndRoute && len(missing(d, tr.to.requires)) > 0 {
			continue
		}
		out = append(out, StepChoice{Step: tr.to, Condition: tr.condition})
	}
	return out
}

// traverse finds the step the conversation answers at in rt: it stays at the current
// step until that step is done, then follows transitions, passing through steps whose
// skipIf holds, empty steps and tool-only steps (running their tools), recursively, so
// that data known in advance can complete the route at once.
func (t *turn) traverse(ctx context.Context, rt *Route, chosen string) (step *Step, complete bool, err error) {
	visited := map[*Step]bool{}
	from := rt.Step(stepID0(t.st))
	if from == nil {
		return t.land(ctx, rt, rt.initial, visited)
	}
	ok, err := done(from, t.st.DataByRoute[rt.id])
	if err != nil || !ok {
		return from, false, err
	}
	return t.advance(ctx, rt, from, chosen, visited)
}

// advance follows one transition from s, chosen as the model said when there are
// several, and lands on its target.
func (t *turn) advance(ctx context.Context, rt *Route, s *Step, chosen string, visited map[*Step]bool) (*Step, bool, error) {
	cands := candidates(s, t.st.DataByRoute[rt.id])
	var next *Step
	switch len(cands) {
	case 0:
		return s, false, nil // nowhere to go yet: the conversation stays
	case 1:
		next = cands[0].Step
	default:
		for _, c := range cands {
			if c.Step.id == chosen {
				next = c.Step
			}
		}
		if next == nil && !t.asked[rt] {
			var err error
			if chosen, err = t.chooseStep(ctx, rt, s, cands); err != nil {
				return nil, false, err
			}
			for _, c := range cands {
				if c.Step.id == chosen {
					next = c.Step
				}
			}
		}
		if next == nil {
			next = cands[0].Step
		}
	}
	return t.land(ctx, rt, next, visited)
}

// land arrives at s: EndRoute completes the route; a step to skip, an empty step, a
// tool-only step (its tool run) and a step whose fields are all known already are
// passed through; any other step is where the conversation answers.
func (t *turn) land(ctx context.Context, rt *Route, s *Step, visited map[*Step]bool) (*Step, bool, error) {
	if s == EndRoute {
		return nil, true, nil
	}
	if visited[s] {
		return s, false, nil // skipped steps led back here: answer here rather than loop
	}
	visited[s] = true
	if s.skip != nil {
		skip, err := s.skip(t.st.DataByRoute[rt.id])
		if err != nil {
			return nil, false, err
		}
		if skip {
			return t.advance(ctx, rt, s, "", visited)
		}
	}
	if s.tool != nil {
		if err := t.runStepTool(ctx, rt, s); err != nil {
			return nil, false, err
		}
		if s.prompt == "" && len(s.collect) == 0 {
			return t.advance(ctx, rt, s, "", visited)
		}
	}
	if s.empty() || len(s.collect) > 0 && len(missing(t.st.DataByRoute[rt.id], s.collect)) == 0 {
		// Nothing to do here, or nothing left to ask: the step is done on arrival.
		return t.advance(ctx, rt, s, "", visited)
	}
	return s, false, nil
}

// chooseStep asks the model which of several next steps fits, by their conditions:
// the routing call does it when it runs; this call, only when it did not (one route)
// or the conversation just entered another route.
func (t *turn) chooseStep(ctx context.Context, rt *Route, from *Step, cands []StepChoice) (string, error) {
	t.asked[rt] = true
	in, err := t.promptInput(rt, from)
	if err != nil {
		return "", err
	}
	in.Candidates = cands
	system, err := t.a.build(in, routingSections)
	if err != nil {
		return "", err
	}
	out := map[string]any{"type": "object", "properties": map[string]any{"step": stepEnum(cands)}, "required": []any{"step"}, "additionalProperties": false}
	resp, err := t.generate(ctx, system, nil, out, nil)
	if err != nil && (t.a.strict || !errors.Is(err, agent.ErrInvalidOutput)) || resp == nil {
		return "", fmt.Errorf("routes: route %q: choosing the step after %q: %w", rt.title, from.id, err)
	}
	var raw struct {
		Step string `json:"step"`
	}
	if err := resp.Message.Output(&raw); err != nil {
		if t.a.strict {
			return "", fmt.Errorf("routes: route %q: choosing the step after %q: %w: %v", rt.title, from.id, agent.ErrInvalidOutput, err)
		}
		raw.Step = ""
	}
	if !slices.ContainsFunc(cands, func(c StepChoice) bool { return c.Step.id == raw.Step }) {
		t.warn(Warning{Code: WarnRouting, Route: rt.id, Step: from.id, Message: fmt.Sprintf("the step choice named no next step (%s): the first, %s, was taken", truncate(resp.Text(), 80), cands[0].Step.id)})
	}
	return raw.Step, nil
}

// runStepTool runs the tool of step s with the route's data, merges the fields of its
// output that the route's schema defines, and records the call.
func (t *turn) runStepTool(ctx context.Context, rt *Route, s *Step) error {
	data := t.st.DataByRoute[rt.id]
	def := s.tool.Definition()
	var input any
	if s.toolInput != nil {
		var err error
		if input, err = s.toolInput(data.clone()); err != nil {
			return fmt.Errorf("routes: route %q: step %q: input of tool %q: %w", rt.title, s.id, s.tool.Name(), err)
		}
		input = generic(input)
	} else {
		in := map[string]any{}
		props, _ := def.InputSchema["properties"].(map[string]any)
		for k, v := range data {
			if _, ok := props[k]; ok || props == nil {
				in[k] = deepCopy(v)
			}
		}
		input = in
	}
	if err := schema.Validate(def.InputSchema, input); err != nil {
		return fmt.Errorf("routes: route %q: step %q: tool %q: %w: %v", rt.title, s.id, s.tool.Name(), agent.ErrInvalidToolInput, err)
	}
	out, err := s.tool.Run(ctx, input)
	if err != nil {
		return fmt.Errorf("routes: route %q: step %q: tool %q: %w: %w", rt.title, s.id, s.tool.Name(), agent.ErrToolFailed, err)
	}
	out = generic(out)
	t.calls = append(t.calls, ToolCall{ToolName: s.tool.Name(), Arguments: input, Result: out})
	obj, ok := out.(map[string]any)
	if !ok || rt.schema == nil {
		return nil
	}
	update := Data{}
	for k, v := range obj {
		if rt.defines(k) {
			update[k] = v
		}
	}
	merged, err := rt.merge(data, update)
	if err != nil {
		return fmt.Errorf("routes: step %q: output of tool %q: %w", s.id, s.tool.Name(), err)
	}
	t.st.DataByRoute[rt.id] = merged
	return nil
}

// generate makes one model call with the agent's settings, the system prompt, the
// conversation and, when output is set, a JSON answer of that schema. With onChunk it
// streams.
func (t *turn) generate(ctx context.Context, system string, tools []agent.Tool, output map[string]any, onChunk func(*abi.GenerateResponseChunk) error) (*abi.GenerateResponse, error) {
	settings := *t.a.settings
	settings.System = ""
	opts := []agent.GenerateOption{
		agent.WithSettings(&settings),
		agent.WithSystem(system),
		agent.WithMessages(t.history...),
	}
	if len(tools) > 0 {
		opts = append(opts, agent.WithTools(tools...))
	}
	if output != nil {
		opts = append(opts, agent.WithOutputSchema(output))
	}
	if onChunk == nil {
		return agent.Generate(ctx, t.a.reg, opts...)
	}
	var resp *abi.GenerateResponse
	for v, err := range agent.GenerateStream(ctx, t.a.reg, opts...) {
		if err != nil {
			return v.Response, err
		}
		if v.Done {
			resp = v.Response
			continue
		}
		if err := onChunk(v.Chunk); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// produced returns the messages a call added to the conversation it was given.
func produced(resp *abi.GenerateResponse, sent int) []*abi.Message {
	h := resp.History()
	if len(h) < sent {
		return nil
	}
	return h[sent:]
}

// toolCallsOf pairs the tool requests and responses of messages into ToolCalls.
func toolCallsOf(msgs []*abi.Message) []ToolCall {
	results := map[string]any{}
	for _, m := range msgs {
		for _, r := range m.ToolResponses() {
			results[r.Name+"\x00"+r.Ref] = r.Output
		}
	}
	var out []ToolCall
	for _, m := range msgs {
		for _, r := range m.ToolRequests() {
			out = append(out, ToolCall{ToolName: r.Name, Arguments: r.Input, Result: results[r.Name+"\x00"+r.Ref]})
		}
	}
	return out
}

// decodeOutput decodes the JSON object of a structured answer, wherever in the text
// the model put it (alone, in a code fence, amid commentary), and returns it as
// written too.
func decodeOutput(text string) (map[string]any, json.RawMessage, error) {
	raw, err := abi.ExtractJSON(text)
	if err != nil {
		return nil, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, nil, err
	}
	if out == nil {
		return nil, nil, errors.New("the JSON value is null, not an object")
	}
	return out, raw, nil
}

// fence is the mark of a code fence, with its info string.
var fence = regexp.MustCompile("```[A-Za-z]*")

// around returns what a model wrote around the JSON raw of its answer text, code
// fences left out.
func around(text string, raw json.RawMessage) string {
	i := strings.Index(text, string(raw))
	if i < 0 {
		return ""
	}
	return fence.ReplaceAllString(text[:i]+text[i+len(raw):], "")
}
