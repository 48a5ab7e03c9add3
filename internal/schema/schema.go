// Package schema infers JSON Schemas from Go types and validates JSON values against
// schemas. Agents, the plugin host and the conformance suite share it so that a schema
// means the same thing everywhere.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// For returns the JSON Schema of T. See Infer.
func For[T any]() map[string]any {
	return Infer(reflect.TypeFor[T]())
}

// Of returns the JSON Schema of v's type. See Infer.
func Of(v any) map[string]any {
	if v == nil {
		return nil
	}
	return Infer(reflect.TypeOf(v))
}

var (
	inferMu    sync.Mutex
	inferCache = map[reflect.Type]map[string]any{}
)

// Infer returns the JSON Schema of a Go type as a fresh map the caller may change.
// Struct fields follow encoding/json's names and rules (a field without omitempty is
// required), jsonschema struct tags add descriptions and constraints, and extra
// properties are not allowed. Definitions are inlined, so the schema is self-contained
// for providers that do not resolve references; only recursive types keep a "$defs"
// entry and refer to it. An interface type (any) yields nil: any JSON value.
func Infer(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface {
		return nil
	}
	inferMu.Lock()
	s, ok := inferCache[t]
	if !ok {
		s = infer(t)
		inferCache[t] = s
	}
	inferMu.Unlock()
	return clone(s).(map[string]any)
}

func infer(t reflect.Type) map[string]any {
	r := invopop.Reflector{AllowAdditionalProperties: false}
	raw, err := json.Marshal(r.ReflectFromType(t))
	if err != nil {
		// The reflector only builds values json can encode; failing here is a bug.
		panic(fmt.Sprintf("schema: encoding the schema of %s: %v", t, err))
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		panic(fmt.Sprintf("schema: decoding the schema of %s: %v", t, err))
	}
	defs, _ := doc["$defs"].(map[string]any)
	delete(doc, "$defs")
	delete(doc, "$schema")
	delete(doc, "$id")
	in := inliner{defs: defs, kept: map[string]any{}}
	out := in.expand(doc, nil).(map[string]any)
	if len(in.kept) > 0 {
		out["$defs"] = in.kept
	}
	return out
}

// inliner replaces "$ref": "#/$defs/X" with the definition of X, except where X is
// already being expanded (a recursive type), where the reference stays and X is kept.
type inliner struct {
	defs map[string]any
	kept map[string]any
}

const defsPrefix = "#/$defs/"

func (in *inliner) expand(v any, stack []string) any {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, defsPrefix) && len(v) == 1 {
			name := ref[len(defsPrefix):]
			for _, s := range stack {
				if s == name {
					if _, done := in.kept[name]; !done {
						in.kept[name] = nil // reserve, then fill without re-entering
						in.kept[name] = in.expand(in.defs[name], nil)
					}
					return map[string]any{"$ref": ref}
				}
			}
			return in.expand(in.defs[name], append(stack, name))
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = in.expand(e, stack)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = in.expand(e, stack)
		}
		return out
	}
	return v
}

func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = clone(e)
		}
		return out
	}
	return v
}

// Validator checks JSON values against one compiled schema.
type Validator struct {
	s *jsonschema.Schema
	// anything is set for a schema without assertions ({}, or annotations only),
	// which every value matches: Validate need not walk the value, which costs the
	// validator's garbage (BENCHMARKS.md, "Plugins: garbage per tool call").
	anything bool
}

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("does not match schema")

// Limits of the schemas Compile accepts. Schemas come from plugins and prompt files,
// and compiling one takes time growing with the square of its nesting: a 50 KB schema
// nested 5,000 levels keeps a core busy for minutes.
const (
	// MaxDepth is the deepest nesting of JSON objects and arrays in a schema.
	MaxDepth = 64
	// MaxBytes is the size of a schema's JSON.
	MaxBytes = 1 << 20
)

// Compile compiles a schema. A nil schema accepts any value. External references
// ("$ref": "file:///...", "https://...") are refused, never loaded: a schema refers
// to itself only ("#/$defs/x").
func Compile(schema map[string]any) (*Validator, error) {
	if schema == nil {
		return &Validator{}, nil
	}
	if deeper(schema, MaxDepth) {
		return nil, fmt.Errorf("schema: nested deeper than %d levels", MaxDepth)
	}
	key, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if len(key) > MaxBytes {
		return nil, fmt.Errorf("schema: %d bytes of JSON, more than the limit of %d", len(key), MaxBytes)
	}
	if v, ok := compiled.Load(string(key)); ok {
		return v.(*Validator), nil
	}
	// Round-trip through the validator's own decoder so numbers keep their precision.
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(key))
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:///schema.json", doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile("mem:///schema.json")
	if err != nil {
		return nil, fmt.Errorf("schema: not a valid JSON Schema: %w", err)
	}
	v, _ := compiled.LoadOrStore(string(key), &Validator{s: s, anything: annotationsOnly(schema)})
	return v.(*Validator), nil
}

// annotations are the keywords of JSON Schema 2020-12 that describe a value without
// asserting anything of it.
var annotations = map[string]bool{
	"title": true, "description": true, "$comment": true, "default": true,
	"examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// annotationsOnly reports whether schema has no keyword but annotations: every value
// matches it.
func annotationsOnly(schema map[string]any) bool {
	for k := range schema {
		if !annotations[k] {
			return false
		}
	}
	return true
}

// noLoader refuses to load anything: the validator's default loader reads files,
// which would let a plugin's schema make the host read (or hang on) its own.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q refused: a schema may refer to itself only", url)
}

// deeper reports whether v nests JSON objects and arrays more than max levels deep.
func deeper(v any, max int) bool {
	switch v := v.(type) {
	case map[string]any:
		if max == 0 {
			return true
		}
		for _, e := range v {
			if deeper(e, max-1) {
				return true
			}
		}
	case []any:
		if max == 0 {
			return true
		}
		for _, e := range v {
			if deeper(e, max-1) {
				return true
			}
		}
	}
	return false
}

// compiled caches validators by the JSON of their schema: tools and outputs are
// validated on every call, and their schemas rarely change.
var compiled sync.Map

// Validate checks a JSON-decoded value (or any Go value, which is first encoded to
// JSON) against the schema. The error wraps ErrInvalid and says where and why.
func (v *Validator) Validate(value any) error {
	if v == nil || v.s == nil || v.anything {
		return nil
	}
	inst, err := normalize(value)
	if err != nil {
		return err
	}
	if err := v.s.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w: %s", ErrInvalid, describe(ve))
		}
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// ValidateJSON checks raw JSON against the schema.
func (v *Validator) ValidateJSON(data []byte) error {
	if v == nil || v.s == nil {
		if !json.Valid(data) {
			return fmt.Errorf("%w: not valid JSON", ErrInvalid)
		}
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: not valid JSON: %v", ErrInvalid, err)
	}
	return v.Validate(inst)
}

// Validate compiles schema (cached) and validates value against it.
func Validate(schema map[string]any, value any) error {
	v, err := Compile(schema)
	if err != nil {
		return err
	}
	return v.Validate(value)
}

// normalize turns any Go value into the generic form the validator walks: maps, slices,
// strings, bools, json.Number and nil.
func normalize(value any) (any, error) {
	switch value.(type) {
	case nil, string, bool, json.Number, float64:
		return value, nil
	case map[string]any, []any:
		if plain(value) {
			return value, nil
		}
	}
	b, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot encode value: %v", ErrInvalid, err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// plain reports whether v holds only values the validator accepts without encoding.
func plain(v any) bool {
	switch v := v.(type) {
	case nil, string, bool, json.Number, float64:
		return true
	case map[string]any:
		for _, e := range v {
			if !plain(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !plain(e) {
				return false
			}
		}
		return true
	}
	return false
}

// describe flattens a validation error into one line naming each failing location.
func describe(ve *jsonschema.ValidationError) string {
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			msgs = append(msgs, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(msgs, "; ")
}
