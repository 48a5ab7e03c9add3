package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// Info identifies a plugin and lists the capabilities it asks for. Pass it to Plugin.
type Info struct {
	// Name is the plugin's registry namespace: lower-case letters, digits, '_' and '-',
	// starting with a letter or digit, at most 64 bytes. Its models, tools and handlers
	// are registered by the host as /model/<Name>/<model>, /tool/<Name>/<tool> and
	// /handler/<Name>/<handler>.
	Name string
	// Version is the plugin's own version, for people (e.g. "1.2.0").
	Version string
	// Description says what the plugin is for.
	Description string
	// Capabilities lists what the plugin needs: session state access, HTTP hosts,
	// config keys and secrets. The operator's manifest grants them, or not.
	Capabilities plugin.Capabilities
}

// Plugin names the plugin and declares its capabilities. Call it once, from main or an
// init function.
func Plugin(info Info) { std.setInfo(info) }

// Tool registers a tool. Its input and output JSON Schemas are inferred from In and Out:
//
//   - structs become objects whose properties follow encoding/json's names and rules
//     (json tags, embedded structs, "-"); a field is required unless tagged omitempty or
//     omitzero; other properties are not allowed (additionalProperties: false);
//   - strings, bools, integers (unsigned ones with minimum 0) and floats become the
//     matching JSON types; []byte a base64 string; slices and arrays arrays; maps with
//     string (or integer, or text-marshalling) keys objects; pointers their element;
//     time.Time a string of format date-time; other types implementing
//     encoding.TextMarshaler a string;
//   - interfaces (any), json.RawMessage and other types with their own JSON encoding
//     (json.Marshaler or json.Unmarshaler) accept any value: no schema at the top level,
//     {} for a property;
//   - a recursive type's inner reference to itself is {} (any value): the schemas are
//     self-contained, without $ref.
//
// A struct field's `jsonschema` tag adds to its schema, as comma-separated key=value
// items (a comma inside a value is written \,): description, title, format, pattern,
// enum (values separated by '|', or repeated enum= items), default, example (repeatable:
// meaningful values, which the conformance suite sends), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems, maxItems, and the
// flag required (required even with omitempty). On a slice or array field, enum, format,
// pattern, minLength, maxLength and the numeric bounds apply to its items. A
// `jsonschema_description` tag sets the description verbatim. Unknown keys are ignored.
//
// The host validates the input against the input schema before the call; the SDK checks
// it again, then decodes it into In as encoding/json does (a type mismatch is reported as
// invalid_input). The strings decoded into In share one copy of the input, made for the
// call: a tool that keeps a short string of a large input past its call (in a cache, a
// global) keeps the whole input alive, unless it keeps strings.Clone of it.
// An In of json.RawMessage gets the input as the host sent it, neither checked against a
// schema nor decoded: in a wasm guest, where checking and decoding a MiB take a few
// milliseconds, the cheapest way to take a large input the tool only passes on or
// reads in part.
// To interrupt instead of answering, return the error of Interrupt. To answer with
// content parts (an image, a document, text for the model to read), return a
// *MultipartOutput.
func Tool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) {
	addTool(std, name, description, fn)
}

// MultipartOutput is what a tool returns to answer with content parts besides or
// instead of its output: Output becomes the tool response's output and Content its
// content (images, documents, text for the model to read), which the host's providers
// pass to the model. A tool whose output type is *MultipartOutput declares no output
// schema.
type MultipartOutput struct {
	Output  any
	Content []*abi.Part
}

// Model registers a model. info may be nil (no declared capabilities). The model
// receives the request as the host sends it (system messages as messages with role
// system, config untouched) and may stream chunks with StreamChunk before returning the
// whole response.
func Model(name string, info *abi.ModelInfo, fn func(ctx context.Context, req *abi.GenerateRequest) (*abi.GenerateResponse, error)) {
	std.addModel(name, info, fn)
}

// Handler registers a handler called at the given points of a turn (at least one). It
// reads and changes the session through the state functions (State, SetState, Messages,
// AppendMessages, SetMessages, AddArtifact) and answers with a directive; a nil
// directive means continue.
func Handler(name, description string, fn func(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error), points ...abi.HookPoint) {
	std.addHandler(name, description, fn, points)
}

// std is the registry the package-level functions fill and the exports serve.
var std = newRegistry()

type toolEntry struct {
	def *abi.ToolDefinition
	// call decodes the raw JSON input and runs the tool.
	call func(ctx context.Context, input json.RawMessage) (any, error)
}

type modelEntry struct {
	desc plugin.ModelDescriptor
	fn   func(context.Context, *abi.GenerateRequest) (*abi.GenerateResponse, error)
}

type handlerEntry struct {
	desc plugin.HandlerDescriptor
	fn   func(context.Context, *abi.HandlerInput) (*abi.Directive, error)
}

// registry holds what a plugin registered. Registration problems (a bad or duplicate
// name) are kept and reported by every export, so that the host refuses the plugin
// with a clear message instead of the plugin trapping.
type registry struct {
	mu       sync.Mutex
	info     *Info
	models   []*modelEntry
	tools    []*toolEntry
	handlers []*handlerEntry
	errs     []error
}

func newRegistry() *registry { return &registry{} }

func (r *registry) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *registry) setInfo(info Info) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.info != nil {
		r.errs = append(r.errs, fmt.Errorf("sdk.Plugin called twice (%q, then %q)", r.info.Name, info.Name))
		return
	}
	if err := validPluginName(info.Name); err != nil {
		r.errs = append(r.errs, err)
	}
	r.info = &info
}

func addTool[In, Out any](r *registry, name, description string, fn func(context.Context, In) (Out, error)) {
	if fn == nil {
		r.fail(fmt.Errorf("tool %q: nil function", name))
		return
	}
	def := &abi.ToolDefinition{
		Name:        name,
		Description: description,
		InputSchema: schemaFor[In](),
	}
	if _, multipart := any(*new(Out)).(*MultipartOutput); !multipart {
		def.OutputSchema = schemaFor[Out]()
	}
	schema := compileSchema(def.InputSchema)
	call := func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in In
		if len(raw) == 0 || string(raw) == "null" {
			raw = json.RawMessage("{}") // hosts may omit the input of a tool taking none
		}
		if err := schema.validate(raw); err != nil {
			return nil, abi.Errorf(abi.CodeInvalidInput, "tool %q: input: %v", name, err)
		}
		var err error
		switch p, isRaw := any(&in).(*json.RawMessage); {
		case isRaw:
			// Raw JSON is passed on as it came (valid: the call's input was checked),
			// copied because raw is the call's input buffer, which the next call reuses.
			*p = bytes.Clone(raw)
		case def.InputSchema == nil:
			// Nothing bounded the input's nesting (validate walks it only against a
			// schema), and decodeValid's decoder, recursive, has no limit of its own.
			err = json.Unmarshal(raw, &in)
		default:
			err = decodeValid(raw, &in)
		}
		if err != nil {
			return nil, abi.Errorf(abi.CodeInvalidInput, "tool %q: input: %v", name, err)
		}
		return fn(ctx, in)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := validMemberName("tool", name); err != nil {
		r.errs = append(r.errs, err)
		return
	}
	if slices.ContainsFunc(r.tools, func(t *toolEntry) bool { return t.def.Name == name }) {
		r.errs = append(r.errs, fmt.Errorf("tool %q registered twice", name))
		return
	}
	r.tools = append(r.tools, &toolEntry{def: def, call: call})
}

func (r *registry) addModel(name string, info *abi.ModelInfo, fn func(context.Context, *abi.GenerateRequest) (*abi.GenerateResponse, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := validMemberName("model", name); err != nil {
		r.errs = append(r.errs, err)
		return
	}
	if fn == nil {
		r.errs = append(r.errs, fmt.Errorf("model %q: nil function", name))
		return
	}
	if slices.ContainsFunc(r.models, func(m *modelEntry) bool { return m.desc.Name == name }) {
		r.errs = append(r.errs, fmt.Errorf("model %q registered twice", name))
		return
	}
	r.models = append(r.models, &modelEntry{desc: plugin.ModelDescriptor{Name: name, Info: info}, fn: fn})
}

func (r *registry) addHandler(name, description string, fn func(context.Context, *abi.HandlerInput) (*abi.Directive, error), points []abi.HookPoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := validMemberName("handler", name); err != nil {
		r.errs = append(r.errs, err)
		return
	}
	if fn == nil {
		r.errs = append(r.errs, fmt.Errorf("handler %q: nil function", name))
		return
	}
	if len(points) == 0 {
		r.errs = append(r.errs, fmt.Errorf("handler %q: no hook points (want one or more of turnStart, beforeGenerate, afterGenerate, turnEnd)", name))
		return
	}
	var ps []abi.HookPoint
	for _, p := range points {
		if !p.Valid() {
			r.errs = append(r.errs, fmt.Errorf("handler %q: unknown hook point %q (want turnStart, beforeGenerate, afterGenerate or turnEnd)", name, p))
			return
		}
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	if slices.ContainsFunc(r.handlers, func(h *handlerEntry) bool { return h.desc.Name == name }) {
		r.errs = append(r.errs, fmt.Errorf("handler %q registered twice", name))
		return
	}
	r.handlers = append(r.handlers, &handlerEntry{
		desc: plugin.HandlerDescriptor{Name: name, Description: description, Points: ps},
		fn:   fn,
	})
}

// err returns the registration problems as one internal error, or nil.
func (r *registry) err() *abi.Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := r.errs
	if r.info == nil {
		errs = append(slices.Clip(errs), errors.New("sdk.Plugin was not called: a plugin needs a name"))
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return abi.Errorf(abi.CodeInternal, "plugin registration failed: %s", strings.Join(msgs, "; "))
}

func (r *registry) descriptor() *plugin.Descriptor {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := &plugin.Descriptor{
		ABI:          plugin.Version,
		Name:         r.info.Name,
		Version:      r.info.Version,
		Description:  r.info.Description,
		Capabilities: r.info.Capabilities,
	}
	for _, m := range r.models {
		d.Models = append(d.Models, m.desc)
	}
	for _, t := range r.tools {
		d.Tools = append(d.Tools, t.def)
	}
	for _, h := range r.handlers {
		d.Handlers = append(d.Handlers, h.desc)
	}
	return d
}

func (r *registry) tool(name string) *toolEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tools {
		if t.def.Name == name {
			return t
		}
	}
	return nil
}

// toolNamed returns the tool whose name the JSON value v is, if v is a string written
// without escapes, or nil. It looks the name up as written, without the copy unquote
// makes: in a wasm guest, an allocation on every call.
func (r *registry) toolNamed(v []byte) *toolEntry {
	if len(v) < 3 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return nil
	}
	return r.tool(unsafe.String(&v[1], len(v)-2)) // tool keeps nothing of the name
}

func (r *registry) model(name string) *modelEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.models {
		if m.desc.Name == name {
			return m
		}
	}
	return nil
}

func (r *registry) handler(name string) *handlerEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.handlers {
		if h.desc.Name == name {
			return h
		}
	}
	return nil
}

// validPluginName checks a plugin name against ABI.md: [a-z0-9][a-z0-9_-]*, at most
// 64 bytes.
func validPluginName(name string) error {
	if name == "" {
		return errors.New("sdk.Plugin: the plugin name is empty")
	}
	if len(name) > 64 {
		return fmt.Errorf("sdk.Plugin: the plugin name %q is longer than 64 bytes", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '-')
		if !ok {
			return fmt.Errorf("sdk.Plugin: invalid plugin name %q (want lower-case letters, digits, '_' and '-', starting with a letter or digit)", name)
		}
	}
	return nil
}

// validMemberName checks a model, tool or handler name against ABI.md:
// [A-Za-z0-9][A-Za-z0-9_.-]*, at most 64 bytes; model names may also hold '/' and ':'
// (providers' names) and run to 128 bytes.
func validMemberName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%s name is empty", kind)
	}
	limit := 64
	if kind == "model" {
		limit = 128
	}
	if len(name) > limit {
		return fmt.Errorf("%s name %q is longer than %d bytes", kind, name, limit)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '_' || c == '.' || c == '-') ||
			i > 0 && kind == "model" && (c == '/' || c == ':')
		if !ok {
			return fmt.Errorf("invalid %s name %q (want letters, digits, '_', '.' and '-'%s, starting with a letter or digit)", kind, name, map[bool]string{true: ", '/' and ':'"}[kind == "model"])
		}
	}
	return nil
}
