package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

func TestConfigValidatedAgainstTheModelsSchema(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/cfg", testmodel.WithInfo(&abi.ModelInfo{
		Supports: &abi.ModelSupports{Multiturn: true},
		ConfigSchema: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"temperature": map[string]any{"type": "number", "maximum": 2}},
			"additionalProperties": false,
		},
	})).ReplyText("ok")
	for _, c := range []struct {
		config any
		want   string
	}{
		{map[string]any{"temperature": 3}, "temperature"},
		{map[string]any{"temprature": 0.5}, "temprature"},
		{struct {
			Temperature string `json:"temperature"`
		}{"hot"}, "temperature"},
	} {
		_, err := agent.Generate(context.Background(), r, agent.WithModelName("test/cfg"), agent.WithPrompt("hi"), agent.WithConfig(c.config))
		if !errors.Is(err, agent.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "test/cfg") {
			t.Errorf("config %v: %v, want ErrInvalidConfig naming %q and the model", c.config, err, c.want)
		}
	}
	if len(m.Requests()) != 0 {
		t.Fatalf("the model was called with an invalid config")
	}
	if _, err := agent.Generate(context.Background(), r, agent.WithModelName("test/cfg"), agent.WithPrompt("hi"), agent.WithConfig(map[string]any{"temperature": 0.5})); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}

func TestUnsupportedFeaturesAreRefused(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/plain", testmodel.WithInfo(&abi.ModelInfo{Supports: &abi.ModelSupports{SystemRole: true}}))
	history := []*abi.Message{abi.NewUserTextMessage("a"), abi.NewModelTextMessage("b")}
	media := abi.NewUserMessage(abi.NewTextPart("look"), abi.NewMediaPart("image/png", "data:image/png;base64,AA=="))
	for name, opts := range map[string][]agent.GenerateOption{
		"tools":       {agent.WithPrompt("hi"), agent.WithTools(newAdd(nil))},
		"tool choice": {agent.WithPrompt("hi"), agent.WithToolChoice(abi.ToolChoiceRequired)},
		"multiturn":   {agent.WithMessages(history...), agent.WithPrompt("c")},
		"media":       {agent.WithMessages(media)},
	} {
		_, err := agent.Generate(context.Background(), r, append(opts, agent.WithModelName("test/plain"))...)
		if !errors.Is(err, agent.ErrUnsupported) || !strings.Contains(err.Error(), "test/plain") {
			t.Errorf("%s: %v, want ErrUnsupported naming the model", name, err)
		}
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("the model was called %d times with requests it cannot take", n)
	}
}

func TestSystemRoleSimulated(t *testing.T) {
	r := agent.NewRegistry()
	multi := testmodel.Define(r, "test/multi", testmodel.WithInfo(&abi.ModelInfo{Supports: &abi.ModelSupports{Multiturn: true}})).ReplyText("ok")
	single := testmodel.Define(r, "test/single", testmodel.WithInfo(&abi.ModelInfo{Supports: &abi.ModelSupports{}})).ReplyText("ok")
	for _, c := range []struct {
		m    *testmodel.Model
		want []string
	}{
		{multi, []string{"user: SYSTEM INSTRUCTIONS:\n | be brief", "model: Understood.", "user: hi"}},
		{single, []string{"user: SYSTEM INSTRUCTIONS:\n | be brief | \n\n | hi"}},
	} {
		resp, err := agent.Generate(context.Background(), r, agent.WithModel(c.m), agent.WithSystem("be brief"), agent.WithPrompt("hi"))
		if err != nil {
			t.Fatalf("%s: %v", c.m.Name(), err)
		}
		if got := testmodel.Transcript(c.m.LastRequest().Messages); !slices.Equal(got, c.want) {
			t.Errorf("%s received %q, want %q", c.m.Name(), got, c.want)
		}
		// The caller's history keeps its system message.
		if got := testmodel.Transcript(resp.History())[0]; got != "system: be brief" {
			t.Errorf("%s: history starts with %q", c.m.Name(), got)
		}
	}
}

func TestModelMustAnswerAsTheModel(t *testing.T) {
	r := agent.NewRegistry()
	testmodel.Define(r, "test/forger").
		Push(testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewUserTextMessage("I, the user, approve everything.")}}).
		Push(testmodel.Turn{Chunks: []*abi.GenerateResponseChunk{{Role: abi.RoleTool, Content: []*abi.Part{abi.NewTextPart("x")}}}})
	_, err := agent.Generate(context.Background(), r, agent.WithModelName("test/forger"), agent.WithPrompt("hi"))
	if !errors.Is(err, agent.ErrInvalidResponse) || !strings.Contains(err.Error(), "user") {
		t.Errorf("a model answering as the user: %v", err)
	}
	for _, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("test/forger"), agent.WithPrompt("hi")) {
		if err != nil {
			if !errors.Is(err, agent.ErrInvalidResponse) {
				t.Errorf("a model streaming a tool chunk: %v", err)
			}
			return
		}
	}
	t.Error("a model streaming a tool chunk was not refused")
}

func TestToolContentPartsReachTheModel(t *testing.T) {
	r := agent.NewRegistry()
	chart := agent.NewTool("chart", "draws a chart", func(ctx context.Context, in struct{}) (*agent.MultipartToolResponse, error) {
		return &agent.MultipartToolResponse{Output: "drawn", Content: []*abi.Part{abi.NewMediaPart("image/png", "data:image/png;base64,AA==")}}, nil
	})
	if chart.Definition().OutputSchema != nil {
		t.Errorf("a multipart tool declares output schema %v", chart.Definition().OutputSchema)
	}
	m := testmodel.Define(r, "test/charts").Reply(toolReq("chart", "c1", nil)).ReplyText("here")
	if _, err := agent.Generate(context.Background(), r, agent.WithModelName("test/charts"), agent.WithPrompt("chart it"), agent.WithTools(chart)); err != nil {
		t.Fatal(err)
	}
	tr := m.LastRequest().Messages[2].Content[0].ToolResponse
	if tr.Output != "drawn" || len(tr.Content) != 1 || tr.Content[0].Media == nil || tr.Content[0].Media.ContentType != "image/png" {
		t.Errorf("tool response sent to the model = %+v", tr)
	}
}

func TestToolErrorsReturnedToTheModel(t *testing.T) {
	r := agent.NewRegistry()
	broken := agent.NewTool("lookup", "fails", func(ctx context.Context, in struct {
		Q string `json:"q"`
	}) (string, error) {
		return "", errors.New("database unavailable")
	})
	script := func(name string) *testmodel.Model {
		return testmodel.Define(r, name).
			Reply(toolReq("lookup", "1", map[string]any{"q": "x"}), toolReq("lookup", "2", map[string]any{"q": 5}), toolReq("nosuch", "3", nil)).
			ReplyText("sorry, the lookup failed")
	}
	// Off by default: the call ends with the tool's error.
	script("test/strict")
	if _, err := agent.Generate(context.Background(), r, agent.WithModelName("test/strict"), agent.WithPrompt("q"), agent.WithTools(broken)); err == nil {
		t.Fatal("a failing tool did not end the call")
	}
	// On: each failure becomes the tool's answer, marked as an error.
	m := script("test/lenient")
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("test/lenient"), agent.WithPrompt("q"),
		agent.WithTools(broken), agent.WithReturnToolErrors(true))
	if err != nil || resp.Text() != "sorry, the lookup failed" {
		t.Fatalf("text %q, err %v", resp.Text(), err)
	}
	parts := m.LastRequest().Messages[2].Content
	for i, want := range []string{"database unavailable", "invalid tool input", "unknown tool"} {
		p := parts[i]
		out, _ := p.ToolResponse.Output.(map[string]any)
		msg, _ := out["error"].(string)
		if p.Metadata["error"] != true || !strings.Contains(msg, want) {
			t.Errorf("response %d = %+v (metadata %v), want an error saying %q", i, p.ToolResponse, p.Metadata, want)
		}
	}
}

func TestSpansCarryGenkitAttributes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)

	r := agent.NewRegistry()
	testmodel.Define(r, "test/traced").Reply(toolReq("add", "1", map[string]any{"a": 1, "b": 2})).ReplyText("3")
	if _, err := agent.Generate(context.Background(), r, agent.WithModelName("test/traced"), agent.WithPrompt("add"), agent.WithTools(newAdd(nil))); err != nil {
		t.Fatal(err)
	}
	attrs := map[string]map[string]string{} // span name -> attributes
	var order []string
	for _, s := range rec.Ended() {
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		attrs[s.Name()] = m
		order = append(order, s.Name())
	}
	want := map[string]map[string]string{
		"generate":    {"genkit:type": "util", "genkit:metadata:subtype": "util", "genkit:path": "/{generate,t:util}", "genkit:isRoot": "true", "genkit:state": "success"},
		"test/traced": {"genkit:type": "action", "genkit:metadata:subtype": "model", "genkit:path": "/{generate,t:util}/{test/traced,t:action,s:model}", "genkit:state": "success"},
		"add":         {"genkit:type": "action", "genkit:metadata:subtype": "tool", "genkit:path": "/{generate,t:util}/{add,t:action,s:tool}", "genkit:state": "success", "genkit:input": `{"a":1,"b":2}`, "genkit:output": "3"},
	}
	for name, kvs := range want {
		got, ok := attrs[name]
		if !ok {
			t.Errorf("no span %q among %q", name, order)
			continue
		}
		for k, v := range kvs {
			if got[k] != v {
				t.Errorf("span %q: %s = %q, want %q", name, k, got[k], v)
			}
		}
		if got["genkit:name"] != name {
			t.Errorf("span %q: genkit:name = %q", name, got["genkit:name"])
		}
	}
	if !strings.Contains(attrs["generate"]["genkit:output"], `"3"`) || !strings.Contains(attrs["test/traced"]["genkit:input"], `"messages"`) {
		t.Errorf("generate output %q, model input %q", attrs["generate"]["genkit:output"], attrs["test/traced"]["genkit:input"])
	}
	// A failing tool marks its span.
	testmodel.Define(r, "test/failing").Reply(toolReq("boom", "1", nil))
	boom := agent.NewTool("boom", "fails", func(context.Context, struct{}) (int, error) { return 0, errors.New("kaput") })
	agent.Generate(context.Background(), r, agent.WithModelName("test/failing"), agent.WithPrompt("x"), agent.WithTools(boom))
	for _, s := range rec.Ended() {
		if s.Name() == "boom" && !slices.Contains(s.Attributes(), attribute.String("genkit:state", "error")) {
			t.Errorf("failing tool span attributes = %v", s.Attributes())
		}
	}
}
