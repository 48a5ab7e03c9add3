package routes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// promptInput gathers what the prompts of a turn show, templates rendered: the
// agent's knowledge, and the guidelines, rules and data of rt and s where they apply.
func (t *turn) promptInput(rt *Route, s *Step) (*PromptInput, error) {
	a := t.a
	in := &PromptInput{Name: a.name, Description: a.description, Goal: a.goal, Context: t.vars, Route: rt, Step: s, Composition: a.composition}
	var err error
	if in.Identity, err = t.render("identity", a.identity, t.vars); err != nil {
		return nil, err
	}
	for _, term := range a.terms {
		var rendered Term
		what := "term " + term.Name
		if rendered.Name, err = t.render(what, term.Name, t.vars); err != nil {
			return nil, err
		}
		if rendered.Description, err = t.render(what, term.Description, t.vars); err != nil {
			return nil, err
		}
		if rendered.Synonyms, err = t.renderAll(what, term.Synonyms, t.vars); err != nil {
			return nil, err
		}
		in.Terms = append(in.Terms, rendered)
	}
	for _, g := range t.guidelines(rt, s) {
		if g.Condition, err = t.render("guideline condition", g.Condition, t.vars); err != nil {
			return nil, err
		}
		if g.Action, err = t.render("guideline action", g.Action, t.vars); err != nil {
			return nil, err
		}
		in.Guidelines = append(in.Guidelines, g)
	}
	in.Capabilities = a.capabilities
	if rt != nil {
		in.Data = t.st.DataByRoute[rt.id]
		in.Missing = missingInOrder(rt, in.Data)
	}
	if s != nil {
		if in.StepPrompt, err = t.render(fmt.Sprintf("step %q: prompt", s.id), s.prompt, t.dataVars(in.Data)); err != nil {
			return nil, err
		}
		// The answer may fill the step's fields and every other field of the route
		// still missing, so that what the user volunteers ahead of its step is kept.
		in.Collect = slices.Clone(s.collect)
		for _, f := range in.Missing {
			if !slices.Contains(in.Collect, f) {
				in.Collect = append(in.Collect, f)
			}
		}
	}
	return in, nil
}

// guidelines returns the enabled guidelines that apply at step s of route rt: the
// agent's, the route's, the step's.
func (t *turn) guidelines(rt *Route, s *Step) []Guideline {
	all := slices.Clone(t.a.guidelines)
	if rt != nil {
		all = append(all, rt.guidelines...)
	}
	if s != nil {
		all = append(all, s.guidelines...)
	}
	return slices.DeleteFunc(all, func(g Guideline) bool { return g.Disabled })
}

// dataVars is the context with the route's data over it, for step prompts and canned
// responses, which name the data's fields.
func (t *turn) dataVars(d Data) map[string]any {
	if len(d) == 0 {
		return t.vars
	}
	vars := maps.Clone(t.vars)
	maps.Copy(vars, d)
	return vars
}

// missingInOrder lists the fields of the route's schema not known yet, in the order
// the steps collect them, then the others by name.
func missingInOrder(rt *Route, d Data) []string {
	var order []string
	for _, s := range rt.steps {
		for _, f := range s.collect {
			if !slices.Contains(order, f) {
				order = append(order, f)
			}
		}
	}
	for _, f := range slices.Sorted(maps.Keys(rt.properties())) {
		if !slices.Contains(order, f) {
			order = append(order, f)
		}
	}
	return missing(d, order)
}

// tools returns the tools offered while answering in rt: those of the domains rt may
// use, of the guidelines and capabilities that apply. Tools of other domains are not
// offered, so the model cannot call them (Generate refuses an unknown tool).
func (t *turn) tools(rt *Route, guidelines []Guideline) []agent.Tool {
	var out []agent.Tool
	seen := map[string]bool{}
	add := func(tools []agent.Tool) {
		for _, tool := range tools {
			if !seen[tool.Name()] {
				seen[tool.Name()] = true
				out = append(out, tool)
			}
		}
	}
	domains := t.a.domainsFor(rt)
	for _, name := range slices.Sorted(maps.Keys(domains)) {
		add(domains[name])
	}
	for _, g := range guidelines {
		add(g.Tools)
	}
	for _, c := range t.a.capabilities {
		add(c.Tools)
	}
	return out
}

// answer writes the turn's answer at step s of rt (either may be nil): one model call
// whose output is the message and, when the route has fields to fill, their values,
// which are merged (collect). What the model gets wrong is absorbed (see absorb and
// the Warning codes) unless the agent is strict.
func (t *turn) answer(ctx context.Context, rt *Route, s *Step) (string, error) {
	in, err := t.promptInput(rt, s)
	if err != nil {
		return "", err
	}
	in.ToolCalls = t.calls
	mode := t.a.composition
	canned := mode != Fluid
	if canned {
		in.Responses = t.canned(rt, in.Data)
		if mode == CannedStrict && len(in.Responses) == 0 {
			return "", fmt.Errorf("routes: %w: no canned response can be filled with the data known", ErrNotCanned)
		}
	}
	var out map[string]any
	if len(in.Collect) > 0 || mode == CannedStrict || mode == CannedFluid && len(in.Responses) > 0 {
		out = t.answerSchema(rt, in, mode)
	}
	system, err := t.a.build(in, answerSections)
	if err != nil {
		return "", err
	}
	// The message streams as it arrives, unless a canned response may replace it.
	streams := t.emit != nil && (mode == Fluid || mode == CannedComposited)
	resp, err := t.generate(ctx, system, t.tools(rt, in.Guidelines), out, t.chunks(streams, out != nil))
	if err != nil && !errors.Is(err, agent.ErrInvalidOutput) || resp == nil {
		return "", err
	}
	msgs := produced(resp, len(t.history)+1) // the system message leads what was sent
	t.calls = append(t.calls, toolCallsOf(msgs)...)
	var msg strings.Builder
	for _, m := range msgs {
		if m.Role != abi.RoleModel {
			continue
		}
		if out != nil {
			msg.WriteString(scanMessage(m.Text()))
		} else {
			msg.WriteString(m.Text())
		}
	}
	if out == nil {
		return msg.String(), err
	}

	message := msg.String()
	fields, raw, perr := decodeOutput(resp.Text())
	notCanned := func() error {
		return fmt.Errorf("routes: %w: the model answered %q; the responses it may give are %s", ErrNotCanned, truncate(resp.Text(), 200), quoted(responseIDs(in.Responses)))
	}
	if t.a.strict && (err != nil || perr != nil) {
		if rt != nil {
			if ferr := fieldErrors(rt, pick(fields, in.Collect)); ferr != nil {
				return "", ferr
			}
		}
		if mode == CannedStrict {
			return "", notCanned() // free text, or a response not offered
		}
		if err == nil {
			err = fmt.Errorf("routes: %w: %v", agent.ErrInvalidOutput, perr)
		}
		return "", err
	}
	late := "" // text found only once the answer is whole, streamed then
	if perr != nil {
		if mode == CannedStrict {
			return "", notCanned()
		}
		// Prose where JSON was asked for: the prose is the message (unless JSON cut
		// short gave one already), and nothing is collected.
		t.warn(Warning{Code: WarnNoJSON, Route: routeID(rt), Step: stepIDOf(s), Message: "the answer held no JSON: its text is the message, and nothing was collected from it"})
		if message == "" {
			message = strings.TrimSpace(resp.Text())
			late = message
		}
	}
	if id, _ := fields["response"].(string); mode == CannedStrict && id == "" {
		return "", notCanned()
	}
	if rt != nil && s != nil && len(in.Collect) > 0 {
		if err := t.collect(rt, s.id, pick(fields, in.Collect)); err != nil {
			return "", err
		}
	}
	if id, _ := fields["response"].(string); id != "" {
		text, ok := cannedText(in.Responses, id)
		switch {
		case ok:
			if t.emit != nil {
				if err := t.emit(text); err != nil {
					return "", err
				}
			}
			return text, nil
		case mode == CannedStrict:
			return "", fmt.Errorf("routes: %w: the model answered with response %q; the responses are %s", ErrNotCanned, id, quoted(responseIDs(in.Responses)))
		default:
			t.warn(Warning{Code: WarnNotCanned, Route: routeID(rt), Step: stepIDOf(s), Message: fmt.Sprintf("the answer named response %q, which does not exist (the responses are %s): its message was used", id, quoted(responseIDs(in.Responses)))})
		}
	}
	if message == "" && perr == nil {
		// JSON without a message: a model that wrote its message around the JSON
		// (commentary, a fenced block) said it there.
		message = strings.TrimSpace(around(resp.Text(), raw))
		late = message
	}
	if message == "" {
		t.warn(Warning{Code: WarnNoMessage, Route: routeID(rt), Step: stepIDOf(s), Message: "the answer held no message: a second call wrote it"})
		if message, err = t.retell(ctx, rt, s, in.Responses, streams); err != nil {
			return "", err
		}
		late = ""
	}
	if late != "" && streams || mode == CannedFluid && t.emit != nil && message != "" {
		if err := t.emit(message); err != nil {
			return "", err
		}
	}
	return message, nil
}

// retell asks the model for the message alone, as text: what a turn does when the
// structured answer held none. The data it collected is known to the prompt.
func (t *turn) retell(ctx context.Context, rt *Route, s *Step, responses []CannedResponse, streams bool) (string, error) {
	in, err := t.promptInput(rt, s)
	if err != nil {
		return "", err
	}
	in.Collect, in.ToolCalls, in.Responses = nil, t.calls, responses
	system, err := t.a.build(in, answerSections)
	if err != nil {
		return "", err
	}
	resp, err := t.generate(ctx, system, nil, nil, t.chunks(streams, false))
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

// chunks returns the stream callback of an answer: nil unless it streams; the text
// of a structured answer's message (scanned as it arrives), or all of a text answer.
func (t *turn) chunks(streams, structured bool) func(*abi.GenerateResponseChunk) error {
	if !streams {
		return nil
	}
	scanners := map[int]*messageScanner{}
	return func(c *abi.GenerateResponseChunk) error {
		if c.Role != abi.RoleModel {
			return nil
		}
		delta := c.Text()
		if structured {
			sc := scanners[c.Index]
			if sc == nil {
				sc = &messageScanner{}
				scanners[c.Index] = sc
			}
			delta = sc.Write(delta)
		}
		if delta == "" {
			return nil
		}
		return t.emit(delta)
	}
}

// stepIDOf is s's ID, or "" for none.
func stepIDOf(s *Step) string {
	if s == nil {
		return ""
	}
	return s.id
}

// answerSchema is the schema of a structured answer: the message (or, strict, the
// canned response chosen) and the fields the step collects, each allowing null.
func (t *turn) answerSchema(rt *Route, in *PromptInput, mode CompositionMode) map[string]any {
	props := map[string]any{}
	var required []any
	if mode != CannedStrict {
		props["message"] = map[string]any{"type": "string"}
		required = append(required, "message")
	}
	if mode == CannedStrict || mode == CannedFluid {
		ids := make([]any, len(in.Responses))
		for i, r := range in.Responses {
			ids[i] = r.ID
		}
		if mode == CannedStrict {
			props["response"] = map[string]any{"type": "string", "enum": ids}
			required = append(required, "response")
		} else {
			props["response"] = map[string]any{"anyOf": []any{map[string]any{"type": "string", "enum": ids}, map[string]any{"type": "null"}}}
		}
	}
	if rt != nil {
		maps.Copy(props, nullable(rt, in.Collect))
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

// canned returns the canned responses that can be filled with what is known, rendered.
func (t *turn) canned(rt *Route, d Data) []CannedResponse {
	all := slices.Clone(t.a.responses)
	if rt != nil {
		all = append(all, rt.responses...)
	}
	vars := t.dataVars(d)
	var out []CannedResponse
	for _, r := range all {
		text, err := RenderTemplate(r.Template, vars, MissingError)
		if err != nil {
			continue // a response naming data not collected yet cannot be said yet
		}
		out = append(out, CannedResponse{ID: r.ID, Template: text})
	}
	return out
}

func cannedText(responses []CannedResponse, id string) (string, bool) {
	for _, r := range responses {
		if r.ID == id {
			return r.Template, true
		}
	}
	return "", false
}

func responseIDs(responses []CannedResponse) []string {
	ids := make([]string, len(responses))
	for i, r := range responses {
		ids[i] = r.ID
	}
	return ids
}

// pick returns the given fields of an answer.
func pick(fields map[string]any, names []string) Data {
	out := Data{}
	for _, n := range names {
		if v, ok := fields[n]; ok {
			out[n] = v
		}
	}
	return out
}

// truncate shortens text for an error message.
func truncate(text string, n int) string {
	if len(text) <= n {
		return text
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n] + "..."
}
