package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b,omitempty"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// testRegistry returns a registry with a tool, a model and a handler of each behaviour
// the tests need.
func testRegistry() *registry {
	r := newRegistry()
	r.setInfo(Info{Name: "test-plugin", Version: "0.1.0", Description: "For tests.", Capabilities: plugin.Capabilities{State: plugin.StateRead}})
	addTool(r, "add", "Adds.", func(_ context.Context, in addIn) (addOut, error) {
		return addOut{Sum: in.A + in.B}, nil
	})
	addTool(r, "big", "Echoes a big integer.", func(_ context.Context, in int64) (int64, error) { return in, nil })
	addTool(r, "nothing", "Returns nil.", func(context.Context, struct{}) (*addOut, error) { return nil, nil })
	addTool(r, "panics", "Panics.", func(context.Context, struct{}) (any, error) { panic("boom") })
	addTool(r, "fails", "Fails with a code.", func(context.Context, struct{}) (any, error) {
		return nil, abi.Errorf(abi.CodeUnavailable, "the service is down")
	})
	addTool(r, "plainerr", "Fails with a plain error.", func(context.Context, struct{}) (any, error) {
		return nil, errors.New("plain")
	})
	addTool(r, "approve", "Interrupts until approved.", func(ctx context.Context, _ struct{}) (string, error) {
		md, ok := Resumed(ctx)
		if !ok {
			return "", Interrupt(map[string]any{"ask": "Send 10 EUR?"})
		}
		if md["approved"] == true {
			return "sent", nil
		}
		return "cancelled", nil
	})
	addTool(r, "interruptsEmpty", "Interrupts without metadata.", func(context.Context, struct{}) (any, error) {
		return nil, Interrupt(nil)
	})
	r.addModel("echo", &abi.ModelInfo{Label: "Echo"}, func(_ context.Context, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
		return &abi.GenerateResponse{Message: abi.NewModelTextMessage("echo: " + req.Messages[len(req.Messages)-1].Text()), FinishReason: abi.FinishStop}, nil
	})
	r.addModel("nil", nil, func(context.Context, *abi.GenerateRequest) (*abi.GenerateResponse, error) { return nil, nil })
	r.addHandler("greet", "Replies.", func(_ context.Context, in *abi.HandlerInput) (*abi.Directive, error) {
		if len(in.Input) > 0 && in.Input[0].Text() == "hi" {
			return &abi.Directive{Action: abi.DirectiveReply, Text: "hello"}, nil
		}
		return nil, nil
	}, []abi.HookPoint{abi.HookTurnStart, abi.HookTurnEnd, abi.HookTurnStart})
	r.addHandler("bad", "Returns an invalid directive.", func(context.Context, *abi.HandlerInput) (*abi.Directive, error) {
		return &abi.Directive{Action: "explode"}, nil
	}, []abi.HookPoint{abi.HookTurnEnd})
	return r
}

func dispatchJSON(t *testing.T, r *registry, export string, input any) ([]byte, *abi.Error) {
	t.Helper()
	var in []byte
	switch v := input.(type) {
	case string:
		in = []byte(v)
	case nil:
	default:
		var err error
		if in, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	return r.dispatch(export, in)
}

func TestDescribe(t *testing.T) {
	out, aerr := dispatchJSON(t, testRegistry(), plugin.ExportDescribe, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	var d plugin.Descriptor
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if d.ABI != plugin.Version || d.Name != "test-plugin" || d.Version != "0.1.0" || d.Capabilities.State != plugin.StateRead {
		t.Errorf("descriptor head = %+v", d)
	}
	if len(d.Tools) != 8 || d.Tools[0].Name != "add" || d.Tools[0].Description != "Adds." {
		t.Fatalf("tools = %+v", d.Tools)
	}
	if req, _ := d.Tools[0].InputSchema["required"].([]any); len(req) != 1 || req[0] != "a" {
		t.Errorf("add's input schema = %v", d.Tools[0].InputSchema)
	}
	if d.Tools[3].OutputSchema != nil {
		t.Errorf("an any output has schema %v, want none", d.Tools[3].OutputSchema)
	}
	if len(d.Models) != 2 || d.Models[0].Name != "echo" || d.Models[0].Info.Label != "Echo" || d.Models[1].Info != nil {
		t.Errorf("models = %+v", d.Models)
	}
	if len(d.Handlers) != 2 || strings.Join(points(d.Handlers[0].Points), ",") != "turnStart,turnEnd" {
		t.Errorf("handlers = %+v", d.Handlers)
	}
	// Describe takes no input: garbage is ignored.
	if _, aerr := dispatchJSON(t, testRegistry(), plugin.ExportDescribe, "garbage"); aerr != nil {
		t.Error(aerr)
	}
}

func points(ps []abi.HookPoint) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

func TestRegistrationErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(r *registry)
		want  string
	}{
		{"no Plugin call", func(r *registry) {}, "sdk.Plugin was not called"},
		{"bad plugin name", func(r *registry) { r.setInfo(Info{Name: "Bad Name"}) }, `invalid plugin name "Bad Name"`},
		{"long plugin name", func(r *registry) { r.setInfo(Info{Name: strings.Repeat("a", 65)}) }, "longer than 64 bytes"},
		{"Plugin twice", func(r *registry) { r.setInfo(Info{Name: "a"}); r.setInfo(Info{Name: "b"}) }, "called twice"},
		{"bad tool name", func(r *registry) {
			r.setInfo(Info{Name: "p"})
			addTool(r, "-x", "", func(context.Context, int) (int, error) { return 0, nil })
		}, `invalid tool name "-x"`},
		{"duplicate tool", func(r *registry) {
			r.setInfo(Info{Name: "p"})
			addTool(r, "x", "", func(context.Context, int) (int, error) { return 0, nil })
			addTool(r, "x", "", func(context.Context, int) (int, error) { return 0, nil })
		}, `tool "x" registered twice`},
		{"nil tool", func(r *registry) {
			r.setInfo(Info{Name: "p"})
			addTool[int, int](r, "x", "", nil)
		}, "nil function"},
		{"bad model name", func(r *registry) {
			r.setInfo(Info{Name: "p"})
			r.addModel("a b", nil, func(context.Context, *abi.GenerateRequest) (*abi.GenerateResponse, error) { return nil, nil })
		}, `invalid model name "a b"`},
		{"handler without points", func(r *registry) {
			r.setInfo(Info{Name: "p"})
			r.addHandler("h", "", func(context.Context, *abi.HandlerInput) (*abi.Directive, error) { return nil, nil }, nil)
		}, "no hook points"},
		{"handler with a bad point", func(r *registry) {
			r.setInfo(Info{Name: "p"})
			r.addHandler("h", "", func(context.Context, *abi.HandlerInput) (*abi.Directive, error) { return nil, nil }, []abi.HookPoint{"noon"})
		}, `unknown hook point "noon"`},
	} {
		r := newRegistry()
		tc.setup(r)
		for _, export := range []string{plugin.ExportDescribe, plugin.ExportCallTool} {
			_, aerr := dispatchJSON(t, r, export, plugin.ToolInput{Tool: "x"})
			if aerr == nil || aerr.Code != abi.CodeInternal || !strings.Contains(aerr.Message, tc.want) {
				t.Errorf("%s: %s error = %v, want internal containing %q", tc.name, export, aerr, tc.want)
			}
		}
	}
}

func TestCallTool(t *testing.T) {
	r := testRegistry()
	for _, tc := range []struct {
		name  string
		input any
		want  string // output JSON
	}{
		{"struct in and out", plugin.ToolInput{Tool: "add", Input: map[string]any{"a": 2, "b": 3}}, `{"output":{"sum":5}}`},
		{"integers keep their precision", `{"tool":"big","input":9007199254740993}`, `{"output":9007199254740993}`},
		{"a nil output is null", plugin.ToolInput{Tool: "nothing", Input: map[string]any{}}, `{"output":null}`},
		{"interrupt", plugin.ToolInput{Tool: "approve", Input: map[string]any{}}, `{"interrupt":{"ask":"Send 10 EUR?"}}`},
		{"resumed", plugin.ToolInput{Tool: "approve", Input: map[string]any{}, Resumed: map[string]any{"approved": true}}, `{"output":"sent"}`},
		{"resumed with empty metadata", `{"tool":"approve","input":{},"resumed":{}}`, `{"output":"cancelled"}`},
		{"interrupt without metadata", plugin.ToolInput{Tool: "interruptsEmpty", Input: map[string]any{}}, `{"interrupt":{}}`},
	} {
		out, aerr := dispatchJSON(t, r, plugin.ExportCallTool, tc.input)
		if aerr != nil {
			t.Errorf("%s: %v", tc.name, aerr)
			continue
		}
		if string(out) != tc.want {
			t.Errorf("%s: output = %s, want %s", tc.name, out, tc.want)
		}
	}
	// The SDK checks inputs against the tool's schema itself, for hosts that do not.
	for _, tc := range []struct{ name, input, want string }{
		{"missing input", `{"tool":"add"}`, `missing property "a"`},
		{"unknown property", `{"tool":"add","input":{"a":1,"b":2,"zzz":true}}`, `unknown property "zzz"`},
		{"wrong type", `{"tool":"add","input":{"a":"one","b":2}}`, `/a: want integer, got string`},
		{"not an object", `{"tool":"add","input":[1,2]}`, `want object, got array`},
	} {
		_, aerr := dispatchJSON(t, r, plugin.ExportCallTool, tc.input)
		if aerr == nil || aerr.Code != abi.CodeInvalidInput || !strings.Contains(aerr.Message, tc.want) {
			t.Errorf("%s: err = %v, want invalid_input mentioning %q", tc.name, aerr, tc.want)
		}
	}
}

func TestMultipartOutput(t *testing.T) {
	r := newRegistry()
	r.setInfo(Info{Name: "test-plugin", Version: "0.1.0"})
	addTool(r, "picture", "Draws.", func(_ context.Context, in addIn) (*MultipartOutput, error) {
		if in.A == 0 {
			return nil, nil
		}
		return &MultipartOutput{Output: "drawn", Content: []*abi.Part{
			abi.NewTextPart("A red square."), abi.NewMediaPart("image/png", "data:image/png;base64,iVBORw0KGgo="),
		}}, nil
	})
	out, aerr := dispatchJSON(t, r, plugin.ExportDescribe, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	var d plugin.Descriptor
	if err := json.Unmarshal(out, &d); err != nil || len(d.Tools) != 1 || d.Tools[0].OutputSchema != nil {
		t.Errorf("descriptor %s: the tool should declare no output schema", out)
	}
	for _, tc := range []struct{ input, want string }{
		{`{"tool":"picture","input":{"a":1}}`, `{"content":[{"text":"A red square."},{"media":{"url":"data:image/png;base64,iVBORw0KGgo=","contentType":"image/png"}}],"output":"drawn"}`},
		{`{"tool":"picture","input":{"a":0}}`, `{"output":null}`},
	} {
		out, aerr := dispatchJSON(t, r, plugin.ExportCallTool, tc.input)
		if aerr != nil || string(out) != tc.want {
			t.Errorf("%s: output = %s (%v), want %s", tc.input, out, aerr, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	r := testRegistry()
	for _, tc := range []struct {
		name   string
		export string
		input  any
		code   abi.ErrorCode
		want   string
	}{
		{"unknown tool", plugin.ExportCallTool, plugin.ToolInput{Tool: "nope"}, abi.CodeNotFound, `no tool "nope"`},
		{"unknown model", plugin.ExportGenerate, plugin.GenerateInput{Model: "nope", Request: &abi.GenerateRequest{}}, abi.CodeNotFound, `no model "nope"`},
		{"unknown handler", plugin.ExportHandle, abi.HandlerInput{Handler: "nope", Point: abi.HookTurnStart}, abi.CodeNotFound, `no handler "nope"`},
		{"unknown export", "terrarium_nope", "{}", abi.CodeNotFound, "terrarium_nope"},
		{"empty tool input", plugin.ExportCallTool, "", abi.CodeInvalidInput, "empty input"},
		{"empty generate input", plugin.ExportGenerate, "", abi.CodeInvalidInput, "empty input"},
		{"empty handle input", plugin.ExportHandle, "", abi.CodeInvalidInput, "empty input"},
		{"truncated", plugin.ExportCallTool, `{"tool":"add","input":{"a":`, abi.CodeInvalidInput, "malformed input"},
		{"garbage", plugin.ExportGenerate, "\x00\xff garbage", abi.CodeInvalidInput, "malformed input"},
		{"trailing data", plugin.ExportCallTool, `{"tool":"add"} {}`, abi.CodeInvalidInput, "malformed input"},
		{"not an object", plugin.ExportHandle, `[1,2]`, abi.CodeInvalidInput, "malformed input"},
		{"null", plugin.ExportCallTool, `null`, abi.CodeInvalidInput, "names no tool"},
		{"wrong input type", plugin.ExportCallTool, `{"tool":"add","input":{"a":"two"}}`, abi.CodeInvalidInput, `tool "add": input`},
		{"input not an object", plugin.ExportCallTool, `{"tool":"add","input":[1]}`, abi.CodeInvalidInput, `tool "add": input`},
		{"no request", plugin.ExportGenerate, `{"model":"echo"}`, abi.CodeInvalidInput, "no request"},
		{"bad message", plugin.ExportGenerate, `{"model":"echo","request":{"messages":[{"role":"robot","content":[]}]}}`, abi.CodeInvalidInput, "robot"},
		{"bad point", plugin.ExportHandle, `{"handler":"greet","point":"noon"}`, abi.CodeInvalidInput, `unknown hook point "noon"`},
		{"panic", plugin.ExportCallTool, plugin.ToolInput{Tool: "panics"}, abi.CodeInternal, `tool "panics" panicked: boom`},
		{"coded error", plugin.ExportCallTool, plugin.ToolInput{Tool: "fails"}, abi.CodeUnavailable, "the service is down"},
		{"plain error", plugin.ExportCallTool, plugin.ToolInput{Tool: "plainerr"}, abi.CodeInternal, "plain"},
		{"nil response", plugin.ExportGenerate, plugin.GenerateInput{Model: "nil", Request: &abi.GenerateRequest{}}, abi.CodeInternal, `model "nil" returned no response`},
		{"invalid directive", plugin.ExportHandle, abi.HandlerInput{Handler: "bad", Point: abi.HookTurnEnd}, abi.CodeInternal, `handler "bad": abi: unknown directive action "explode"`},
	} {
		out, aerr := dispatchJSON(t, r, tc.export, tc.input)
		if aerr == nil {
			t.Errorf("%s: output %s, want an error", tc.name, out)
			continue
		}
		if aerr.Code != tc.code || !strings.Contains(aerr.Message, tc.want) {
			t.Errorf("%s: error = %v, want %s containing %q", tc.name, aerr, tc.code, tc.want)
		}
	}
}

func TestGenerateAndHandle(t *testing.T) {
	r := testRegistry()
	out, aerr := dispatchJSON(t, r, plugin.ExportGenerate, plugin.GenerateInput{Model: "echo", Request: &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("hi")}}})
	if aerr != nil {
		t.Fatal(aerr)
	}
	var resp abi.GenerateResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "echo: hi" || resp.FinishReason != abi.FinishStop {
		t.Errorf("response = %s", out)
	}

	out, aerr = dispatchJSON(t, r, plugin.ExportHandle, abi.HandlerInput{Handler: "greet", Point: abi.HookTurnStart, Input: []*abi.Message{abi.NewUserTextMessage("hi")}})
	if aerr != nil || string(out) != `{"action":"reply","text":"hello"}` {
		t.Errorf("greet = %s, %v", out, aerr)
	}
	out, aerr = dispatchJSON(t, r, plugin.ExportHandle, abi.HandlerInput{Handler: "greet", Point: abi.HookTurnEnd})
	if aerr != nil || string(out) != `{"action":"continue"}` {
		t.Errorf("greet with a nil directive = %s, %v", out, aerr)
	}
}

func TestOutputLimit(t *testing.T) {
	r := newRegistry()
	r.setInfo(Info{Name: "p"})
	addTool(r, "huge", "", func(context.Context, struct{}) (string, error) { return strings.Repeat("a", maxOutput), nil })
	_, aerr := dispatchJSON(t, r, plugin.ExportCallTool, `{"tool":"huge"}`)
	if aerr == nil || aerr.Code != abi.CodeLimitExceeded {
		t.Errorf("error = %v, want limit_exceeded", aerr)
	}
}

// fakeKernel records what an export set.
type fakeKernel struct {
	in          []byte
	out, errOut []byte
	inputRead   bool
}

func (k *fakeKernel) input() []byte      { k.inputRead = true; return k.in }
func (k *fakeKernel) setOutput(b []byte) { k.out = b }
func (k *fakeKernel) setError(b []byte)  { k.errOut = b }

func TestServe(t *testing.T) {
	r := testRegistry()
	k := &fakeKernel{in: []byte(`{"tool":"add","input":{"a":1,"b":2}}`)}
	if rc := serve(k, r, plugin.ExportCallTool); rc != 0 || string(k.out) != `{"output":{"sum":3}}` || k.errOut != nil {
		t.Errorf("serve = %d, output %s, error %s", rc, k.out, k.errOut)
	}
	k = &fakeKernel{in: []byte(`{"tool":"nope"}`)}
	if rc := serve(k, r, plugin.ExportCallTool); rc != 1 || k.out != nil || string(k.errOut) != `{"code":"not_found","message":"no tool \"nope\""}` {
		t.Errorf("serve = %d, output %s, error %s", rc, k.out, k.errOut)
	}
	k = &fakeKernel{}
	var d plugin.Descriptor
	if rc := serve(k, r, plugin.ExportDescribe); rc != 0 || k.inputRead || json.Unmarshal(k.out, &d) != nil || d.Name != "test-plugin" {
		t.Errorf("describe = %d, output %s, read input %v", rc, k.out, k.inputRead)
	}
}

// FuzzDispatch checks that no input makes an export panic or answer with something
// that is neither JSON nor an error.
func FuzzDispatch(f *testing.F) {
	for _, s := range []string{
		`{"tool":"add","input":{"a":1}}`, `{"tool":"approve","input":{},"resumed":{"approved":true}}`,
		`{"model":"echo","request":{"messages":[{"role":"user","content":[{"text":"hi"}]}]}}`,
		`{"handler":"greet","point":"turnStart","input":[{"role":"user","content":[{"text":"hi"}]}]}`,
		``, `{`, `null`, `"x"`, `{"tool":"panics"}`, `{"model":"echo","request":{"messages":[]}}`,
	} {
		f.Add(s)
	}
	r := testRegistry()
	f.Fuzz(func(t *testing.T, in string) {
		for _, export := range []string{plugin.ExportCallTool, plugin.ExportGenerate, plugin.ExportHandle} {
			out, aerr := r.dispatch(export, []byte(in))
			if aerr == nil && !json.Valid(out) {
				t.Errorf("%s(%q) = %q: not JSON", export, in, out)
			}
			if aerr != nil && aerr.Code == "" {
				t.Errorf("%s(%q): error without a code", export, in)
			}
		}
	})
}

// TestWasmNames checks the literal names of the wasip1 build's exports and imports
// against the abi constants.
func TestWasmNames(t *testing.T) {
	src, err := os.ReadFile("kernel_wasip1.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, e := range []string{plugin.ExportDescribe, plugin.ExportGenerate, plugin.ExportCallTool, plugin.ExportHandle, plugin.ExportInputBuffer} {
		if !strings.Contains(s, "//go:wasmexport "+e+"\n") {
			t.Errorf("no //go:wasmexport %s", e)
		}
	}
	for _, fn := range []string{
		plugin.FnSessionID, plugin.FnStateGet, plugin.FnStateSet, plugin.FnMessagesGet, plugin.FnMessagesAppend,
		plugin.FnMessagesSet, plugin.FnArtifactAdd, plugin.FnStream, plugin.FnConfigGet, plugin.FnSecretGet,
		plugin.FnHTTPRequest, plugin.FnHTTPRead, plugin.FnHTTPClose, plugin.FnLog,
	} {
		if !strings.Contains(s, "//go:wasmimport "+plugin.HostModule+" "+fn+"\n") {
			t.Errorf("no //go:wasmimport %s %s", plugin.HostModule, fn)
		}
	}
}

// TestRawToolInput checks that a tool taking json.RawMessage gets its input as sent,
// in a copy of its own: the call's input buffer is reused by the next call.
func TestRawToolInput(t *testing.T) {
	r := testRegistry()
	var kept json.RawMessage
	addTool(r, "raw", "Keeps its input.", func(_ context.Context, in json.RawMessage) (int, error) {
		kept = in
		return len(in), nil
	})
	input := []byte(`{"tool":"raw","input":{"b": 1, "a":[2]}}`)
	out, aerr := r.dispatch(plugin.ExportCallTool, input)
	if aerr != nil {
		t.Fatal(aerr)
	}
	if string(out) != `{"output":17}` {
		t.Errorf("output = %s", out)
	}
	clear(input) // as the next call's input would overwrite it
	if string(kept) != `{"b": 1, "a":[2]}` {
		t.Errorf("the tool's input is %q after the call's input buffer was reused", kept)
	}
	// The input is a slice of the call's, found past whitespace before the object.
	out, aerr = r.dispatch(plugin.ExportCallTool, []byte(" \n\t{\"tool\":\"raw\",\"input\":[1, 2]}"))
	if aerr != nil || string(out) != `{"output":6}` || string(kept) != `[1, 2]` {
		t.Errorf("with leading whitespace: %s, %v, the tool's input %q", out, aerr, kept)
	}
	// A raw input passed back out is the output, compacted.
	addTool(r, "echo", "Echoes its input.", func(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil })
	out, aerr = r.dispatch(plugin.ExportCallTool, []byte("\n\t {\"tool\":\"echo\",\"input\":[1, 2]}"))
	if aerr != nil || string(out) != `{"output":[1,2]}` {
		t.Errorf("echoed after whitespace: %s, %v; want {\"output\":[1,2]}", out, aerr)
	}
}

// TestToolCallEnvelope checks the call's own fields as the SDK reads them; of a
// repeated key the first counts (the host never repeats one).
func TestToolCallEnvelope(t *testing.T) {
	r := testRegistry()
	for in, want := range map[string]string{
		`{"tool":1}`: "not a string",
		`{"tool":"add","input":{"a":1},"resumed":[1]}`: "resumed",
		` {"input":{"a":1}}`:                           "names no tool",
	} {
		_, aerr := r.dispatch(plugin.ExportCallTool, []byte(in))
		if aerr == nil || aerr.Code != abi.CodeInvalidInput || !strings.Contains(aerr.Message, want) {
			t.Errorf("%s: error = %v, want invalid_input mentioning %q", in, aerr, want)
		}
	}
	out, aerr := r.dispatch(plugin.ExportCallTool, []byte(`{"tool":"add","input":{"a":1,"b":2},"tool":"ignored"}`))
	if aerr != nil || string(out) != `{"output":{"sum":3}}` {
		t.Errorf("with a repeated key: %s, %v", out, aerr)
	}
	// Keys and the tool's name are read as encoding/json reads them, escapes and all.
	out, aerr = r.dispatch(plugin.ExportCallTool, []byte(`{"t\u006fol":"\u0061dd","input":{"a":1,"b":2}}`))
	if aerr != nil || string(out) != `{"output":{"sum":3}}` {
		t.Errorf("with escapes: %s, %v", out, aerr)
	}
}

func TestUnquote(t *testing.T) {
	for in, want := range map[string]string{`""`: "", `"add"`: "add", `"a\"b\u00e9"`: `a"bé`, "\"\xff\"": "\ufffd"} {
		if got, ok := unquote([]byte(in)); !ok || got != want {
			t.Errorf("unquote(%q) = %q, %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{`1`, `null`, `{}`} {
		if got, ok := unquote([]byte(in)); ok {
			t.Errorf("unquote(%s) = %q, want not a string", in, got)
		}
	}
	if got, ok := unquote(nil); !ok || got != "" {
		t.Errorf("unquote(nil) = %q, %v", got, ok)
	}
}

// decodeTarget is a tool input of many kinds, for FuzzDecodeValid.
type decodeTarget struct {
	decodeEmbedded
	Text   string            `json:"text"`
	Int    int               `json:"int,omitempty"`
	Int8   int8              `json:"int8"`
	Uint   uint16            `json:"uint"`
	Float  float32           `json:"float"`
	Double float64           `json:"double"`
	Bool   bool              `json:"bool"`
	Quoted int               `json:"quoted,string"`
	Bytes  []byte            `json:"bytes"`
	List   []string          `json:"list"`
	Pair   [2]int            `json:"pair"`
	Map    map[string]int    `json:"map"`
	IntMap map[int]string    `json:"intMap"`
	Any    any               `json:"any"`
	Raw    json.RawMessage   `json:"raw"`
	Number json.Number       `json:"number"`
	Time   time.Time         `json:"time"`
	Ptr    *decodeTarget     `json:"ptr"`
	Skip   string            `json:"-"`
	Named  map[string]string `json:"Named"`
}

type decodeEmbedded struct {
	Inner string `json:"inner"`
}

// FuzzDecodeValid checks that decodeValid decodes a tool's input as encoding/json
// does: the same value, or the same error, into a struct and into an any.
func FuzzDecodeValid(f *testing.F) {
	for _, s := range []string{
		`{"text":"a\u00e9\ud800","int":1,"int8":-128,"uint":65535,"float":1.5e3,"double":-0,"bool":true}`,
		`{"quoted":"12","bytes":"aGk=","list":["x",null],"pair":[1,2,3],"map":{"a":1},"intMap":{"1":"x"}}`,
		`{"any":{"a":[1,"x",null]},"raw":[1, 2],"number":1e400,"time":"2026-11-23T19:53:00Z","inner":"e"}`,
		`{"ptr":{"ptr":{"text":"deep"}},"TEXT":"folded","named":{"k":"v"},"-":"x","Skip":"y"}`,
		`{"int":2.0}`, `{"uint8":300}`, `{"quoted":12}`, `{"bytes":"!!"}`, `{"intMap":{"x":"y"}}`,
		`{"double":1e400}`, `{"list":{}}`, `{"text":1}`, `[]`, `"x"`, `null`, `{"time":"yesterday"}`,
		"{\"text\":\"\xff\xfe\"}", `{"text":"a","text":"b"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return // decodeValid's callers check that first
		}
		var got, want decodeTarget
		gotErr, wantErr := decodeValid([]byte(in), &got), json.Unmarshal([]byte(in), &want)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeValid(%q) = %+v, %v; encoding/json: %+v, %v", in, got, gotErr, want, wantErr)
		}
		var gotAny, wantAny any
		gotErr, wantErr = decodeValid([]byte(in), &gotAny), json.Unmarshal([]byte(in), &wantAny)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(gotAny, wantAny) {
			t.Errorf("decodeValid(%q) into any = %#v, %v; encoding/json: %#v, %v", in, gotAny, gotErr, wantAny, wantErr)
		}
	})
}

// TestDeepInputWithoutSchema checks that a tool whose input has no schema (any) still
// refuses an input nested deeper than encoding/json decodes: with no schema, validate
// does not walk the input, and segmentio's decoder, recursive, has no limit of its own.
func TestDeepInputWithoutSchema(t *testing.T) {
	r := testRegistry()
	addTool(r, "anything", "Takes any value.", func(_ context.Context, in any) (bool, error) { return in != nil, nil })
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	_, aerr := r.dispatch(plugin.ExportCallTool, []byte(`{"tool":"anything","input":`+deep+`}`))
	if aerr == nil || aerr.Code != abi.CodeInvalidInput || !strings.Contains(aerr.Message, "exceeded max depth") {
		t.Errorf("a call with an input nested %d deep = %v, want invalid_input: exceeded max depth", maxDepth+1, aerr)
	}
	if _, aerr := r.dispatch(plugin.ExportCallTool, []byte(`{"tool":"anything","input":[[1]]}`)); aerr != nil {
		t.Errorf("a call with an input nested 2 deep: %v", aerr)
	}
}
