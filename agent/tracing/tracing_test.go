package tracing_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/tracing"
)

// startAndEnd is one traced operation as Terrarium's callers trace one.
func startAndEnd(ctx context.Context, req *abi.GenerateRequest, resp *abi.GenerateResponse) {
	ctx, span := tracing.Start(ctx, "m", tracing.Model, req)
	tracing.FromContext(ctx).SetMetadata("k", "v")
	span.End(resp, nil)
}

// TestNothingRecordsNothingAllocated must run first in this package: it is the only
// time the global provider is OpenTelemetry's placeholder without a delegate (a test
// that installs a provider and puts the placeholder back leaves it delegating).
func TestNothingRecordsNothingAllocated(t *testing.T) {
	req := &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("hi")}}
	resp := &abi.GenerateResponse{Message: abi.NewModelTextMessage("hello")}
	ctx := context.Background()
	check := func(t *testing.T) {
		if got, _ := tracing.Start(ctx, "m", tracing.Model, req); got != ctx {
			t.Error("Start returned a new context though nothing records")
		}
		if n := testing.AllocsPerRun(100, func() { startAndEnd(ctx, req, resp) }); n != 0 {
			t.Errorf("a span nothing records cost %v allocations, want 0", n)
		}
	}
	t.Run("no provider", check)
	t.Run("no-op provider", func(t *testing.T) {
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(noop.NewTracerProvider())
		defer otel.SetTracerProvider(prev)
		check(t)
	})
}

// record installs a recording provider for the test and returns what it records.
func record(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec
}

// attrs returns the attributes of the span named name.
func attrs(t *testing.T, rec *tracetest.SpanRecorder, name string) map[string]string {
	t.Helper()
	for _, s := range rec.Ended() {
		if s.Name() == name {
			m := map[string]string{}
			for _, kv := range s.Attributes() {
				m[string(kv.Key)] = kv.Value.Emit()
			}
			return m
		}
	}
	t.Fatalf("no span %q ended", name)
	return nil
}

// conversation is a system prompt and turns of a user's question and a model's answer.
func conversation(turns int) []*abi.Message {
	msgs := []*abi.Message{abi.NewSystemTextMessage("be brief")}
	for i := range turns {
		msgs = append(msgs, abi.NewUserTextMessage(fmt.Sprint("question ", i)), abi.NewModelTextMessage(fmt.Sprint("answer ", i)))
	}
	return msgs
}

func TestModelSpanRecordsTheNewestMessagesOnly(t *testing.T) {
	rec := record(t)
	msgs := append(conversation(500), abi.NewUserTextMessage("the new question"))
	req := &abi.GenerateRequest{Messages: msgs, Config: map[string]any{"temperature": 0.5}, ToolChoice: abi.ToolChoiceAuto,
		Output: &abi.OutputConfig{Format: "json"}, Docs: []*abi.Document{{Content: []*abi.Part{abi.NewTextPart("doc")}}},
		Tools: []*abi.ToolDefinition{{Name: "add", Description: "adds", InputSchema: map[string]any{"type": "object"}}}}
	resp := &abi.GenerateResponse{Message: abi.NewModelTextMessage("the answer"), Request: req}
	_, span := tracing.Start(context.Background(), "m", tracing.Model, req)
	span.End(resp, nil)

	a := attrs(t, rec, "m")
	var in abi.GenerateRequest
	if err := json.Unmarshal([]byte(a[tracing.AttrInput]), &in); err != nil {
		t.Fatalf("input %q: %v", a[tracing.AttrInput], err)
	}
	var texts []string
	for _, m := range in.Messages {
		texts = append(texts, m.Text())
	}
	if want := []string{"be brief", "the new question"}; strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("traced messages %q, want %q", texts, want)
	}
	if len(req.Messages) != len(msgs) {
		t.Error("tracing changed the request")
	}
	// Every field of the request is recorded, the tools without their schemas.
	var got, whole map[string]any
	json.Unmarshal([]byte(a[tracing.AttrInput]), &got)
	raw, _ := json.Marshal(req)
	json.Unmarshal(raw, &whole)
	for k := range whole {
		if _, ok := got[k]; !ok {
			t.Errorf("the traced request has no %q", k)
		}
	}
	if tools := fmt.Sprint(got["tools"]); tools != "[map[description:adds name:add]]" {
		t.Errorf("traced tools %s, want their names and descriptions", tools)
	}
	if strings.Contains(a[tracing.AttrOutput], `"request"`) || !strings.Contains(a[tracing.AttrOutput], "the answer") {
		t.Errorf("output %s: want the answer without the request it repeats", a[tracing.AttrOutput])
	}
}

func TestTail(t *testing.T) {
	sys := abi.NewSystemTextMessage("s")
	u := abi.NewUserTextMessage("u")
	m := abi.NewModelTextMessage("m")
	tool := abi.NewMessage(abi.RoleTool, abi.NewTextPart("t"))
	many := make([]*abi.Message, 20)
	for i := range many {
		many[i] = u
	}
	for _, c := range []struct {
		name     string
		in, want []*abi.Message
	}{
		{"empty", nil, nil},
		{"first turn", []*abi.Message{sys, u}, []*abi.Message{sys, u}},
		{"since the model spoke", []*abi.Message{sys, u, m, u, m, u}, []*abi.Message{sys, u}},
		{"tool loop", []*abi.Message{u, m, u, m, tool}, []*abi.Message{tool}},
		{"ends with the model", []*abi.Message{u, m}, []*abi.Message{m}},
		{"no model, bounded", many, many[len(many)-tracing.TailMessages:]},
		{"no model, bounded, with a prompt", append([]*abi.Message{sys}, many...), append([]*abi.Message{sys}, many[len(many)-tracing.TailMessages+1:]...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := tracing.Tail(c.in)
			if len(got) != len(c.want) {
				t.Fatalf("Tail kept %d messages, want %d", len(got), len(c.want))
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("message %d is %s %q, want %s %q", i, got[i].Role, got[i].Text(), c.want[i].Role, c.want[i].Text())
				}
			}
		})
	}
}

func TestValuesAreCutAtMaxValueBytes(t *testing.T) {
	rec := record(t)
	big := strings.Repeat("é", tracing.MaxValueBytes) // two bytes each: a cut may fall inside one
	_, span := tracing.Start(context.Background(), "t", tracing.Tool, map[string]string{"text": big})
	span.End(big, nil)
	a := attrs(t, rec, "t")
	for _, k := range []string{tracing.AttrInput, tracing.AttrOutput} {
		v := a[k]
		if len(v) > tracing.MaxValueBytes || len(v) < tracing.MaxValueBytes-utf8.UTFMax {
			t.Errorf("%s holds %d bytes, want at most %d", k, len(v), tracing.MaxValueBytes)
		}
		if !utf8.ValidString(v) {
			t.Errorf("%s was cut inside a character", k)
		}
	}
}

func TestUnencodableValueIsSaidSo(t *testing.T) {
	rec := record(t)
	_, span := tracing.Start(context.Background(), "t", tracing.Tool, func() {})
	span.End(nil, errors.New("kaput"))
	a := attrs(t, rec, "t")
	if !strings.Contains(a[tracing.AttrInput], "not encodable as JSON") || a[tracing.AttrState] != "error" {
		t.Errorf("attributes %v", a)
	}
}

// A span started under a recording parent records, even once the global provider
// records nothing: the parent's trace stays whole.
func TestChildOfARecordingSpanRecords(t *testing.T) {
	rec := record(t)
	ctx, parent := tracing.Start(context.Background(), "parent", tracing.Flow, nil)
	otel.SetTracerProvider(noop.NewTracerProvider())
	_, child := tracing.Start(ctx, "child", tracing.Tool, 1)
	child.End(2, nil)
	parent.End(nil, nil)
	a := attrs(t, rec, "child")
	if a[tracing.AttrPath] != "/{parent,t:flow}/{child,t:action,s:tool}" || a[tracing.AttrInput] != "1" {
		t.Errorf("child attributes %v", a)
	}
}

// TestGenerateSpanRecordsEveryOption: a generate call's span records every option the
// call was given, its messages cut to the newest.
func TestGenerateSpanRecordsEveryOption(t *testing.T) {
	rec := record(t)
	opts := &abi.GenerateActionOptions{Model: "m", Docs: []*abi.Document{{Content: []*abi.Part{abi.NewTextPart("doc")}}},
		Messages: conversation(100), Tools: []string{"add"}, ToolChoice: abi.ToolChoiceAuto, Config: map[string]any{"k": 1},
		Output: &abi.GenerateActionOutputConfig{Format: "json"}, Resume: &abi.Resume{}, ReturnToolRequests: true, MaxTurns: 3}
	_, span := tracing.Start(context.Background(), "generate", tracing.Util, opts)
	span.End(nil, nil)
	var got, whole map[string]any
	json.Unmarshal([]byte(attrs(t, rec, "generate")[tracing.AttrInput]), &got)
	raw, _ := json.Marshal(opts)
	json.Unmarshal(raw, &whole)
	for k := range whole {
		if _, ok := got[k]; !ok {
			t.Errorf("the traced options have no %q", k)
		}
	}
	if msgs, _ := got["messages"].([]any); len(msgs) != 2 {
		t.Errorf("traced %d messages, want the prompt and the last", len(msgs))
	}
}

// TestViewsEncodeAsEncodingJSON: the requests, generate calls and responses a span
// writes out by hand are, byte for byte, what encoding/json writes of the same values
// with what a span leaves out left out (the older messages, the tools' schemas, the
// request a response repeats), whichever members are set.
func TestViewsEncodeAsEncodingJSON(t *testing.T) {
	rec := record(t)
	tricky := abi.NewUserTextMessage("a <b> & \"c\" \u2028 \xff é\n")
	tricky.Metadata = map[string]any{"k": []any{1, "x"}}
	tool := abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Name: "add", Ref: "1", Input: map[string]any{"a": 1}}))
	msgs := [][]*abi.Message{
		{abi.NewUserTextMessage("hi")},
		append(conversation(20), tricky),
		{abi.NewSystemTextMessage("be brief"), tool, abi.NewMessage(abi.RoleTool, abi.NewToolResponsePart(&abi.ToolResponse{Name: "add", Ref: "1", Output: 3}))},
		{},
	}
	reqs := []*abi.GenerateRequest{}
	opts := []*abi.GenerateActionOptions{}
	for _, m := range msgs {
		reqs = append(reqs, &abi.GenerateRequest{Messages: m})
		opts = append(opts, &abi.GenerateActionOptions{Messages: m})
	}
	reqs = append(reqs, &abi.GenerateRequest{Messages: msgs[1], Config: map[string]any{"t": 0.5}, ToolChoice: abi.ToolChoiceAuto,
		Output: &abi.OutputConfig{Format: "json"}, Docs: []*abi.Document{{Content: []*abi.Part{abi.NewTextPart("doc")}}}})
	opts = append(opts, &abi.GenerateActionOptions{Model: "m<1>", Docs: []*abi.Document{{Content: []*abi.Part{abi.NewTextPart("doc")}}},
		Messages: msgs[2], Tools: []string{"add", "a&b"}, ToolChoice: abi.ToolChoiceRequired, Config: map[string]any{"k": 1},
		Output: &abi.GenerateActionOutputConfig{Format: "json"}, Resume: &abi.Resume{}, ReturnToolRequests: true, MaxTurns: 3})
	resps := []*abi.GenerateResponse{
		{},
		{Message: tricky, FinishReason: abi.FinishStop, Request: reqs[0]},
		{Message: tool, FinishReason: abi.FinishLength, FinishMessage: "cut <here>", LatencyMs: 1.5,
			Usage: &abi.GenerationUsage{InputTokens: 3}, Custom: map[string]any{}},
	}
	check := func(value any, want any) {
		t.Helper()
		_, span := tracing.Start(context.Background(), "v", tracing.Model, value)
		span.End(nil, nil)
		got := attrs(t, rec, "v")[tracing.AttrInput]
		rec.Reset()
		w, _ := json.Marshal(want)
		if got != string(w) {
			t.Errorf("traced\n%s\nencoding/json\n%s", got, w)
		}
	}
	for _, r := range reqs {
		c := *r
		c.Messages = tracing.Tail(r.Messages)
		check(r, &c)
	}
	for _, o := range opts {
		c := *o
		c.Messages = tracing.Tail(o.Messages)
		check(o, &c)
	}
	for _, r := range resps {
		c := *r
		c.Request = nil
		check(r, &c)
	}
	// The tools, by name and description only.
	withTools := &abi.GenerateRequest{Messages: msgs[0], Tools: []*abi.ToolDefinition{
		{Name: "add", Description: "adds <two>", InputSchema: map[string]any{"type": "object"}}, {Name: "x"}}}
	type named struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	check(withTools, struct {
		Messages []*abi.Message `json:"messages"`
		Tools    []named        `json:"tools"`
	}{msgs[0], []named{{"add", "adds <two>"}, {"x", ""}}})
}
