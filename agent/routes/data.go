package routes

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/internal/schema"
)

// Data is the data a route collects: a JSON object, field name to JSON value, checked
// against the route's schema. DataAs decodes it into the Go type the schema came from.
type Data map[string]any

// Has reports whether the field is known: present and not null. A SkipIf function uses
// it as seed 002's examples use !!data.field.
func (d Data) Has(field string) bool {
	v, ok := d[field]
	return ok && v != nil
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

// merge returns data with update's known fields merged in (null values are no news),
// after checking the result against the route's schema. Fields the schema does not
// define are refused too (a schema inferred from a Go type allows no others).
func (rt *Route) merge(data, update Data) (Data, error) {
	out := maps.Clone(data)
	if out == nil {
		out = Data{}
	}
	changed := false
	for _, k := range slices.Sorted(maps.Keys(update)) {
		if v := update[k]; v != nil {
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
