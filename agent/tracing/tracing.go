// Package tracing records OpenTelemetry spans with the attributes Genkit's trace tooling
// reads (genkit:name, genkit:type, genkit:metadata:subtype, genkit:path, genkit:input,
// genkit:output, genkit:state, genkit:isRoot), so Genkit's Developer UI and CLI can show
// Terrarium's traces: a generate call, each model and tool call inside it, a session
// flow's connection with its session and snapshots.
//
// Spans go to the global TracerProvider (otel.SetTracerProvider). Tracing costs nothing
// when nothing records: while no provider is installed (or a no-op one is) and the
// context carries no recording span, Start allocates nothing and returns the context as
// it was. When a span records, its input and output are encoded once, as bounded views
// (see MaxValueBytes and TailMessages), so a span's cost does not grow with a
// conversation's history.
package tracing

import (
	"context"
	"encoding/json"
	"reflect"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/terrarium-ai/terrarium/abi"
)

// TracerName is the instrumentation name of Terrarium's spans.
const TracerName = "github.com/terrarium-ai/terrarium"

// MaxValueBytes caps the JSON of genkit:input and genkit:output: a longer encoding is cut
// there (at a character boundary, so the attribute is valid UTF-8 but no longer valid
// JSON). It is Genkit's own cap on these attributes (MaxLogContentLength in Genkit Go's
// googlecloud plugin, MAX_LOG_CONTENT_CHARS in Genkit JS: 128,000).
const MaxValueBytes = 128_000

// TailMessages is how many of its newest messages a traced request, generate call or
// session state keeps (see Tail).
const TailMessages = 8

// Kind is what a span records, as Genkit's genkit:type and genkit:metadata:subtype say.
type Kind struct {
	Type, Subtype string
}

// The kinds of spans Terrarium records.
var (
	// Util is a whole generate call (Genkit's "generate" utility).
	Util = Kind{"util", "util"}
	// Model is one call of a model.
	Model = Kind{"action", "model"}
	// Tool is one call of a tool.
	Tool = Kind{"action", "tool"}
	// Flow is a flow, bidirectional flow or session flow, for its connection's life.
	Flow = Kind{"action", "flow"}
	// SessionFlow is a session flow's connection.
	SessionFlow = Kind{"action", "session-flow"}
	// Handler is one call of a turn handler.
	Handler = Kind{"action", "handler"}
	// Step is a step inside a flow (a turn, say).
	Step = Kind{"flowStep", ""}
)

// The attribute keys.
const (
	AttrName     = "genkit:name"
	AttrType     = "genkit:type"
	AttrSubtype  = "genkit:metadata:subtype"
	AttrPath     = "genkit:path"
	AttrInput    = "genkit:input"
	AttrOutput   = "genkit:output"
	AttrState    = "genkit:state"
	AttrIsRoot   = "genkit:isRoot"
	MetadataBase = "genkit:metadata:"
)

type pathKey struct{}

// Span is a span started by Start. Its zero value, what Start returns when nothing
// records, does nothing.
type Span struct {
	span trace.Span
	rec  *record // Start's attributes, for End; nil for a span from FromContext
}

// record holds a recording span's attributes from Start to End, which hands them to the
// span in one call: the SDK grows a span's attributes at each call, by half again, so
// two calls allocate them twice over.
type record struct {
	attrs [8]attribute.KeyValue // Start's at most 6, End's at most 2
	n     int
}

func (r *record) add(kv attribute.KeyValue) {
	r.attrs[r.n] = kv
	r.n++
}

// Viewer is implemented by an input or output too large to trace whole (a state holding
// a conversation, say): a span records the value TraceView returns instead, which is
// computed only when the span records.
type Viewer interface {
	TraceView() any
}

// provider is what Start knows of the global TracerProvider, recomputed when it changes.
type provider struct {
	tp     trace.TracerProvider
	tracer trace.Tracer
	off    bool // nothing it makes records
}

var current atomic.Pointer[provider]

// tracer returns the tracer of the global provider, or nil when that provider records
// nothing: OpenTelemetry's placeholder before any provider is installed, or a no-op one.
func tracer() trace.Tracer {
	tp := otel.GetTracerProvider()
	if p := current.Load(); p != nil && reflect.TypeOf(tp).Comparable() && p.tp == tp {
		if p.off {
			return nil
		}
		return p.tracer
	}
	t := tp.Tracer(TracerName)
	p := &provider{tp: tp, tracer: t, off: isNoop(t)}
	current.Store(p)
	if p.off {
		return nil
	}
	return t
}

// isNoop reports whether t can never record: a no-op tracer, or the global placeholder's
// own tracer, which it hands out only while no provider is installed (once one is, the
// placeholder hands out that provider's tracers instead).
func isNoop(t trace.Tracer) bool {
	if _, ok := t.(noop.Tracer); ok {
		return true
	}
	rt := reflect.TypeOf(t)
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	return rt.PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// Start starts a span named name of the given kind, recording input, as a child of the
// span in ctx. The returned context carries it, and its Genkit path, to children. When
// nothing would record the span, it returns ctx itself and a Span that does nothing,
// having built nothing.
func Start(ctx context.Context, name string, kind Kind, input any) (context.Context, Span) {
	t := tracer()
	if t == nil {
		parent := trace.SpanFromContext(ctx)
		if !parent.IsRecording() {
			return ctx, Span{}
		}
		// The parent records, through a provider since replaced by a no-op one: its
		// children go to the same provider.
		t = parent.TracerProvider().Tracer(TracerName)
	}
	ctx, span := t.Start(ctx, name)
	if !span.IsRecording() {
		return ctx, Span{span: span}
	}
	parent, _ := ctx.Value(pathKey{}).(string)
	path := segment(name, kind)
	if parent != "" {
		path = parent + path
	}
	ctx = context.WithValue(ctx, pathKey{}, path)
	// The attributes go to the span when it ends, with End's, in one call (see record);
	// the input is encoded now, as it is when the call starts.
	rec := &record{}
	rec.add(attribute.String(AttrName, name))
	rec.add(attribute.String(AttrType, kind.Type))
	rec.add(attribute.String(AttrPath, path))
	if kind.Subtype != "" {
		rec.add(attribute.String(AttrSubtype, kind.Subtype))
	}
	if parent == "" {
		rec.add(attribute.Bool(AttrIsRoot, true))
	}
	if input != nil {
		rec.add(attribute.String(AttrInput, encode(input)))
	}
	return ctx, Span{span: span, rec: rec}
}

// segment is the span's part of a Genkit path: {name,t:type,s:subtype}, or
// {name,t:flow} and {name,t:util} for those subtypes, as Genkit writes them.
func segment(name string, k Kind) string {
	switch {
	case k.Subtype == "flow" || k.Subtype == "util":
		return "/{" + name + ",t:" + k.Subtype + "}"
	case k.Subtype != "":
		return "/{" + name + ",t:" + k.Type + ",s:" + k.Subtype + "}"
	default:
		return "/{" + name + ",t:" + k.Type + "}"
	}
}

// Recording reports whether the span records: whether what is set on it is kept.
func (s Span) Recording() bool { return s.span != nil && s.span.IsRecording() }

// SetMetadata records genkit:metadata:<key> on the span.
func (s Span) SetMetadata(key, value string) {
	if s.Recording() {
		s.span.SetAttributes(attribute.String(MetadataBase+key, value))
	}
}

// End ends the span with the operation's output, or its error.
func (s Span) End(output any, err error) {
	if s.span == nil {
		return
	}
	if s.span.IsRecording() {
		rec := s.rec
		if rec == nil {
			rec = &record{}
		}
		if err != nil {
			rec.add(attribute.String(AttrState, "error"))
		} else {
			rec.add(attribute.String(AttrState, "success"))
			if output != nil {
				rec.add(attribute.String(AttrOutput, encode(output)))
			}
		}
		s.span.SetAttributes(rec.attrs[:rec.n]...)
		if err != nil {
			s.span.RecordError(err)
			s.span.SetStatus(codes.Error, err.Error())
		}
	}
	s.span.End()
}

// FromContext returns the span in ctx, to add metadata to it: one that does nothing
// when ctx carries none that records.
func FromContext(ctx context.Context) Span {
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		return Span{span: s}
	}
	return Span{}
}

// encode is the JSON of v's view (see view), cut at MaxValueBytes, or a JSON string
// saying why it has none: a trace must not fail a call.
func encode(v any) string {
	b, err := json.Marshal(view(v))
	if err != nil {
		b, _ = json.Marshal("not encodable as JSON: " + err.Error())
	}
	if len(b) > MaxValueBytes {
		n := MaxValueBytes
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		b = b[:n]
	}
	if len(b) == 0 {
		return ""
	}
	// b is the encoder's fresh copy, never written again: it is the string, without a
	// second copy.
	return unsafe.String(&b[0], len(b))
}

// view is what a span records of v: a request or a generate call with only its newest
// messages (Tail), a response without the request it repeats, a Viewer's view, or v.
func view(v any) any {
	switch v := v.(type) {
	case Viewer:
		return v.TraceView()
	case *abi.GenerateRequest:
		if v == nil {
			return v
		}
		return &requestView{Messages: Tail(v.Messages), Config: v.Config, Tools: toolViews(v.Tools),
			ToolChoice: v.ToolChoice, Output: v.Output, Docs: v.Docs}
	case *abi.GenerateActionOptions:
		if v == nil {
			return v
		}
		return &optionsView{Model: v.Model, Docs: v.Docs, Messages: Tail(v.Messages), Tools: v.Tools, ToolChoice: v.ToolChoice,
			Config: v.Config, Output: v.Output, Resume: v.Resume, ReturnToolRequests: v.ReturnToolRequests, MaxTurns: v.MaxTurns}
	case *abi.GenerateResponse:
		if v == nil || v.Request == nil {
			return v
		}
		c := *v
		c.Request = nil
		return &c
	}
	return v
}

// requestView is what a span records of a model request: Genkit's GenerateRequest, its
// messages cut (Tail) and its tools named, encoded in one pass (abi.GenerateRequest's
// own encoding goes through a copy of itself).
type requestView struct {
	Messages   []*abi.Message    `json:"messages"`
	Config     any               `json:"config,omitempty"`
	Tools      []toolView        `json:"tools,omitzero"`
	ToolChoice abi.ToolChoice    `json:"toolChoice,omitempty"`
	Output     *abi.OutputConfig `json:"output,omitempty"`
	Docs       []*abi.Document   `json:"docs,omitempty"`
}

// optionsView is what a span records of a generate call: Genkit's
// GenerateActionOptions, its messages cut (Tail), encoded in one pass.
type optionsView struct {
	Model              string                          `json:"model,omitempty"`
	Docs               []*abi.Document                 `json:"docs,omitempty"`
	Messages           []*abi.Message                  `json:"messages"`
	Tools              []string                        `json:"tools,omitempty"`
	ToolChoice         abi.ToolChoice                  `json:"toolChoice,omitempty"`
	Config             any                             `json:"config,omitempty"`
	Output             *abi.GenerateActionOutputConfig `json:"output,omitempty"`
	Resume             *abi.Resume                     `json:"resume,omitempty"`
	ReturnToolRequests bool                            `json:"returnToolRequests,omitempty"`
	MaxTurns           int                             `json:"maxTurns,omitempty"`
}

// toolView is what a span records of a tool a request offers: its name and
// description, without its schemas, which do not change from call to call and cost
// more to encode than the rest of a request.
type toolView struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func toolViews(defs []*abi.ToolDefinition) []toolView {
	if len(defs) == 0 {
		return nil
	}
	out := make([]toolView, len(defs))
	for i, d := range defs {
		out[i] = toolView{d.Name, d.Description}
	}
	return out
}

// Tail is what a span records of a conversation, so that a span's cost does not grow
// with the history: its first message if that is a system message (the prompt's
// instructions), then the messages since the model last spoke (the user's input, or the
// tool responses, that the next model call answers; at least the last message), at most
// TailMessages in all, the newest kept.
func Tail(msgs []*abi.Message) []*abi.Message {
	start := len(msgs)
	for start > 0 && msgs[start-1].Role != abi.RoleModel {
		start--
	}
	if start == len(msgs) && start > 0 {
		start--
	}
	head := 0
	if len(msgs) > 0 && msgs[0].Role == abi.RoleSystem {
		head = 1
	}
	start = max(start, head, len(msgs)-(TailMessages-head))
	if start == head {
		return msgs
	}
	out := make([]*abi.Message, 0, head+len(msgs)-start)
	out = append(out, msgs[:head]...)
	return append(out, msgs[start:]...)
}
