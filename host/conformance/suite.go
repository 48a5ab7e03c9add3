// Package conformance checks that a plugin works with Terrarium: what a plugin author
// runs before shipping a .wasm and an operator runs before loading one
// (`terrarium plugin test`). It loads the plugin into a private host with the given
// manifest and checks, reporting each finding:
//
//   - the descriptor: a supported ABI version, valid and unique names, valid JSON
//     Schemas, known hook points, well-formed capabilities, the exports its kinds need;
//   - tools: inputs generated from the input schema (required properties only, every
//     property, upper bounds, each enum value, the schema's examples) must be answered
//     with an output matching the output schema, or a protocol error other than
//     invalid_input and internal (the input is valid; internal is a bug); inputs
//     breaking each constraint must be refused with an error; an unknown tool name
//     must be an error;
//   - models: the checks of Genkit's model tests (text, multi-turn history, system role,
//     a tool request and its follow-up, structured output, streaming, media, context),
//     each run where the model's supports claims the capability, so a model claiming
//     what it cannot do fails;
//   - handlers: at each declared point, a valid directive and a state that still
//     matches the plugin's declared state schema;
//   - robustness: every export but describe answers empty, truncated and garbage input
//     with a protocol error: not an answer, not a trap;
//   - capabilities: every host function the plugin called during the checks is covered
//     by what its descriptor declares (state, http, config, secrets), so an operator
//     granting what it declares grants what it needs;
//   - limits: no call may time out or run out of memory under the manifest.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/internal/schema"
	"github.com/terrarium-ai/terrarium/internal/schema/instance"
)

// Options configures a run.
type Options struct {
	// Manifest grants the plugin what it needs for the checks: state access, HTTP
	// hosts (for a model talking to a test server), config and secrets. Its timeout
	// and memory bound every call.
	Manifest host.Manifest
	// Host configures the private host the plugin is loaded into (a compilation cache,
	// an HTTP transport).
	Host []host.Option
	// Progress, when set, receives each result as soon as it is known.
	Progress func(Result)
	// Log, when set, receives the plugin's log lines (and the host's); by default
	// they are dropped.
	Log *slog.Logger
}

// Run checks a plugin and reports what it found. An error means the suite itself could
// not run (the host could not be created); everything wrong with the plugin is a
// failing result instead.
func Run(ctx context.Context, wasm []byte, opts Options) (*Report, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := agent.NewRegistry()
	calls := &hostCalls{seen: map[string]bool{}}
	h, err := host.New(r, append([]host.Option{host.WithLogger(log), host.WithHostCallObserver(calls.note)}, opts.Host...)...)
	if err != nil {
		return nil, err
	}
	defer h.Close(context.Background())
	s := &suite{ctx: ctx, reg: r, host: h, opts: opts, report: &Report{}, calls: calls}
	s.run(wasm)
	s.report.Passed = len(s.report.Failed()) == 0
	return s.report, nil
}

type suite struct {
	ctx    context.Context
	reg    *agent.Registry
	host   *host.Host
	opts   Options
	report *Report
	plugin *host.Plugin
	desc   plugin.Descriptor
	calls  *hostCalls
}

// record adds a result.
func (s *suite) record(check string, outcome Outcome, d time.Duration, format string, args ...any) {
	res := Result{Check: check, Outcome: outcome, Detail: fmt.Sprintf(format, args...), Duration: d}
	s.report.Results = append(s.report.Results, res)
	if s.opts.Progress != nil {
		s.opts.Progress(res)
	}
}

// timed runs fn and records its result: nil passes, errSkip skips, anything else
// fails with the error as detail.
func (s *suite) timed(check string, fn func() (string, error)) {
	start := time.Now()
	detail, err := fn()
	var skip *skipError
	switch {
	case errors.As(err, &skip):
		s.record(check, Skip, time.Since(start), "%s", skip.reason)
	case err != nil:
		s.record(check, Fail, time.Since(start), "%v", err)
	default:
		s.record(check, Pass, time.Since(start), "%s", detail)
	}
}

type skipError struct{ reason string }

func (e *skipError) Error() string { return e.reason }

func skip(format string, args ...any) error { return &skipError{fmt.Sprintf(format, args...)} }

func (s *suite) run(wasm []byte) {
	in, err := s.host.Inspect(s.ctx, wasm, s.opts.Manifest)
	if err != nil {
		s.record("load: module", Fail, 0, "%v", err)
		return
	}
	s.report.SHA256 = in.SHA256
	if in.Descriptor == nil {
		s.record("load: describe", Fail, 0, "%v", in.DescribeErr)
		return
	}
	s.desc = *in.Descriptor
	s.report.Plugin, s.report.Version = s.desc.Name, s.desc.Version
	s.record("load: describe", Pass, 0, "abi %d, %d models, %d tools, %d handlers", s.desc.ABI, len(s.desc.Models), len(s.desc.Tools), len(s.desc.Handlers))
	if !s.checkDescriptor(in) {
		return
	}
	p, err := s.host.Load(s.ctx, wasm, s.opts.Manifest)
	if err != nil {
		s.record("load: into a host", Fail, 0, "%v", err)
		return
	}
	s.plugin = p
	s.record("load: into a host", Pass, 0, "registered %v", p.Keys())
	for _, t := range s.desc.Tools {
		s.checkTool(t)
	}
	if len(s.desc.Tools) > 0 {
		s.checkUnknownTool()
	}
	for _, m := range s.desc.Models {
		s.checkModel(m)
	}
	for _, hd := range s.desc.Handlers {
		s.checkHandler(hd)
	}
	s.checkRobustness(in)
	s.checkCapabilities()
}

// checkDescriptor files the descriptor's problems by category; it reports whether the
// plugin can be loaded at all.
func (s *suite) checkDescriptor(in *host.Inspection) bool {
	byCat := map[string][]string{}
	for _, p := range host.DescriptorProblems(&s.desc) {
		byCat[p.Category] = append(byCat[p.Category], p.Message)
	}
	ok := true
	for _, cat := range []string{host.ProblemABI, host.ProblemNames, host.ProblemSchemas, host.ProblemPoints, host.ProblemCapabilities} {
		if msgs := byCat[cat]; len(msgs) > 0 {
			ok = false
			s.record("descriptor: "+cat, Fail, 0, "%s", joinLines(msgs))
		} else {
			s.record("descriptor: "+cat, Pass, 0, "")
		}
	}
	exports := map[string]bool{}
	for _, e := range in.Exports {
		exports[e] = true
	}
	var missing []string
	for _, k := range []struct {
		declared bool
		export   string
	}{{len(s.desc.Models) > 0, plugin.ExportGenerate}, {len(s.desc.Tools) > 0, plugin.ExportCallTool}, {len(s.desc.Handlers) > 0, plugin.ExportHandle}} {
		if k.declared && !exports[k.export] {
			missing = append(missing, k.export)
		}
	}
	if len(missing) > 0 {
		ok = false
		s.record("descriptor: exports", Fail, 0, "the descriptor needs %v, which the module does not export", missing)
	} else {
		s.record("descriptor: exports", Pass, 0, "")
	}
	if !ok {
		s.record("load: into a host", Skip, 0, "the descriptor is invalid; the plugin cannot be loaded")
	}
	return ok
}

// session returns a context bound to a fresh session, and the session: plugins that
// touch the state need one.
func (s *suite) session() (context.Context, *session.Session[map[string]any]) {
	sess := session.New("conformance", &session.SessionState[map[string]any]{
		Custom:   map[string]any{},
		Messages: []*abi.Message{abi.NewUserTextMessage("My name is Ada and I live in Lisbon. I like maps.")},
	})
	return agent.NewSessionContext(s.ctx, sess), sess
}

// fault reports whether err is the plugin failing (a trap, a timeout, memory, bad
// output) rather than answering with an error.
func fault(err error) bool { return errors.Is(err, host.ErrPluginFault) }

// checkState checks the session's state against the plugin's declared state schema.
func (s *suite) checkState(sess *session.Session[map[string]any]) error {
	raw, err := sess.CustomJSON()
	if err != nil {
		return fmt.Errorf("the state is no longer valid JSON: %w", err)
	}
	if s.desc.Capabilities.StateSchema == nil {
		return nil
	}
	v, err := schema.Compile(s.desc.Capabilities.StateSchema)
	if err != nil {
		return err
	}
	if err := v.ValidateJSON(raw); err != nil {
		return fmt.Errorf("the state no longer matches the declared state schema: %v (state: %s)", err, truncate(string(raw), 200))
	}
	return nil
}

func (s *suite) checkTool(def *abi.ToolDefinition) {
	name := "tool " + def.Name
	tool, err := s.reg.LookupTool(s.desc.Name + "/" + def.Name)
	if err != nil {
		s.record(name, Fail, 0, "not in the registry: %v", err)
		return
	}
	in, err := schema.Compile(def.InputSchema)
	if err != nil {
		s.record(name+": input schema", Fail, 0, "%v", err)
		return
	}
	out, err := schema.Compile(def.OutputSchema)
	if err != nil {
		s.record(name+": output schema", Fail, 0, "%v", err)
		return
	}
	for _, smp := range instance.Valid(def.InputSchema) {
		s.timed(fmt.Sprintf("%s: valid input (%s)", name, smp.What), func() (string, error) {
			if err := in.Validate(smp.Value); err != nil {
				return "", skip("cannot generate a valid input from the schema: %v", err)
			}
			ctx, sess := s.session()
			output, err := tool.Run(ctx, smp.Value)
			var ie *agent.InterruptError
			var ae *abi.Error
			switch {
			case errors.As(err, &ie):
				return "interrupted, asking for outside input", nil
			case fault(err):
				return "", err
			case errors.As(err, &ae) && (ae.Code == abi.CodeInvalidInput || ae.Code == abi.CodeInternal):
				b, _ := json.Marshal(smp.Value)
				return "", fmt.Errorf("answered an input its schema allows with %s: %s (input: %s); "+
					"a tool must take every input its schema allows: narrow the schema (enum, pattern, bounds) or give examples of meaningful values", ae.Code, ae.Message, b)
			case errors.As(err, &ae):
				if err := s.checkState(sess); err != nil {
					return "", err
				}
				return fmt.Sprintf("answered with an error (%s): %s", ae.Code, truncate(ae.Message, 120)), nil
			case err != nil:
				return "", err
			}
			if err := out.Validate(output); err != nil {
				b, _ := json.Marshal(output)
				return "", fmt.Errorf("the output does not match the output schema: %v (output: %s)", err, truncate(string(b), 200))
			}
			if err := s.checkState(sess); err != nil {
				return "", err
			}
			b, _ := json.Marshal(output)
			return "output " + truncate(string(b), 120), nil
		})
	}
	invalid := instance.Invalid(def.InputSchema)
	if len(invalid) == 0 {
		s.record(name+": invalid input", Skip, 0, "the input schema constrains nothing")
	}
	for _, smp := range invalid {
		s.timed(fmt.Sprintf("%s: invalid input (%s)", name, smp.What), func() (string, error) {
			if in.Validate(smp.Value) == nil {
				return "", skip("the generated input is valid after all")
			}
			// Sent straight to the plugin: Terrarium would refuse it first, another
			// host might not.
			ctx, _ := s.session()
			output, err := tool.Run(ctx, smp.Value)
			var ae *abi.Error
			switch {
			case fault(err):
				return "", err
			case errors.As(err, &ae):
				return fmt.Sprintf("refused with %s", ae.Code), nil
			case err != nil:
				return "", err
			}
			b, _ := json.Marshal(output)
			return "", fmt.Errorf("accepted an input its schema forbids (output %s)", truncate(string(b), 120))
		})
	}
}

func (s *suite) checkUnknownTool() {
	s.timed("tool: unknown name", func() (string, error) {
		input, _ := json.Marshal(plugin.ToolInput{Tool: "no-such-tool-" + s.desc.Name, Input: map[string]any{}})
		_, err := s.plugin.Call(s.ctx, plugin.ExportCallTool, input)
		var ae *abi.Error
		switch {
		case err == nil:
			return "", fmt.Errorf("answered a call of a tool it does not have")
		case fault(err):
			return "", err
		case errors.As(err, &ae):
			return fmt.Sprintf("refused with %s", ae.Code), nil
		}
		return "", err
	})
}

func (s *suite) checkHandler(hd plugin.HandlerDescriptor) {
	h, err := s.reg.LookupHandler(s.desc.Name + "/" + hd.Name)
	if err != nil {
		s.record("handler "+hd.Name, Fail, 0, "not in the registry: %v", err)
		return
	}
	for _, point := range hd.Points {
		s.timed(fmt.Sprintf("handler %s: at %s", hd.Name, point), func() (string, error) {
			ctx, sess := s.session()
			in := &abi.HandlerInput{Point: point, Turn: 0, Input: sess.Messages()}
			if point == abi.HookAfterGenerate || point == abi.HookTurnEnd {
				in.Response = &abi.GenerateResponse{Message: abi.NewModelTextMessage("Nice to meet you, Ada."), FinishReason: abi.FinishStop}
			}
			d, err := h.Handle(ctx, in)
			if err != nil {
				var ae *abi.Error
				if !fault(err) && errors.As(err, &ae) && ae.Code == abi.CodePermissionDenied {
					return "", skip("the manifest does not grant what the handler needs: %v", ae.Message)
				}
				return "", err // a handler errors only when something is wrong
			}
			if err := s.checkState(sess); err != nil {
				return "", err
			}
			raw, _ := sess.CustomJSON()
			return fmt.Sprintf("directive %s; state %s", d.Action, truncate(string(raw), 100)), nil
		})
	}
}

// checkRobustness sends every export bad input: each must answer with an error (or, for
// describe, which takes no input, ignore it), never trap.
func (s *suite) checkRobustness(in *host.Inspection) {
	valid := map[string][]byte{plugin.ExportDescribe: nil}
	if len(s.desc.Tools) > 0 {
		valid[plugin.ExportCallTool], _ = json.Marshal(plugin.ToolInput{Tool: s.desc.Tools[0].Name, Input: map[string]any{}})
	}
	if len(s.desc.Models) > 0 {
		valid[plugin.ExportGenerate], _ = json.Marshal(plugin.GenerateInput{Model: s.desc.Models[0].Name, Request: &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("hi")}}})
	}
	if len(s.desc.Handlers) > 0 {
		valid[plugin.ExportHandle], _ = json.Marshal(abi.HandlerInput{Handler: s.desc.Handlers[0].Name, Point: abi.HookTurnStart})
	}
	for _, export := range []string{plugin.ExportDescribe, plugin.ExportCallTool, plugin.ExportGenerate, plugin.ExportHandle} {
		good, ok := valid[export]
		if !ok {
			continue
		}
		truncated := good
		if len(truncated) > 2 {
			truncated = truncated[:len(truncated)/2]
		} else {
			truncated = []byte(`{"tool":`)
		}
		for _, c := range []struct {
			what  string
			input []byte
		}{
			{"empty input", nil},
			{"truncated input", truncated},
			{"garbage input", garbage(512)},
			{"JSON of the wrong shape", []byte(`[1, "two", {"three": null}]`)},
		} {
			s.timed(fmt.Sprintf("robustness: %s with %s", export, c.what), func() (string, error) {
				ctx, _ := s.session()
				out, err := s.plugin.Call(ctx, export, c.input)
				var ae *abi.Error
				switch {
				case err == nil && export == plugin.ExportDescribe:
					return "answered (describe takes no input)", nil
				case err == nil:
					return "", fmt.Errorf("answered %s with %s; bad input must be refused with a protocol error (invalid_input)", c.what, truncate(string(out), 120))
				case fault(err):
					return "", err
				case errors.As(err, &ae):
					return "refused with " + string(ae.Code), nil
				}
				return "", err
			})
		}
	}
}

// garbage returns n deterministic bytes that are not JSON.
func garbage(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	b[0] = 0xff
	return b
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func joinLines(msgs []string) string {
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += "; "
		}
		out += m
	}
	return out
}
