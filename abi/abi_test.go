package abi_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/genkitref"
)

// genkitExamples are the example shapes of Genkit's model specification (seed 001).
var genkitExamples = []string{
	`{"text": "Hello, world!"}`,
	`{"media": {"url": "data:image/jpeg;base64,/9j/4AAQSkZJRg...", "contentType": "image/jpeg"}}`,
	`{"media": {"url": "data:audio/L16;codec=pcm;rate=24000;base64,AAAAAA...", "contentType": "audio/L16;codec=pcm;rate=24000"}}`,
	`{"media": {"url": "https://example.com/video.mp4", "contentType": "video/mp4"}}`,
	`{"media": {"url": "..."}, "metadata": {"mediaResolution": {"level": "MEDIA_RESOLUTION_HIGH"}, "videoMetadata": {"startOffset": {"seconds": 10}}}}`,
	`{"toolRequest": {"name": "weatherTool", "ref": "call_123", "input": {"city": "New York"}}}`,
	`{"toolResponse": {"name": "weatherTool", "ref": "call_123", "output": {"temperature": 72}, "content": [{"text": "72F"}]}}`,
	`{"custom": {"executableCode": {"code": "print('Hello World')", "language": "PYTHON"}, "codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "Hello World\n"}}}`,
	`{"reasoning": "First, I will calculate..."}`,
	`{"data": {"key": "value"}}`,
	`{"resource": {"uri": "file:///notes.txt"}}`,
	`{"text": ""}`,
	`{"toolRequest": {"name": "partial", "input": {"a": 1}, "partial": true}}`,
}

func TestPartRoundTripValidatesAgainstGenkitSchema(t *testing.T) {
	genkitref.Require(t)
	for _, ex := range genkitExamples {
		var p abi.Part
		if err := json.Unmarshal([]byte(ex), &p); err != nil {
			t.Fatalf("decode %s: %v", ex, err)
		}
		out, err := json.Marshal(&p)
		if err != nil {
			t.Fatalf("encode %s: %v", ex, err)
		}
		if !jsonEqual(t, ex, string(out)) {
			t.Errorf("round trip changed the part:\n in: %s\nout: %s", ex, out)
		}
		if err := genkitref.Validate("Part", out); err != nil {
			t.Errorf("%s does not validate as a Genkit Part: %v", out, err)
		}
	}
}

func TestPartDecodeErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, "no content"},
		{`{"metadata": {"a": 1}}`, "no content"},
		{`{"text": null}`, "no content"},
		{`{"text": "a", "media": {"url": "x"}}`, "2 kinds of content (media, text)"},
		{`{"toolRequest": {"name": "t"}, "toolResponse": {"name": "t"}}`, "2 kinds"},
		{`{"custom": {}, "data": 1}`, "2 kinds"},
		{`{"txt": "typo"}`, `unknown field "txt"`},
		{`{"media": {"contentType": "image/png"}}`, "media has no url"},
		{`{"toolRequest": {"input": {}}}`, "tool request has no name"},
		{`null`, "null"},
		{`[1]`, "part"},
		{`{"text": 5}`, "text part"},
	}
	for _, c := range cases {
		var p abi.Part
		err := json.Unmarshal([]byte(c.in), &p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("decode %s: err = %v, want one containing %q", c.in, err, c.want)
		}
	}
}

func TestMessageDecodeRejectsUnknownRole(t *testing.T) {
	var m abi.Message
	err := json.Unmarshal([]byte(`{"role": "assistant", "content": [{"text": "hi"}]}`), &m)
	if err == nil || !strings.Contains(err.Error(), `role "assistant"`) {
		t.Fatalf("err = %v, want one naming the role", err)
	}
	err = json.Unmarshal([]byte(`{"role": "user", "content": [null]}`), &m)
	if err == nil || !strings.Contains(err.Error(), "content[0] is null") {
		t.Fatalf("err = %v, want a null part error", err)
	}
}

// everyType holds one filled value of every abi wire type with the Genkit schema
// definition it must satisfy.
func everyType() map[string]any {
	msgs := []*abi.Message{
		abi.NewSystemTextMessage("be brief"),
		abi.NewUserMessage(abi.NewTextPart("what is in this picture?"), abi.NewMediaPart("image/png", "data:image/png;base64,AAAA")),
		abi.NewModelMessage(abi.NewReasoningPart("look first"), abi.NewToolRequestPart(&abi.ToolRequest{Name: "look", Ref: "1", Input: map[string]any{"x": 1}})),
		abi.NewToolMessage(&abi.ToolResponse{Name: "look", Ref: "1", Output: "a cat", Content: []*abi.Part{abi.NewTextPart("cat")}}),
		{Role: abi.RoleModel, Content: []*abi.Part{abi.NewCustomPart(map[string]any{"k": "v"}), abi.NewDataPart([]any{1, 2})}, Metadata: map[string]any{"m": true}},
	}
	tools := []*abi.ToolDefinition{{Name: "look", Description: "looks", InputSchema: map[string]any{"type": "object"}, OutputSchema: map[string]any{"type": "string"}, Metadata: map[string]any{"a": "b"}}}
	req := &abi.GenerateRequest{
		Messages:   msgs,
		Config:     map[string]any{"temperature": 0.5, "unknownKey": "passes through"},
		Tools:      tools,
		ToolChoice: abi.ToolChoiceAuto,
		Output:     &abi.OutputConfig{Format: "json", Schema: map[string]any{"type": "object"}, Constrained: true, ContentType: "application/json"},
		Docs:       []*abi.Document{abi.NewTextDocument("doc"), {Content: []*abi.Part{abi.NewMediaPart("image/png", "https://x/y.png")}, Metadata: map[string]any{"src": "x"}}},
	}
	usage := &abi.GenerationUsage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3, InputCharacters: 4, OutputCharacters: 5, InputImages: 6, OutputImages: 7, InputVideos: 8, OutputVideos: 9, InputAudioFiles: 10, OutputAudioFiles: 11, ThoughtsTokens: 12, CachedContentTokens: 13, Custom: map[string]float64{"x": 1.5}}
	constrained := false
	return map[string]any{
		"Message":         msgs[1],
		"GenerateRequest": req,
		"ModelRequest":    req,
		"GenerateResponse": &abi.GenerateResponse{
			Message: abi.NewModelTextMessage("ok"), FinishReason: abi.FinishStop, FinishMessage: "done",
			LatencyMs: 12.5, Usage: usage, Custom: map[string]any{"raw": 1}, Request: req,
		},
		"GenerateResponseChunk": &abi.GenerateResponseChunk{Role: abi.RoleModel, Index: 2, Content: []*abi.Part{abi.NewTextPart("par")}, Aggregated: true, Custom: 1},
		"ToolDefinition":        tools[0],
		"OutputConfig":          req.Output,
		"GenerationUsage":       usage,
		"DocumentData":          req.Docs[0],
		"ModelInfo": &abi.ModelInfo{
			Label: "Echo", Versions: []string{"v1"}, Stage: abi.StageStable, ConfigSchema: map[string]any{"type": "object"},
			Supports: &abi.ModelSupports{Multiturn: true, Media: true, Tools: true, SystemRole: true, Output: []string{"text", "json"}, ContentType: []string{"application/json"}, Context: true, Constrained: abi.ConstrainedNoTools, ToolChoice: true, LongRunning: true},
		},
		"GenerateActionOptions": &abi.GenerateActionOptions{
			Model: "test/echo", Messages: msgs, Tools: []string{"look"}, ToolChoice: abi.ToolChoiceRequired, Config: map[string]any{"a": 1},
			Output:   &abi.GenerateActionOutputConfig{Format: "json", ContentType: "application/json", Instructions: false, JSONSchema: map[string]any{"type": "object"}, Constrained: &constrained},
			Resume:   &abi.Resume{Respond: []*abi.Part{abi.NewToolResponsePart(&abi.ToolResponse{Name: "look", Output: 1})}, Restart: []*abi.Part{abi.NewToolRequestPart(&abi.ToolRequest{Name: "look"})}},
			MaxTurns: 3, ReturnToolRequests: true, Docs: req.Docs,
		},
		"FinishReason": abi.FinishInterrupted,
		"Role":         abi.RoleTool,
	}
}

func TestEveryTypeValidatesAgainstGenkitSchema(t *testing.T) {
	genkitref.Require(t)
	for def, v := range everyType() {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", def, err)
		}
		if err := genkitref.Validate(def, b); err != nil {
			t.Errorf("%s does not validate: %v\n%s", def, err, b)
		}
	}
	// Zero values must validate too: required arrays are never null.
	for def, v := range map[string]any{
		"Message":               &abi.Message{Role: abi.RoleUser},
		"GenerateRequest":       &abi.GenerateRequest{},
		"GenerateResponseChunk": &abi.GenerateResponseChunk{},
		"GenerateActionOptions": &abi.GenerateActionOptions{},
		"GenerateResponse":      &abi.GenerateResponse{},
	} {
		if err := genkitref.ValidateValue(def, v); err != nil {
			t.Errorf("zero %s does not validate: %v", def, err)
		}
	}
}

func TestEveryTypeRoundTrips(t *testing.T) {
	for def, v := range everyType() {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v)).Interface()
		if err := json.Unmarshal(b, back); err != nil {
			t.Fatalf("%s: decode: %v", def, err)
		}
		b2, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, string(b), string(b2)) {
			t.Errorf("%s changed in a round trip:\n%s\n%s", def, b, b2)
		}
	}
}

func TestHelpers(t *testing.T) {
	m := abi.NewModelMessage(abi.NewTextPart("Hel"), abi.NewReasoningPart("why"), abi.NewTextPart("lo"),
		abi.NewToolRequestPart(&abi.ToolRequest{Name: "a"}), abi.NewToolRequestPart(&abi.ToolRequest{Name: "b"}))
	if got := m.Text(); got != "Hello" {
		t.Errorf("Text = %q", got)
	}
	if got := m.Reasoning(); got != "why" {
		t.Errorf("Reasoning = %q", got)
	}
	if reqs := m.ToolRequests(); len(reqs) != 2 || reqs[0].Name != "a" || reqs[1].Name != "b" {
		t.Errorf("ToolRequests = %v", reqs)
	}
	if got := abi.NewUserTextMessage("hi"); got.Role != abi.RoleUser || got.Text() != "hi" {
		t.Errorf("NewUserTextMessage = %+v", got)
	}
	var nilMsg *abi.Message
	if nilMsg.Text() != "" || nilMsg.ToolRequests() != nil {
		t.Error("nil message accessors must be safe")
	}
	sys, rest := abi.SplitSystem([]*abi.Message{abi.NewSystemTextMessage("s1"), abi.NewUserTextMessage("u"), abi.NewSystemTextMessage("s2")})
	if len(sys) != 2 || sys[1].Text != "s2" || len(rest) != 1 || rest[0].Role != abi.RoleUser {
		t.Errorf("SplitSystem = %v, %v", sys, rest)
	}
	c := m.Clone()
	c.Content[0].Text = "changed"
	c.Content[3].ToolRequest.Name = "changed"
	if m.Text() != "Hello" || m.ToolRequests()[0].Name != "a" {
		t.Error("Clone shares parts with the original")
	}
}

func TestExtractJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{"  [1, 2]\n", `[1, 2]`},
		{"Here you go:\n```json\n{\"a\": 1}\n```\nEnjoy!", `{"a": 1}`},
		{"```\n{\"b\": 2}\n```", `{"b": 2}`},
		{"```go\nfunc(){}\n```\n```json\n{\"c\": 3}\n```", `{"c": 3}`},
		{"```json\n{\"unterminated\": true}\n", `{"unterminated": true}`},
		{`The answer is {"a": {"b": [1]}} as requested.`, `{"a": {"b": [1]}}`},
		{`{not json} then {"ok": true}`, `{"ok": true}`},
		{`"just a string"`, `"just a string"`},
		{`42`, `42`},
	}
	for _, c := range cases {
		got, err := abi.ExtractJSON(c.in)
		if err != nil {
			t.Errorf("ExtractJSON(%q): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("ExtractJSON(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, in := range []string{"", "no json here", "{broken", "```json\n{oops\n```"} {
		if _, err := abi.ExtractJSON(in); err == nil {
			t.Errorf("ExtractJSON(%q) found JSON", in)
		}
	}
	resp := &abi.GenerateResponse{Message: abi.NewModelTextMessage("```json\n{\"n\": 7}\n```")}
	var out struct{ N int }
	if err := resp.Output(&out); err != nil || out.N != 7 {
		t.Errorf("Output = %+v, %v", out, err)
	}
}

func TestAccumulator(t *testing.T) {
	var a abi.Accumulator
	chunks := []*abi.GenerateResponseChunk{
		{Content: []*abi.Part{abi.NewReasoningPart("think ")}},
		{Content: []*abi.Part{abi.NewReasoningPart("hard")}},
		{Content: []*abi.Part{abi.NewTextPart("Hel")}},
		{Content: []*abi.Part{abi.NewTextPart("lo")}},
		// Accumulated-object partials (Gemini style), matched by ref.
		{Content: []*abi.Part{abi.NewToolRequestPart(&abi.ToolRequest{Name: "w", Ref: "r1", Input: map[string]any{"city": "Pa"}, Partial: true})}},
		{Content: []*abi.Part{abi.NewToolRequestPart(&abi.ToolRequest{Name: "w", Ref: "r1", Input: map[string]any{"city": "Paris"}, Partial: true})}},
		// String-delta partials without refs, matched by name.
		{Content: []*abi.Part{abi.NewToolRequestPart(&abi.ToolRequest{Name: "calc", Input: `{"expr":`, Partial: true})}},
		{Content: []*abi.Part{abi.NewToolRequestPart(&abi.ToolRequest{Name: "calc", Input: ` "1+2"}`, Partial: true})}},
		// A complete request replaces its partials.
		{Content: []*abi.Part{abi.NewToolRequestPart(&abi.ToolRequest{Name: "w", Ref: "r1", Input: map[string]any{"city": "Paris", "days": 2.0}})}},
	}
	for _, c := range chunks {
		a.Add(c)
	}
	m := a.Message(abi.RoleModel)
	if m.Reasoning() != "think hard" || m.Text() != "Hello" {
		t.Fatalf("text = %q reasoning = %q", m.Text(), m.Reasoning())
	}
	reqs := m.ToolRequests()
	if len(reqs) != 2 {
		t.Fatalf("tool requests = %d, want 2: %+v", len(reqs), reqs)
	}
	if !reflect.DeepEqual(reqs[0].Input, map[string]any{"city": "Paris", "days": 2.0}) || reqs[0].Partial {
		t.Errorf("w = %+v", reqs[0])
	}
	if !reflect.DeepEqual(reqs[1].Input, map[string]any{"expr": "1+2"}) || reqs[1].Partial {
		t.Errorf("calc = %+v", reqs[1])
	}
	a.Add(&abi.GenerateResponseChunk{Aggregated: true, Content: []*abi.Part{abi.NewTextPart("all")}})
	if got := a.Message(abi.RoleModel).Text(); got != "all" {
		t.Errorf("after aggregated chunk: %q", got)
	}
}

// TestABIBuildsForWasip1 proves abi and abi/plugin compile for plugins and import only
// the standard library and each other.
func TestABIBuildsForWasip1(t *testing.T) {
	if testing.Short() {
		t.Skip("builds with the go command")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "build", "-o", os.DevNull, ".", "./plugin")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=wasip1 GOARCH=wasm go build ./abi ./abi/plugin: %v\n%s", err, out)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".", "./plugin").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/terrarium-ai/terrarium/abi", "github.com/terrarium-ai/terrarium/abi/plugin":
		default:
			t.Errorf("abi or abi/plugin imports %s; they must import only the standard library", dep)
		}
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestSchemaValidatorRejects guards the validation tests above against a validator that
// accepts everything.
func TestSchemaValidatorRejects(t *testing.T) {
	genkitref.Require(t)
	for def, bad := range map[string]string{
		"Message":         `{"role": "assistant", "content": []}`,
		"Part":            `{"text": "a", "media": {"url": "x"}}`,
		"GenerateRequest": `{"messages": null}`,
		"ToolDefinition":  `{"name": "t"}`,
	} {
		if err := genkitref.Validate(def, []byte(bad)); err == nil {
			t.Errorf("%s accepted %s", def, bad)
		}
	}
}

// Add adds every count: a field it forgot would stay at one.
func TestGenerationUsageAdd(t *testing.T) {
	var one abi.GenerationUsage
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int {
			f.SetInt(1)
		}
	}
	one.Custom = map[string]float64{"x": 1}
	sum := one
	sum.Custom = nil
	sum.Add(&one)
	sum.Add(nil)
	s := reflect.ValueOf(sum)
	for i := range s.NumField() {
		if f := s.Field(i); f.Kind() == reflect.Int && f.Int() != 2 {
			t.Errorf("%s = %d after adding 1 to 1", s.Type().Field(i).Name, f.Int())
		}
	}
	if sum.Custom["x"] != 1 || one.Custom["x"] != 1 {
		t.Errorf("custom counts: %v (the added usage's: %v)", sum.Custom, one.Custom)
	}
}

// TestWithoutInjected: injected parts are dropped from copies of their messages; a
// history holding none is returned as it is, without allocating, so a request's cost
// does not grow with the history.
func TestWithoutInjected(t *testing.T) {
	var history []*abi.Message
	for range 500 {
		history = append(history, abi.NewUserTextMessage("q"), abi.NewModelTextMessage("a"))
	}
	if n := testing.AllocsPerRun(20, func() { abi.WithoutInjected(history) }); n != 0 {
		t.Errorf("a history without injected parts cost %v allocations, want 0", n)
	}
	if got := abi.WithoutInjected(history); &got[0] != &history[0] {
		t.Error("a history without injected parts was copied")
	}
	injected := abi.NewTextPart("format instructions")
	injected.Metadata = map[string]any{"purpose": abi.PurposeOutput}
	withPart := abi.NewUserMessage(abi.NewTextPart("q"), injected)
	// Only user messages hold injected parts: a model's part keeps whatever metadata.
	modelPart := abi.NewTextPart("the model's")
	modelPart.Metadata = map[string]any{"purpose": abi.PurposeOutput}
	model := abi.NewModelMessage(modelPart)
	if got := abi.WithoutInjected([]*abi.Message{model}); got[0] != model {
		t.Error("a model message lost a part")
	}
	msgs := []*abi.Message{history[0], withPart}
	got := abi.WithoutInjected(msgs)
	if got[0] != history[0] || len(got[1].Content) != 1 || got[1].Content[0].Text != "q" || len(withPart.Content) != 2 || msgs[1] != withPart {
		t.Errorf("without injected: %+v; the original changed: %v", got[1].Content, len(withPart.Content) != 2 || msgs[1] != withPart)
	}
}

// TestMessageEncoding: messages and text parts, written out by hand for speed, encode
// exactly as encoding/json encodes their fields: HTML and line separators escaped, an
// empty content as [], metadata only when set.
func TestMessageEncoding(t *testing.T) {
	tagged := abi.NewTextPart("x")
	tagged.Metadata = map[string]any{"purpose": "output"}
	withMeta := abi.NewModelTextMessage("x")
	withMeta.Metadata = map[string]any{"k": 1}
	for _, c := range []struct {
		v    any
		want string
	}{
		{abi.NewTextPart("a<b>&\"é\u2028"), `{"text":"a\u003cb\u003e\u0026\"é\u2028"}`},
		{tagged, `{"text":"x","metadata":{"purpose":"output"}}`},
		{&abi.Message{Role: abi.RoleUser}, `{"role":"user","content":[]}`},
		{&abi.Message{Role: `a"b<`}, `{"role":"a\"b\u003c","content":[]}`},
		{&abi.Message{Role: abi.RoleUser, Content: []*abi.Part{nil}}, `{"role":"user","content":[null]}`},
		{withMeta, `{"role":"model","content":[{"text":"x"}],"metadata":{"k":1}}`},
		{&abi.Message{Role: abi.RoleTool, Content: []*abi.Part{abi.NewTextPart("a"), tagged}, Metadata: map[string]any{}},
			`{"role":"tool","content":[{"text":"a"},{"text":"x","metadata":{"purpose":"output"}}]}`},
	} {
		got, err := json.Marshal(c.v)
		if err != nil || string(got) != c.want {
			t.Errorf("%+v encodes as %s (%v), want %s", c.v, got, err, c.want)
		}
	}
	// Every kind of part, with metadata and without.
	md := map[string]any{"k": "<v>"}
	parts := []*abi.Part{
		abi.NewTextPart(""), abi.NewReasoningPart("why"), abi.NewMediaPart("image/png", "data:x"),
		abi.NewToolRequestPart(&abi.ToolRequest{Name: "add", Ref: "1", Input: map[string]any{"b": 2.0, "a": 1.0}}),
		abi.NewToolResponsePart(&abi.ToolResponse{Name: "add", Ref: "1", Output: 3}),
		abi.NewCustomPart(nil), abi.NewCustomPart(map[string]any{"x": true}), abi.NewDataPart([]any{1, "two"}), abi.NewResourcePart("file:///a"),
	}
	wants := []string{
		`{"text":""}`, `{"reasoning":"why"}`, `{"media":{"url":"data:x","contentType":"image/png"}}`,
		`{"toolRequest":{"ref":"1","name":"add","input":{"a":1,"b":2}}}`,
		`{"toolResponse":{"ref":"1","name":"add","output":3}}`,
		`{"custom":{}}`, `{"custom":{"x":true}}`, `{"data":[1,"two"]}`, `{"resource":{"uri":"file:///a"}}`,
	}
	for i, p := range parts {
		got, err := json.Marshal(p)
		if err != nil || string(got) != wants[i] {
			t.Errorf("part %d encodes as %s (%v), want %s", i, got, err, wants[i])
		}
		p.Metadata = md
		want := wants[i][:len(wants[i])-1] + `,"metadata":{"k":"\u003cv\u003e"}}`
		if got, err := json.Marshal(p); err != nil || string(got) != want {
			t.Errorf("part %d with metadata encodes as %s (%v), want %s", i, got, err, want)
		}
	}
	if _, err := json.Marshal(abi.NewUserMessage(&abi.Part{Kind: abi.PartMedia})); err == nil {
		t.Error("a message holding a media part without media encoded")
	}
}
