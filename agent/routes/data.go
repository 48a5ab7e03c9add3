package routes

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/internal/schema"
)

// Data is the data a route collects: a JSON object, field name to JSON value, checked
// against the route's schema. DataAs decodes it into the Go type the schema came from.
type Data map[string]any

// Has reports whether the field is known: present, not null and not a blank string. A
// SkipIf function uses it as seed 002's examples use !!data.field (which, unlike Has,
// also takes 0 and false for unknown: a route whose schema means "not stated" by
// such a value says so with EmptyKeyword).
func (d Data) Has(field string) bool {
	v, ok := d[field]
	return ok && !blank(v)
}

// EmptyKeyword is the keyword of a property schema listing the values that mean "not
// stated" for that field, besides null and blank strings, which always do:
// {"type": "integer", "x-empty": [0]}, {"type": "string", "x-empty": ["unknown",
// "n/a"]}. A value so marked is never collected: the step that asks for the field
// stays, and the field stays missing. Validators ignore the keyword.
const EmptyKeyword = "x-empty"

// blank reports whether v says nothing: null, or a string of spaces at most.
func blank(v any) bool {
	if v == nil {
		return true
	}
	s, ok := v.(string)
	return ok && strings.TrimSpace(s) == ""
}

// empty reports whether v, given for field, says nothing: blank, or one of the values
// the field's schema marks as empty (EmptyKeyword).
func (rt *Route) empty(field string, v any) bool {
	if blank(v) {
		return true
	}
	marked := rt.empties[field]
	if len(marked) == 0 {
		return false
	}
	v = generic(v)
	for _, e := range marked {
		if reflect.DeepEqual(v, e) {
			return true
		}
	}
	return false
}

// emptyValues reads the values each property of a schema marks as empty, in their
// JSON-decoded form so that they compare with what a model sends.
func emptyValues(props map[string]any) map[string][]any {
	out := map[string][]any{}
	for name, p := range props {
		p, _ := p.(map[string]any)
		e, ok := p[EmptyKeyword]
		if !ok {
			continue
		}
		values := []any{e}
		if list, ok := generic(e).([]any); ok {
			values = slices.Clone(list)
		}
		for i, v := range values {
			values[i] = generic(v)
		}
		out[name] = values
	}
	return out
}

// DataAs decodes data into T, typically the type whose schema the route has
// (SchemaFor[T]).
func DataAs[T any](d Data) (T, error) {
	var out T
	b, err := json.Marshal(d)
	if err != nil {
		return out, fmt.Errorf("routes: encoding data: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("routes: data does not decode into %T: %w", out, err)
	}
	return out, nil
}

// SkipIfData adapts a typed condition to StepSpec.SkipIf: the data is decoded into T
// (fields not collected yet hold their zero value). Data that does not decode does not
// skip the step.
func SkipIfData[T any](fn func(T) bool) func(Data) bool {
	return func(d Data) bool {
		v, err := DataAs[T](d)
		return err == nil && fn(v)
	}
}

// SchemaFor returns the JSON Schema of T, for RouteOptions.Schema: field names and
// rules of encoding/json (a field without omitempty is required), constraints from
// jsonschema struct tags (`jsonschema:"minimum=1,maximum=9"`).
func SchemaFor[T any]() map[string]any { return schema.For[T]() }

// validate checks data (possibly incomplete) against the route's schema.
func (rt *Route) validate(d Data) error {
	if rt.partial == nil {
		return nil
	}
	if err := rt.partial.Validate(map[string]any(d)); err != nil {
		return fmt.Errorf("routes: %w: route %q: %v", ErrInvalidData, rt.title, strings.TrimPrefix(err.Error(), schema.ErrInvalid.Error()+": "))
	}
	return nil
}

// merge returns data with update's fields merged in (empty values are no news), after
// checking the result against the route's schema: all of it or nothing, as strict
// agents and step tools want it. Fields the schema does not define are refused too (a
// schema inferred from a Go type allows no others).
func (rt *Route) merge(data, update Data) (Data, error) {
	out := maps.Clone(data)
	if out == nil {
		out = Data{}
	}
	changed := false
	for _, k := range slices.Sorted(maps.Keys(update)) {
		if v := update[k]; !rt.empty(k, v) {
			out[k] = v
			changed = true
		}
	}
	if !changed {
		return data, nil
	}
	if err := rt.validate(out); err != nil {
		return nil, err
	}
	return out, nil
}

// absorb merges what a model gave for rt, forgivingly: update's fields that are not
// empty, each validated alone against the route's schema, so that one bad field does
// not drop the good ones. A field that fails is dropped with a warning.
func (t *turn) absorb(rt *Route, step string, update Data) {
	var out Data
	for _, k := range slices.Sorted(maps.Keys(update)) {
		v := update[k]
		if rt.empty(k, v) {
			continue
		}
		if err := rt.validate(Data{k: v}); err != nil {
			t.warn(Warning{Code: WarnInvalidField, Route: rt.id, Step: step, Field: k,
				Message: fmt.Sprintf("%s: the value %s was dropped (%v)", k, truncate(asJSON(v), 80), err)})
			continue
		}
		if out == nil {
			out = maps.Clone(t.st.DataByRoute[rt.id])
			if out == nil {
				out = Data{}
			}
		}
		out[k] = v
	}
	if out != nil {
		t.st.DataByRoute[rt.id] = out
	}
}

// missing lists the fields among fields that data does not know yet.
func missing(d Data, fields []string) []string {
	var out []string
	for _, f := range fields {
		if !d.Has(f) {
			out = append(out, f)
		}
	}
	return out
}

// clone deep-copies data through JSON-shaped values, so that a session handed out
// shares nothing mutable with the one kept.
func (d Data) clone() Data {
	if d == nil {
		return nil
	}
	out := make(Data, len(d))
	for k, v := range d {
		out[k] = deepCopy(v)
	}
	return out
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// toData turns a Go value (a struct, a map) into Data in its JSON-decoded form, so
// that data compares, renders and snapshots the same wherever it came from.
func toData(v any) (Data, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out Data
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	return out, nil
}
