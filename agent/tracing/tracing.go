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
	"strconv"
	"sync"
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
	// What Start records, handed to the span with End's attributes in one call: the SDK
	// grows a span's attributes at each call, by half again, so two calls allocate them
	// twice over. Kept here, in the value, it costs no allocation of its own.
	name, path, input string
	kind              Kind
	root, started     bool
}

// attrBufs holds the slices End hands a span's attributes in: the span copies them.
var attrBufs = sync.Pool{New: func() any { return new([8]attribute.KeyValue) }}

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
	// The attributes go to the span when it ends, with End's, in one call (see Span);
	// the input is encoded now, as it is when the call starts.
	rec := Span{span: span, name: name, kind: kind, path: path, root: parent == "", started: true}
	if input != nil {
		rec.input = encode(input)
	}
	return ctx, rec
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
		buf := attrBufs.Get().(*[8]attribute.KeyValue)
		attrs := buf[:0]
		if s.started {
			attrs = append(attrs,
				attribute.String(AttrName, s.name),
				attribute.String(AttrType, s.kind.Type),
				attribute.String(AttrPath, s.path))
			if s.kind.Subtype != "" {
				attrs = append(attrs, attribute.String(AttrSubtype, s.kind.Subtype))
			}
			if s.root {
				attrs = append(attrs, attribute.Bool(AttrIsRoot, true))
			}
			if s.input != "" {
				attrs = append(attrs, attribute.String(AttrInput, s.input))
			}
		}
		if err != nil {
			attrs = append(attrs, attribute.String(AttrState, "error"))
		} else {
			attrs = append(attrs, attribute.String(AttrState, "success"))
			if output != nil {
				attrs = append(attrs, attribute.String(AttrOutput, encode(output)))
			}
		}
		s.span.SetAttributes(attrs...)
		*buf = [8]attribute.KeyValue{}
		attrBufs.Put(buf)
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

// encode is the JSON of what a span records of v (see appendView), cut at
// MaxValueBytes, or a JSON string saying why it has none: a trace must not fail a call.
func encode(v any) string {
	var b []byte
	var err error
	switch v.(type) {
	case *abi.GenerateRequest, *abi.GenerateActionOptions, *abi.GenerateResponse:
		// Written in a reused buffer, then copied at its size.
		buf := encodeBufs.Get().(*[]byte)
		defer func() {
			if cap(*buf) <= 64<<10 {
				encodeBufs.Put(buf)
			}
		}()
		if *buf, err = appendView((*buf)[:0], v); err == nil {
			return cut(*buf, true)
		}
	default:
		// encoding/json's output is already a copy at its size.
		if b, err = json.Marshal(view(v)); err == nil {
			return cut(b, false)
		}
	}
	b, _ = json.Marshal("not encodable as JSON: " + err.Error())
	return cut(b, false)
}

// encodeBufs holds the buffers encode writes the views of Genkit's shape in.
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// cut returns b, cut at MaxValueBytes at a character boundary, as a string: a copy of
// it when b is to be reused, else b itself, never written again.
func cut(b []byte, reused bool) string {
	if len(b) > MaxValueBytes {
		n := MaxValueBytes
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		b = b[:n]
	}
	if reused || len(b) == 0 {
		return string(b)
	}
	return unsafe.String(&b[0], len(b))
}

// view is what a span records of a value not of Genkit's shape: a Viewer's view, or v.
func view(v any) any {
	if v, ok := v.(Viewer); ok {
		return v.TraceView()
	}
	return v
}

// appendView appends what a span records of v: a request or a generate call with only
// its newest messages (Tail) and the tools it offers by name, a response without the
// request it repeats, a Viewer's view, or v. Those of Genkit's shape are written out,
// member by member in their fields' order, as encoding/json would write them: they are
// what every model call records, and encoding/json would reflect over them and re-read
// the bytes of each message.
func appendView(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case *abi.GenerateRequest:
		if v != nil {
			return appendRequest(b, v)
		}
	case *abi.GenerateActionOptions:
		if v != nil {
			return appendOptions(b, v)
		}
	case *abi.GenerateResponse:
		if v != nil {
			return appendResponse(b, v)
		}
	}
	return appendJSON(b, view(v))
}

// appendRequest writes a model request, Genkit's GenerateRequest, its messages cut
// (Tail) and its tools by name and description only: their schemas do not change from
// call to call and cost more to encode than the rest of a request.
func appendRequest(b []byte, r *abi.GenerateRequest) ([]byte, error) {
	o := object{b: append(b, '{')}
	o.messages("messages", Tail(r.Messages))
	if r.Config != nil {
		o.value("config", r.Config)
	}
	if len(r.Tools) > 0 {
		o.key("tools")
		o.b = append(o.b, '[')
		for i, t := range r.Tools {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = append(o.b, `{"name":`...)
			o.b = abi.AppendJSONString(o.b, t.Name)
			o.b = append(o.b, `,"description":`...)
			o.b = abi.AppendJSONString(o.b, t.Description)
			o.b = append(o.b, '}')
		}
		o.b = append(o.b, ']')
	}
	o.str("toolChoice", string(r.ToolChoice))
	if r.Output != nil {
		o.value("output", r.Output)
	}
	if len(r.Docs) > 0 {
		o.value("docs", r.Docs)
	}
	return o.close()
}

// appendOptions writes a generate call, Genkit's GenerateActionOptions, its messages
// cut (Tail).
func appendOptions(b []byte, g *abi.GenerateActionOptions) ([]byte, error) {
	o := object{b: append(b, '{')}
	o.str("model", g.Model)
	if len(g.Docs) > 0 {
		o.value("docs", g.Docs)
	}
	o.messages("messages", Tail(g.Messages))
	if len(g.Tools) > 0 {
		o.key("tools")
		o.b = append(o.b, '[')
		for i, t := range g.Tools {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = abi.AppendJSONString(o.b, t)
		}
		o.b = append(o.b, ']')
	}
	o.str("toolChoice", string(g.ToolChoice))
	if g.Config != nil {
		o.value("config", g.Config)
	}
	if g.Output != nil {
		o.value("output", g.Output)
	}
	if g.Resume != nil {
		o.value("resume", g.Resume)
	}
	if g.ReturnToolRequests {
		o.key("returnToolRequests")
		o.b = append(o.b, "true"...)
	}
	if g.MaxTurns != 0 {
		o.key("maxTurns")
		o.b = strconv.AppendInt(o.b, int64(g.MaxTurns), 10)
	}
	return o.close()
}

// appendResponse writes a model's response without the request it repeats.
func appendResponse(b []byte, r *abi.GenerateResponse) ([]byte, error) {
	o := object{b: append(b, '{')}
	if r.Message != nil && o.err == nil {
		o.key("message")
		o.b, o.err = r.Message.AppendJSON(o.b)
	}
	o.str("finishReason", string(r.FinishReason))
	o.str("finishMessage", r.FinishMessage)
	if r.LatencyMs != 0 {
		o.value("latencyMs", r.LatencyMs)
	}
	if r.Usage != nil {
		o.value("usage", r.Usage)
	}
	if r.Custom != nil {
		o.value("custom", r.Custom)
	}
	return o.close()
}

// object writes a JSON object member by member; the caller leaves out what omitempty
// would.
type object struct {
	b    []byte
	err  error // the first encoding's failure
	more bool
}

// key starts a member; k is a field's name, which needs no escaping.
func (o *object) key(k string) {
	if o.more {
		o.b = append(o.b, ',')
	}
	o.more = true
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, `":`...)
}

// str writes a string member, left out when empty.
func (o *object) str(k, s string) {
	if s != "" {
		o.key(k)
		o.b = abi.AppendJSONString(o.b, s)
	}
}

// value writes a member as encoding/json encodes it.
func (o *object) value(k string, v any) {
	if o.err == nil {
		o.key(k)
		o.b, o.err = appendJSON(o.b, v)
	}
}

// messages writes a list of messages, [] when there are none.
func (o *object) messages(k string, msgs []*abi.Message) {
	o.key(k)
	if o.err == nil {
		o.b, o.err = abi.AppendJSONArray(o.b, msgs)
	}
}

func (o *object) close() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return append(o.b, '}'), nil
}

// appendJSON appends v as encoding/json encodes it.
func appendJSON(b []byte, v any) ([]byte, error) {
	q, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, q...), nil
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
