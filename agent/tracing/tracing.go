// Package tracing records OpenTelemetry spans with the attributes Genkit's trace tooling
// reads (genkit:name, genkit:type, genkit:metadata:subtype, genkit:path, genkit:input,
// genkit:output, genkit:state, genkit:isRoot), so Genkit's Developer UI and CLI can show
// Terrarium's traces: a generate call, each model and tool call inside it, a session
// flow's connection with its session and snapshots.
//
// Spans go to the global TracerProvider (otel.SetTracerProvider). Inputs and outputs are
// encoded as JSON only when a span is recording, so tracing costs next to nothing when
// no provider is installed.
package tracing

import (
	"context"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation name of Terrarium's spans.
const TracerName = "github.com/terrarium-ai/terrarium"

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

// Span is a span started by Start.
type Span struct {
	span trace.Span
}

// Start starts a span named name of the given kind, recording input, as a child of the
// span in ctx. The returned context carries it, and its Genkit path, to children.
func Start(ctx context.Context, name string, kind Kind, input any) (context.Context, *Span) {
	parent, _ := ctx.Value(pathKey{}).(string)
	path := parent + segment(name, kind)
	ctx, span := otel.Tracer(TracerName).Start(ctx, name)
	ctx = context.WithValue(ctx, pathKey{}, path)
	if !span.IsRecording() {
		return ctx, &Span{span: span}
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrName, name),
		attribute.String(AttrType, kind.Type),
		attribute.String(AttrPath, path),
	}
	if kind.Subtype != "" {
		attrs = append(attrs, attribute.String(AttrSubtype, kind.Subtype))
	}
	if parent == "" {
		attrs = append(attrs, attribute.Bool(AttrIsRoot, true))
	}
	if input != nil {
		attrs = append(attrs, attribute.String(AttrInput, encode(input)))
	}
	span.SetAttributes(attrs...)
	return ctx, &Span{span: span}
}

// segment is the span's part of a Genkit path: {name,t:type,s:subtype}, or
// {name,t:flow} and {name,t:util} for those subtypes, as Genkit writes them.
func segment(name string, k Kind) string {
	var b strings.Builder
	b.WriteString("/{")
	b.WriteString(name)
	switch {
	case k.Subtype == "flow" || k.Subtype == "util":
		b.WriteString(",t:" + k.Subtype)
	case k.Subtype != "":
		b.WriteString(",t:" + k.Type + ",s:" + k.Subtype)
	default:
		b.WriteString(",t:" + k.Type)
	}
	b.WriteString("}")
	return b.String()
}

// SetMetadata records genkit:metadata:<key> on the span.
func (s *Span) SetMetadata(key, value string) {
	s.span.SetAttributes(attribute.String(MetadataBase+key, value))
}

// End ends the span with the operation's output, or its error.
func (s *Span) End(output any, err error) {
	if s.span.IsRecording() {
		if err != nil {
			s.span.SetAttributes(attribute.String(AttrState, "error"))
			s.span.RecordError(err)
			s.span.SetStatus(codes.Error, err.Error())
		} else {
			s.span.SetAttributes(attribute.String(AttrState, "success"))
			if output != nil {
				s.span.SetAttributes(attribute.String(AttrOutput, encode(output)))
			}
		}
	}
	s.span.End()
}

// encode is v as JSON, or a JSON string saying why it has none: a trace must not fail
// a call.
func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal("not encodable as JSON: " + err.Error())
	}
	return string(b)
}

// FromContext returns the span in ctx (a span that records nothing when there is none),
// to add metadata to it.
func FromContext(ctx context.Context) *Span {
	return &Span{span: trace.SpanFromContext(ctx)}
}
