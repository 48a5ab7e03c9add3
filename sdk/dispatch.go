package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// maxOutput is the largest output a plugin may set (ABI.md, section 4).
const maxOutput = 16 << 20

// kernel is the Extism kernel as an export sees it: its input, and where its output or
// error goes. The wasip1 build implements it with the kernel's imports; tests fake it.
type kernel interface {
	input() []byte
	setOutput(b []byte)
	setError(b []byte)
}

// runMain runs the plugin's main function once, before the first call is served. The
// wasip1 build sets it; elsewhere there is no main to run.
var runMain = func() {}

// serve answers one call of an export: it reads the input, dispatches it to what the
// plugin registered and sets the output (returning 0) or an error (returning 1).
func serve(k kernel, r *registry, export string) int32 {
	runMain()
	var input []byte
	if export != plugin.ExportDescribe {
		input = k.input()
	}
	out, aerr := r.dispatch(export, input)
	if aerr != nil {
		b, err := json.Marshal(aerr)
		if err != nil {
			b = []byte(`{"code":"internal","message":"sdk: encoding an error failed"}`)
		}
		k.setError(b)
		return 1
	}
	k.setOutput(out)
	return 0
}

// dispatch answers the export with the given input: the output JSON, or an error.
func (r *registry) dispatch(export string, input []byte) (out []byte, aerr *abi.Error) {
	defer func() {
		if p := recover(); p != nil {
			out, aerr = nil, abi.Errorf(abi.CodeInternal, "%s panicked: %v", export, p)
		}
	}()
	if e := r.err(); e != nil {
		return nil, e
	}
	var v any
	var err error
	switch export {
	case plugin.ExportDescribe:
		v = r.descriptor()
	case plugin.ExportCallTool:
		out, err = r.callTool(input)
	case plugin.ExportGenerate:
		v, err = r.generate(input)
	case plugin.ExportHandle:
		v, err = r.handle(input)
	default:
		return nil, abi.Errorf(abi.CodeNotFound, "no export %q", export)
	}
	if err != nil {
		return nil, abi.AsError(err)
	}
	if out == nil {
		if out, err = json.Marshal(v); err != nil {
			return nil, abi.Errorf(abi.CodeInternal, "%s: encoding the output: %v", export, err)
		}
	}
	if len(out) > maxOutput {
		return nil, abi.Errorf(abi.CodeLimitExceeded, "%s: the output is %d bytes, more than the limit of %d", export, len(out), maxOutput)
	}
	return out, nil
}

// decodeInput decodes an export's input JSON into v, reporting any problem as
// invalid_input.
func decodeInput(export string, input []byte, v any) error {
	if len(input) == 0 {
		return abi.Errorf(abi.CodeInvalidInput, "%s: empty input", export)
	}
	if err := json.Unmarshal(input, v); err != nil {
		return abi.Errorf(abi.CodeInvalidInput, "%s: malformed input: %v", export, err)
	}
	return nil
}

// decodeValid decodes raw, which must be valid JSON nested at most maxDepth deep (as
// validate checks), into v as json.Unmarshal does. It decodes with
// segmentio/encoding/json, in one pass: encoding/json first scans the whole input for
// validity, with an indirect call per byte, which in a wasm guest made up a fifth of a
// tool call with 1 KiB of text (BENCHMARKS.md, "a Go guest decoding a tool's input").
// On an error it decodes again with encoding/json into a fresh value: segmentio's
// errors quote the rest of the input, encoding/json's name the field and the type, and
// the value and the error are then exactly encoding/json's.
//
// The strings decoded share one copy of raw (segmentio's DontCopyString), made for
// this call and never reused, instead of a copy each: in a wasm guest an allocation
// costs about half a microsecond, and a structured input has a string per field and
// item. A string that needed unescaping or had invalid UTF-8 is a copy of its own.
func decodeValid[T any](raw []byte, v *T) error {
	if _, err := segjson.Parse(bytes.Clone(raw), v, segjson.DontCopyString); err == nil {
		return nil
	}
	*v = *new(T)
	return json.Unmarshal(raw, v)
}

// callTool answers terrarium_call_tool: the input (plugin.ToolInput) is checked and its
// members found in one pass (scanJSON), without decoding it, so that the tool's input is
// decoded once, by the tool's own entry, straight into its input type (numbers keep
// their precision); encoding/json would scan it twice more on the way. The output is
// encoded around the tool's own, which is not scanned again either.
func (r *registry) callTool(input []byte) ([]byte, error) {
	const export = plugin.ExportCallTool
	if len(input) == 0 {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%s: empty input", export)
	}
	// The members' values as written, slices of input; of a repeated key the first
	// counts.
	var toolValue, in, resumed []byte
	valid := scanJSON(input, func(key, value []byte) {
		switch {
		case toolValue == nil && keyIs(key, "tool"):
			toolValue = value
		case in == nil && keyIs(key, "input"):
			in = value
		case resumed == nil && keyIs(key, "resumed"):
			resumed = value
		}
	})
	if !valid {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%s: malformed input: not valid JSON", export)
	}
	// An object, or null, which encoding/json would decode as an object without fields.
	if input = bytes.TrimLeft(input, " \t\r\n"); input[0] != '{' && input[0] != 'n' {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%s: malformed input: not a JSON object", export)
	}
	t := r.toolNamed(toolValue)
	if t == nil {
		name, ok := unquote(toolValue)
		if !ok {
			return nil, abi.Errorf(abi.CodeInvalidInput, "%s: malformed input: the tool's name is not a string", export)
		}
		if name == "" {
			return nil, abi.Errorf(abi.CodeInvalidInput, "%s: the input names no tool", export)
		}
		if t = r.tool(name); t == nil {
			return nil, abi.Errorf(abi.CodeNotFound, "no tool %q", name)
		}
	}
	name := t.def.Name
	ctx := context.Background()
	if resumed != nil && string(resumed) != "null" {
		var md map[string]any
		if err := json.Unmarshal(resumed, &md); err != nil {
			return nil, abi.Errorf(abi.CodeInvalidInput, "%s: malformed input: resumed: %v", export, err)
		}
		ctx = context.WithValue(ctx, resumedKey{}, md)
	}
	var output any
	err := protect("tool", name, func() error {
		var err error
		output, err = t.call(ctx, in)
		return err
	})
	if md, ok := interruptOf(err); ok {
		if md == nil {
			md = map[string]any{}
		}
		return json.Marshal(map[string]any{"interrupt": md})
	}
	if err != nil {
		return nil, err
	}
	var content []*abi.Part
	if mp, ok := output.(*MultipartOutput); ok {
		output = nil
		if mp != nil {
			output, content = mp.Output, mp.Content
		}
	}
	raw, err := json.Marshal(output)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInternal, "tool %q: encoding the output: %v", name, err)
	}
	// Not plugin.ToolOutput: its omitempty would drop a null output, and "output" must be
	// there for the host to tell an answer from an interrupt. The keys are in the order
	// json.Marshal gives a map's.
	out := make([]byte, 0, len(raw)+len(`{"output":}`))
	out = append(out, '{')
	if len(content) > 0 {
		parts, err := json.Marshal(content)
		if err != nil {
			return nil, abi.Errorf(abi.CodeInternal, "tool %q: encoding the content: %v", name, err)
		}
		out = append(append(append(out, `"content":`...), parts...), ',')
	}
	out = append(append(append(out, `"output":`...), raw...), '}')
	return out, nil
}

// keyIs reports whether key, a member's key as written (quoted), is name.
func keyIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return len(key) == len(name)+2 && string(key[1:len(key)-1]) == name
	}
	k, ok := unquote(key)
	return ok && k == name
}

// unquote returns the string the valid JSON value v is, "" if v is nil, or false if v
// is not a string. Without escapes, a string is its bytes between the quotes; encoding/json
// is for the rare one with escapes (in a wasm guest it costs microseconds a call).
func unquote(v []byte) (string, bool) {
	switch {
	case v == nil:
		return "", true
	case v[0] != '"':
		return "", false
	case bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v):
		return string(v[1 : len(v)-1]), true
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err == nil
}

func (r *registry) generate(input []byte) (any, error) {
	var in plugin.GenerateInput
	if err := decodeInput(plugin.ExportGenerate, input, &in); err != nil {
		return nil, err
	}
	if in.Model == "" {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%s: the input names no model", plugin.ExportGenerate)
	}
	m := r.model(in.Model)
	if m == nil {
		return nil, abi.Errorf(abi.CodeNotFound, "no model %q", in.Model)
	}
	if in.Request == nil {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%s: the input has no request", plugin.ExportGenerate)
	}
	var resp *abi.GenerateResponse
	ctx := context.WithValue(context.Background(), streamingKey{}, in.Stream)
	err := protect("model", in.Model, func() error {
		var err error
		resp, err = m.fn(ctx, in.Request)
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, abi.Errorf(abi.CodeInternal, "model %q returned no response", in.Model)
	}
	return resp, nil
}

func (r *registry) handle(input []byte) (any, error) {
	var in abi.HandlerInput
	if err := decodeInput(plugin.ExportHandle, input, &in); err != nil {
		return nil, err
	}
	if in.Handler == "" {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%s: the input names no handler", plugin.ExportHandle)
	}
	h := r.handler(in.Handler)
	if h == nil {
		return nil, abi.Errorf(abi.CodeNotFound, "no handler %q", in.Handler)
	}
	if !in.Point.Valid() {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%s: unknown hook point %q", plugin.ExportHandle, in.Point)
	}
	var d *abi.Directive
	err := protect("handler", in.Handler, func() error {
		var err error
		d, err = h.fn(context.Background(), &in)
		return err
	})
	if err != nil {
		return nil, err
	}
	if d == nil {
		d = &abi.Directive{Action: abi.DirectiveContinue}
	}
	if err := d.Validate(); err != nil {
		return nil, abi.Errorf(abi.CodeInternal, "handler %q: %v", in.Handler, err)
	}
	return d, nil
}

// protect runs f, turning a panic into an internal error naming what panicked, the
// kind's member name (the stack goes to the host's log). The name is formatted only
// then, not on every call.
func protect(kind, name string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			what := fmt.Sprintf("%s %q", kind, name)
			Log(plugin.LogError, fmt.Sprintf("%s panicked: %v\n%s", what, p, debug.Stack()))
			err = abi.Errorf(abi.CodeInternal, "%s panicked: %v", what, p)
		}
	}()
	return f()
}

type streamingKey struct{}

// Streaming reports whether the caller of a model listens for chunks (StreamChunk).
// A model calling a remote API asks it to stream only then.
func Streaming(ctx context.Context) bool {
	on, _ := ctx.Value(streamingKey{}).(bool)
	return on
}

type resumedKey struct{}

// Resumed returns the metadata a client restarted an interrupted tool with (e.g.
// {"approved": true}), and whether the call is such a restart. ctx is the context the
// tool was called with.
func Resumed(ctx context.Context) (map[string]any, bool) {
	md, ok := ctx.Value(resumedKey{}).(map[string]any)
	return md, ok
}

// interruptError is the error Interrupt returns.
type interruptError struct {
	metadata map[string]any
}

func (e *interruptError) Error() string { return "sdk: the tool interrupted" }

// Interrupt returns an error that a tool returns to interrupt instead of answering: the
// turn ends with finish reason interrupted, and the metadata (e.g. {"ask": "Send 10
// EUR?"}) tells the client what is needed. When the client restarts the tool, it is
// called again and Resumed reports the restart's metadata.
func Interrupt(metadata map[string]any) error { return &interruptError{metadata: metadata} }

func interruptOf(err error) (map[string]any, bool) {
	if err == nil {
		return nil, false // before ie, which escapes to the heap: an allocation every call
	}
	var ie *interruptError
	if errors.As(err, &ie) {
		return ie.metadata, true
	}
	return nil, false
}
