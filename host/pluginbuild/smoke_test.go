package pluginbuild

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// These smoke tests load first-party plugins with the extism go-sdk directly and a fake
// host (terrarium:host/v1 backed by a map), to prove the SDK speaks the ABI. The real
// host in package host tests the protocol in depth.
//
// They use wazero's interpreter: compiling a Go module (4-5 MB) takes about 15 s under
// the race detector, against about 1.5 s to interpret what these tests run.

// fakeHost is a session for one plugin instance: custom state, streamed values and log
// lines.
type fakeHost struct {
	mu       sync.Mutex
	state    []byte // JSON; nil means no state
	noState  bool   // state functions fail with no_session
	streamed []string
	logs     []string
}

func ok(payload []byte) []byte { return append([]byte{plugin.ResultOK}, payload...) }

func fail(code abi.ErrorCode, msg string) []byte {
	b, _ := json.Marshal(abi.Errorf(code, "%s", msg))
	return append([]byte{plugin.ResultError}, b...)
}

// functions returns every host function of plugin.HostModule: a Go plugin imports them
// all, so instantiation fails if one is missing.
func (h *fakeHost) functions() []extism.HostFunction {
	i64 := extism.ValueTypeI64
	def := func(name string, nparams int, f func(p *extism.CurrentPlugin, args []uint64) []byte) extism.HostFunction {
		params := make([]extism.ValueType, nparams)
		for i := range params {
			params[i] = i64
		}
		hf := extism.NewHostFunctionWithStack(name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			h.mu.Lock()
			res := f(p, stack[:nparams])
			h.mu.Unlock()
			off, err := p.WriteBytes(res)
			if err != nil {
				panic(err)
			}
			stack[0] = off
		}, params, []extism.ValueType{i64})
		hf.SetNamespace(plugin.HostModule)
		return hf
	}
	read := func(p *extism.CurrentPlugin, off uint64) []byte {
		if off == 0 {
			return nil
		}
		b, err := p.ReadBytes(off)
		if err != nil {
			panic(err)
		}
		return b
	}
	denied := func(p *extism.CurrentPlugin, _ []uint64) []byte {
		return fail(abi.CodePermissionDenied, "not granted by the fake host")
	}
	return []extism.HostFunction{
		def(plugin.FnSessionID, 0, func(*extism.CurrentPlugin, []uint64) []byte { return ok([]byte("session-1")) }),
		def(plugin.FnStateGet, 0, func(*extism.CurrentPlugin, []uint64) []byte {
			if h.noState {
				return fail(abi.CodeNoSession, "no session")
			}
			if h.state == nil {
				return ok([]byte("null"))
			}
			return ok(h.state)
		}),
		def(plugin.FnStateSet, 1, func(p *extism.CurrentPlugin, a []uint64) []byte {
			if h.noState {
				return fail(abi.CodeNoSession, "no session")
			}
			b := read(p, a[0])
			if !json.Valid(b) {
				return fail(abi.CodeInvalidInput, "state is not JSON")
			}
			h.state = b
			return ok(nil)
		}),
		def(plugin.FnMessagesGet, 0, denied),
		def(plugin.FnMessagesAppend, 1, denied),
		def(plugin.FnMessagesSet, 1, denied),
		def(plugin.FnArtifactAdd, 1, denied),
		def(plugin.FnStream, 1, func(p *extism.CurrentPlugin, a []uint64) []byte {
			h.streamed = append(h.streamed, string(read(p, a[0])))
			return ok(nil)
		}),
		def(plugin.FnConfigGet, 1, denied),
		def(plugin.FnSecretGet, 1, denied),
		def(plugin.FnHTTPRequest, 2, denied),
		def(plugin.FnHTTPRead, 2, func(*extism.CurrentPlugin, []uint64) []byte { return fail(abi.CodeNotFound, "no handle") }),
		def(plugin.FnHTTPClose, 1, func(*extism.CurrentPlugin, []uint64) []byte { return fail(abi.CodeNotFound, "no handle") }),
		def(plugin.FnLog, 2, func(p *extism.CurrentPlugin, a []uint64) []byte {
			h.logs = append(h.logs, string(read(p, a[1])))
			return ok(nil)
		}),
	}
}

// load builds the first-party plugin in plugins/<name> (once per test binary) and
// instantiates it with the fake host.
func load(t *testing.T, name string, h *fakeHost) *extism.Plugin {
	t.Helper()
	return loadDir(t, filepath.Join("..", "..", "plugins", name), h)
}

// loadDir builds the plugin in dir and instantiates it with the fake host.
func loadDir(t *testing.T, dir string, h *fakeHost) *extism.Plugin {
	t.Helper()
	path := ForTest(t, dir)
	ctx := t.Context()
	p, err := extism.NewPlugin(ctx,
		extism.Manifest{Wasm: []extism.Wasm{extism.WasmFile{Path: path}}},
		extism.PluginConfig{
			EnableWasi:    true,
			RuntimeConfig: wazero.NewRuntimeConfigInterpreter(),
			ModuleConfig: wazero.NewModuleConfig().
				WithSysWalltime().WithSysNanotime().WithSysNanosleep().
				WithRandSource(rand.Reader),
		},
		h.functions())
	if err != nil {
		t.Fatalf("loading %s: %v", dir, err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// call calls an export and returns its output, or the error it set.
func call(t *testing.T, p *extism.Plugin, export string, input any) ([]byte, *abi.Error) {
	t.Helper()
	var in []byte
	switch v := input.(type) {
	case nil:
	case string:
		in = []byte(v)
	default:
		var err error
		if in, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	rc, out, err := p.CallWithContext(t.Context(), export, in)
	if err != nil {
		if rc != 1 {
			t.Fatalf("%s: rc %d, error %v (a trap?)", export, rc, err)
		}
		return nil, plugin.DecodeError(err.Error())
	}
	if rc != 0 {
		t.Fatalf("%s: rc %d without an error", export, rc)
	}
	return out, nil
}

func mustCall(t *testing.T, p *extism.Plugin, export string, input any, into any) {
	t.Helper()
	out, aerr := call(t, p, export, input)
	if aerr != nil {
		t.Fatalf("%s: %v", export, aerr)
	}
	if into != nil {
		if err := json.Unmarshal(out, into); err != nil {
			t.Fatalf("%s: output %s: %v", export, out, err)
		}
	}
}

func TestSmokeCalculator(t *testing.T) {
	t.Parallel()
	p := load(t, "calculator", &fakeHost{})

	var d plugin.Descriptor
	mustCall(t, p, plugin.ExportDescribe, nil, &d)
	if d.ABI != plugin.Version || d.Name != "calculator" || len(d.Tools) != 1 || d.Tools[0].Name != "calc" {
		t.Fatalf("descriptor = %+v", d)
	}
	props, _ := d.Tools[0].InputSchema["properties"].(map[string]any)
	if _, ok := props["expression"]; !ok {
		t.Errorf("input schema = %v, want an expression property", d.Tools[0].InputSchema)
	}

	var out struct {
		Output struct {
			Value      float64 `json:"value"`
			Expression string  `json:"expression"`
		} `json:"output"`
	}
	mustCall(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "calc", Input: map[string]any{"expression": "(1.5 + 2) * -4 % 5"}}, &out)
	if out.Output.Value != -4 || out.Output.Expression != "(1.5 + 2) * -4 % 5" {
		t.Errorf("calc = %+v, want -4", out.Output)
	}

	for _, tc := range []struct {
		name  string
		input any
		code  abi.ErrorCode
		want  string
	}{
		{"division by zero", plugin.ToolInput{Tool: "calc", Input: map[string]any{"expression": "1/(2-2)"}}, abi.CodeInvalidInput, "division by zero"},
		{"not arithmetic", plugin.ToolInput{Tool: "calc", Input: map[string]any{"expression": "os.Exit(1)"}}, abi.CodeInvalidInput, "function call"},
		{"unknown tool", plugin.ToolInput{Tool: "nope", Input: map[string]any{}}, abi.CodeNotFound, "nope"},
		{"empty input", "", abi.CodeInvalidInput, "empty input"},
		{"truncated input", `{"tool":"calc","input":{"expr`, abi.CodeInvalidInput, "malformed"},
		{"wrong type", `{"tool":"calc","input":{"expression":42}}`, abi.CodeInvalidInput, "expression"},
	} {
		_, aerr := call(t, p, plugin.ExportCallTool, tc.input)
		if aerr == nil || aerr.Code != tc.code || !strings.Contains(aerr.Message, tc.want) {
			t.Errorf("%s: error = %v, want %s containing %q", tc.name, aerr, tc.code, tc.want)
		}
	}
	// The instance survives bad input: it still answers.
	mustCall(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "calc", Input: map[string]any{"expression": "7/2"}}, &out)
	if out.Output.Value != 3.5 {
		t.Errorf("7/2 = %v", out.Output.Value)
	}
}

func TestSmokeScratchpadState(t *testing.T) {
	t.Parallel()
	h := &fakeHost{state: []byte(`{"other":{"kept":true}}`)}
	p := load(t, "scratchpad", h)

	var d plugin.Descriptor
	mustCall(t, p, plugin.ExportDescribe, nil, &d)
	if d.Capabilities.State != plugin.StateWrite {
		t.Errorf("capabilities = %+v, want state write", d.Capabilities)
	}
	var count struct {
		Output struct{ Count int } `json:"output"`
	}
	for i, text := range []string{"buy milk", "call Ada"} {
		mustCall(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "note", Input: map[string]any{"text": text}}, &count)
		if count.Output.Count != i+1 {
			t.Errorf("note %d: count = %d", i, count.Output.Count)
		}
	}
	var state map[string]any
	if err := json.Unmarshal(h.state, &state); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(state); string(got) != `{"other":{"kept":true},"scratchpad":["buy milk","call Ada"]}` {
		t.Errorf("state = %s", got)
	}
	var notes struct {
		Output struct{ Notes []string } `json:"output"`
	}
	mustCall(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "notes", Input: map[string]any{}}, &notes)
	if strings.Join(notes.Output.Notes, "|") != "buy milk|call Ada" {
		t.Errorf("notes = %v", notes.Output.Notes)
	}

	h.noState = true
	if _, aerr := call(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "notes", Input: map[string]any{}}); aerr == nil || aerr.Code != abi.CodeNoSession {
		t.Errorf("notes without a session: error = %v, want no_session", aerr)
	}
}

func TestSmokeProfileHandler(t *testing.T) {
	t.Parallel()
	h := &fakeHost{state: []byte(`{"theme":"dark"}`)}
	p := load(t, "profile", h)

	in := abi.HandlerInput{
		Handler: "extract",
		Point:   abi.HookTurnStart,
		Input:   []*abi.Message{abi.NewUserTextMessage("Hi! My name is Ada Lovelace and I live in London. I like tea and mathematics.")},
	}
	var d abi.Directive
	mustCall(t, p, plugin.ExportHandle, in, &d)
	if d.Action != abi.DirectiveContinue {
		t.Errorf("directive = %+v", d)
	}
	var state struct {
		Theme   string `json:"theme"`
		Profile struct {
			Name  string   `json:"name"`
			City  string   `json:"city"`
			Likes []string `json:"likes"`
		} `json:"profile"`
	}
	if err := json.Unmarshal(h.state, &state); err != nil {
		t.Fatal(err)
	}
	if state.Theme != "dark" || state.Profile.Name != "Ada Lovelace" || state.Profile.City != "London" ||
		strings.Join(state.Profile.Likes, "|") != "tea|mathematics" {
		t.Errorf("state = %s", h.state)
	}
	if len(h.streamed) != 1 || h.streamed[0] != `{"profile":"updated"}` {
		t.Errorf("streamed = %q", h.streamed)
	}

	// Nothing new: no state write, no status.
	before := string(h.state)
	mustCall(t, p, plugin.ExportHandle, in, &d)
	if string(h.state) != before || len(h.streamed) != 1 {
		t.Errorf("second run changed state to %s or streamed %q", h.state, h.streamed)
	}
}

func TestSmokeClock(t *testing.T) {
	t.Parallel()
	p := load(t, "clock", &fakeHost{})
	var out struct {
		Output struct {
			Time     string `json:"time"`
			Timezone string `json:"timezone"`
			Unix     int64  `json:"unix"`
		} `json:"output"`
	}
	mustCall(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "now", Input: map[string]any{"timezone": "Asia/Kolkata"}}, &out)
	now := time.Now().Unix()
	if out.Output.Timezone != "Asia/Kolkata" || !strings.HasSuffix(out.Output.Time, "+05:30") || out.Output.Unix < now-60 || out.Output.Unix > now+60 {
		t.Errorf("now = %+v (the guest's clock must be real)", out.Output)
	}
	if _, aerr := call(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "now", Input: map[string]any{"timezone": "Mars/Olympus"}}); aerr == nil || aerr.Code != abi.CodeInvalidInput {
		t.Errorf("unknown zone: error = %v, want invalid_input", aerr)
	}
}

func TestSmokeOfflineModel(t *testing.T) {
	t.Parallel()
	h := &fakeHost{}
	p := load(t, "offline", h)
	var d plugin.Descriptor
	mustCall(t, p, plugin.ExportDescribe, nil, &d)
	if len(d.Models) != 1 || d.Models[0].Name != "echo" || !d.Models[0].Info.Supports.Tools {
		t.Fatalf("models = %+v", d.Models)
	}

	generate := func(req *abi.GenerateRequest) *abi.GenerateResponse {
		t.Helper()
		h.streamed = nil
		var resp abi.GenerateResponse
		mustCall(t, p, plugin.ExportGenerate, plugin.GenerateInput{Model: "echo", Request: req}, &resp)
		return &resp
	}
	calc := &abi.ToolDefinition{Name: "calc", Description: "Calculates."}

	resp := generate(&abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("hello  there world")}})
	if resp.Text() != "echo: hello  there world" || resp.FinishReason != abi.FinishStop || resp.Usage.OutputCharacters != 24 {
		t.Errorf("echo = %+v", resp)
	}
	var acc abi.Accumulator
	for _, s := range h.streamed {
		var c abi.GenerateResponseChunk
		if err := json.Unmarshal([]byte(s), &c); err != nil {
			t.Fatal(err)
		}
		acc.Add(&c)
	}
	if len(h.streamed) != 4 || acc.Message(abi.RoleModel).Text() != resp.Text() {
		t.Errorf("streamed %q", h.streamed)
	}

	resp = generate(&abi.GenerateRequest{
		Messages: []*abi.Message{abi.NewUserTextMessage(`/call calc {"expression":"1+1"}`)},
		Tools:    []*abi.ToolDefinition{calc},
	})
	if trs := resp.ToolRequests(); len(trs) != 1 || trs[0].Name != "calc" || trs[0].Ref != "call-1" ||
		trs[0].Input.(map[string]any)["expression"] != "1+1" {
		t.Errorf("tool call = %+v", resp.Message)
	}

	resp = generate(&abi.GenerateRequest{Messages: []*abi.Message{
		abi.NewUserTextMessage(`/call calc {"expression":"1+1"}`),
		abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Ref: "call-1", Name: "calc"})),
		abi.NewToolMessage(&abi.ToolResponse{Ref: "call-1", Name: "calc", Output: map[string]any{"value": 2}}),
	}})
	if resp.Text() != `Tool results: {"value":2}` {
		t.Errorf("tool results = %q", resp.Text())
	}

	resp = generate(&abi.GenerateRequest{
		Messages: []*abi.Message{abi.NewUserTextMessage("a person please")},
		Output: &abi.OutputConfig{Format: "json", Schema: map[string]any{
			"type": "object", "required": []any{"name", "age", "tags", "home"},
			"properties": map[string]any{
				"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer", "minimum": 18},
				"tags": map[string]any{"type": "array"}, "nick": map[string]any{"type": "string"},
				"home": map[string]any{"type": "object", "required": []any{"city"}, "properties": map[string]any{"city": map[string]any{"enum": []any{"Oslo"}}}},
			},
		}},
	})
	if resp.Text() != `{"age":18,"home":{"city":"Oslo"},"name":"a","tags":[]}` {
		t.Errorf("json output = %q", resp.Text())
	}
}

func TestSmokeInitRegistrationPanicsAndInterrupts(t *testing.T) {
	t.Parallel()
	h := &fakeHost{}
	p := loadDir(t, filepath.Join("testdata", "initonly"), h)
	var out struct {
		Output    any            `json:"output"`
		Interrupt map[string]any `json:"interrupt"`
	}
	mustCall(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "hello", Input: map[string]any{"name": "Ada"}}, &out)
	if out.Output != "hello Ada" {
		t.Errorf("hello = %v", out.Output)
	}
	if len(h.logs) != 1 || h.logs[0] != "greeting name=Ada" {
		t.Errorf("logs = %q", h.logs)
	}
	_, aerr := call(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "panics", Input: map[string]any{}})
	if aerr == nil || aerr.Code != abi.CodeInternal || !strings.Contains(aerr.Message, `tool "panics" panicked: assignment to entry in nil map`) {
		t.Errorf("panicking tool: error = %v", aerr)
	}
	mustCall(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "approve", Input: map[string]any{}}, &out)
	if out.Interrupt["ask"] != "Proceed?" {
		t.Errorf("approve = %+v, want an interrupt", out)
	}
	out.Interrupt = nil
	mustCall(t, p, plugin.ExportCallTool, plugin.ToolInput{Tool: "approve", Input: map[string]any{}, Resumed: map[string]any{"approved": true}}, &out)
	if out.Output != "done" || out.Interrupt != nil {
		t.Errorf("resumed approve = %+v", out)
	}
}

func TestSmokeMainPanics(t *testing.T) {
	t.Parallel()
	p := loadDir(t, filepath.Join("testdata", "mainpanics"), &fakeHost{})
	for range 2 {
		_, aerr := call(t, p, plugin.ExportDescribe, nil)
		if aerr == nil || aerr.Code != abi.CodeInternal || !strings.Contains(aerr.Message, "main panicked: main failed") {
			t.Errorf("describe: error = %v, want main's panic", aerr)
		}
	}
}
