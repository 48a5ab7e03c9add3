package sdk

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// The schema inference documented on Tool. It is written against the standard library
// only, because it is compiled into every plugin; its rules follow the host's
// (internal/schema) where they overlap, except that recursive references become {}
// rather than $ref.

var (
	timeType          = reflect.TypeFor[time.Time]()
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	numberType        = reflect.TypeFor[json.Number]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshalType = reflect.TypeFor[json.Unmarshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// schemaFor returns the JSON Schema of T, or nil when T accepts any JSON value.
func schemaFor[T any]() map[string]any { return inferSchema(reflect.TypeFor[T]()) }

// inferSchema returns the JSON Schema of t, or nil when t accepts any JSON value.
func inferSchema(t reflect.Type) map[string]any {
	if t == nil {
		return nil
	}
	g := schemaGen{active: map[reflect.Type]bool{}}
	s := g.schema(t)
	if len(s) == 0 {
		return nil
	}
	return s
}

type schemaGen struct {
	// active holds the struct types being expanded, to cut recursion.
	active map[reflect.Type]bool
}

// implements reports whether t or *t implements iface.
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface)
}

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == numberType:
		return map[string]any{"type": "number"}
	case t == rawMessageType, implements(t, jsonMarshalerType), implements(t, jsonUnmarshalType):
		return map[string]any{}
	case implements(t, textMarshalerType):
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !implements(t.Elem(), jsonMarshalerType) && !implements(t.Elem(), textMarshalerType) {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return g.array(t)
	case reflect.Array:
		s := g.array(t)
		s["minItems"] = t.Len()
		s["maxItems"] = t.Len()
		return s
	case reflect.Map:
		k := t.Key()
		switch {
		case k.Kind() == reflect.String, implements(k, textMarshalerType):
		case k.Kind() >= reflect.Int && k.Kind() <= reflect.Uintptr:
		default:
			return map[string]any{} // encoding/json cannot encode it
		}
		s := map[string]any{"type": "object"}
		if v := g.schema(t.Elem()); len(v) > 0 {
			s["additionalProperties"] = v
		}
		return s
	case reflect.Struct:
		return g.object(t)
	}
	// Interfaces accept anything; channels, functions and complex numbers are not JSON.
	return map[string]any{}
}

func (g *schemaGen) array(t reflect.Type) map[string]any {
	s := map[string]any{"type": "array"}
	if items := g.schema(t.Elem()); len(items) > 0 {
		s["items"] = items
	}
	return s
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	if g.active[t] {
		return map[string]any{} // a recursive reference: any value
	}
	g.active[t] = true
	defer delete(g.active, t)
	props := map[string]any{}
	required := []string{}
	for _, f := range jsonFields(t) {
		var s map[string]any
		if f.quoted {
			s = map[string]any{"type": "string"}
		} else {
			s = g.schema(f.typ)
		}
		req := applyTags(s, f.tag)
		props[f.name] = s
		if !f.optional || req {
			required = append(required, f.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	name     string
	typ      reflect.Type
	tag      reflect.StructTag
	optional bool // omitempty or omitzero
	quoted   bool // the ",string" option
	depth    int  // embedding depth
	tagged   bool // the name comes from a json tag
}

// jsonFields lists the fields encoding/json encodes for struct type t, embedded structs'
// fields promoted, by its rules: a shallower field hides a deeper one of the same name;
// at the same depth a tagged field wins, and otherwise the name is dropped.
func jsonFields(t reflect.Type) []jsonField {
	var all []jsonField
	collectFields(t, 0, map[reflect.Type]bool{t: true}, &all)
	byName := map[string][]int{}
	var order []string
	for i, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], i)
	}
	var out []jsonField
	for _, name := range order {
		idx := byName[name]
		minDepth := all[idx[0]].depth
		for _, i := range idx {
			minDepth = min(minDepth, all[i].depth)
		}
		var top, tagged []int
		for _, i := range idx {
			if all[i].depth == minDepth {
				top = append(top, i)
				if all[i].tagged {
					tagged = append(tagged, i)
				}
			}
		}
		switch {
		case len(top) == 1:
			out = append(out, all[top[0]])
		case len(tagged) == 1:
			out = append(out, all[tagged[0]])
		}
	}
	return out
}

func collectFields(t reflect.Type, depth int, seen map[reflect.Type]bool, out *[]jsonField) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if !sf.IsExported() && ft.Kind() != reflect.Struct {
				continue
			}
			if name == "" && ft.Kind() == reflect.Struct {
				if !seen[ft] {
					seen[ft] = true
					collectFields(ft, depth+1, seen, out)
					delete(seen, ft)
				}
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		f := jsonField{name: name, typ: sf.Type, tag: sf.Tag, depth: depth, tagged: name != ""}
		if name == "" {
			f.name = sf.Name
		}
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "omitempty", "omitzero":
				f.optional = true
			case "string":
				switch ft := derefType(sf.Type); ft.Kind() {
				case reflect.Bool, reflect.String,
					reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
					reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
					reflect.Float32, reflect.Float64:
					f.quoted = true
				}
			}
		}
		*out = append(*out, f)
	}
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// itemKeys are the tag keys that, on an array, constrain its items.
var itemKeys = map[string]bool{
	"enum": true, "format": true, "pattern": true, "minLength": true, "maxLength": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
}

// applyTags adds a field's jsonschema tags to its schema s and reports whether the
// field is marked required.
func applyTags(s map[string]any, tag reflect.StructTag) (required bool) {
	if d, ok := tag.Lookup("jsonschema_description"); ok {
		s["description"] = d
	}
	raw, ok := tag.Lookup("jsonschema")
	if !ok {
		return false
	}
	for _, item := range splitEscaped(raw) {
		key, value, hasValue := strings.Cut(item, "=")
		key = strings.TrimSpace(key)
		if !hasValue {
			if key == "required" {
				required = true
			}
			continue
		}
		target := s
		if items, ok := s["items"].(map[string]any); ok && s["type"] == "array" && itemKeys[key] {
			target = items
		}
		switch key {
		case "description", "title", "format", "pattern":
			target[key] = value
		case "enum":
			var vals []any
			if prev, ok := target["enum"].([]any); ok {
				vals = prev
			}
			for v := range strings.SplitSeq(value, "|") {
				vals = append(vals, typedValue(target, v))
			}
			target["enum"] = vals
		case "default":
			target[key] = typedValue(target, value)
		case "example":
			// Repeatable, as in invopop/jsonschema: each adds to examples, which
			// tell the model (and the conformance suite) what a meaningful value is.
			examples, _ := target["examples"].([]any)
			target["examples"] = append(examples, typedValue(target, value))
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			if n, err := strconv.ParseFloat(value, 64); err == nil {
				target[key] = n
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			if n, err := strconv.Atoi(value); err == nil && n >= 0 {
				target[key] = n
			}
		}
	}
	return required
}

// typedValue converts a tag value to the JSON type of schema s, keeping the text when
// it does not parse.
func typedValue(s map[string]any, v string) any {
	switch s["type"] {
	case "integer":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case "number":
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			return n
		}
	case "boolean":
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return v
}

// splitEscaped splits a tag on commas, except those written \, which become commas.
func splitEscaped(s string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == ',':
			b.WriteByte(',')
			i++
		case s[i] == ',':
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(s[i])
		}
	}
	return append(out, b.String())
}
