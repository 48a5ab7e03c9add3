package conformance

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The suite makes tool inputs from their schemas: valid ones to check the tool works
// and answers within its output schema, invalid ones to check it refuses them with an
// error rather than a trap or a silent success.

// sample is one generated input and what it is meant to show.
type sample struct {
	what  string
	value any
}

const maxDepth = 8

// validSamples returns inputs that satisfy s: one with only the required properties,
// and, when it differs, one with every property. The suite checks each against s
// before using it.
func validSamples(s map[string]any) []sample {
	out := []sample{{"required properties only", instance(s, s, false, 0)}}
	if full := instance(s, s, true, 0); fmt.Sprint(full) != fmt.Sprint(out[0].value) {
		out = append(out, sample{"every property", full})
	}
	return out
}

// instance builds a value satisfying s (root resolves local $refs); all fills optional
// properties too.
func instance(s, root map[string]any, all bool, depth int) any {
	if s == nil || depth > maxDepth {
		return map[string]any{}
	}
	if ref, ok := s["$ref"].(string); ok {
		return instance(resolve(root, ref), root, all, depth+1)
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			if first, ok := alts[0].(map[string]any); ok {
				if k != "allOf" {
					return instance(first, root, all, depth+1)
				}
				merged := maps.Clone(s)
				delete(merged, "allOf")
				for _, a := range alts {
					if m, ok := a.(map[string]any); ok {
						maps.Copy(merged, m)
					}
				}
				return instance(merged, root, all, depth+1)
			}
		}
	}
	switch typeOf(s) {
	case "object":
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		required := stringList(s["required"])
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if all || slices.Contains(required, k) {
				ps, _ := props[k].(map[string]any)
				obj[k] = instance(ps, root, all, depth+1)
			}
		}
		for _, k := range required {
			if _, ok := obj[k]; !ok {
				obj[k] = "x" // required without a schema: anything
			}
		}
		return obj
	case "array":
		n := int(numberOr(s["minItems"], 0))
		if all && n == 0 && numberOr(s["maxItems"], 1) >= 1 {
			n = 1
		}
		items, _ := s["items"].(map[string]any)
		arr := make([]any, n)
		for i := range arr {
			arr[i] = instance(items, root, all, depth+1)
		}
		return arr
	case "string":
		switch s["format"] {
		case "date-time":
			return "2026-01-02T03:04:05Z"
		case "date":
			return "2026-01-02"
		case "email":
			return "ada@example.com"
		case "uri", "url":
			return "https://example.com/"
		case "uuid":
			return "123e4567-e89b-12d3-a456-426614174000"
		}
		n := int(numberOr(s["minLength"], 1))
		if max := numberOr(s["maxLength"], float64(n)); float64(n) > max {
			n = int(max)
		}
		return strings.Repeat("a", n)
	case "integer":
		return int(bounded(s, 1))
	case "number":
		return bounded(s, 1.5)
	case "boolean":
		return true
	case "null":
		return nil
	}
	return map[string]any{}
}

// bounded returns want moved inside the schema's numeric bounds.
func bounded(s map[string]any, want float64) float64 {
	if min, ok := number(s["minimum"]); ok && want < min {
		want = min
	}
	if min, ok := number(s["exclusiveMinimum"]); ok && want <= min {
		want = min + 1
	}
	if max, ok := number(s["maximum"]); ok && want > max {
		want = max
	}
	if max, ok := number(s["exclusiveMaximum"]); ok && want >= max {
		want = max - 1
	}
	return want
}

// invalidSamples returns inputs that violate s in plain ways: the wrong JSON type, a
// required property missing, a property of the wrong type, a property the schema
// forbids. A schema that constrains nothing yields none.
func invalidSamples(s map[string]any) []sample {
	if s == nil {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		s = resolve(s, ref)
	}
	var out []sample
	switch typeOf(s) {
	case "object":
		out = append(out, sample{"an array instead of an object", []any{1, 2}})
		base, _ := instance(s, s, false, 0).(map[string]any)
		props, _ := s["properties"].(map[string]any)
		for _, k := range stringList(s["required"]) {
			v := maps.Clone(base)
			delete(v, k)
			out = append(out, sample{fmt.Sprintf("required property %q missing", k), v})
			if ps, ok := props[k].(map[string]any); ok {
				if wrong, ok := wrongType(ps); ok {
					v := maps.Clone(base)
					v[k] = wrong
					out = append(out, sample{fmt.Sprintf("property %q of the wrong type", k), v})
				}
			}
			break // one required property shows the point
		}
		if extra, ok := s["additionalProperties"].(bool); ok && !extra {
			v := maps.Clone(base)
			v["unexpectedProperty"] = true
			out = append(out, sample{"a property the schema forbids", v})
		}
	case "":
		// No type: nothing plainly invalid.
	default:
		if wrong, ok := wrongType(s); ok {
			out = append(out, sample{"a value of the wrong type", wrong})
		}
	}
	return out
}

// wrongType returns a value whose JSON type s does not allow.
func wrongType(s map[string]any) (any, bool) {
	types := map[string]bool{}
	switch t := s["type"].(type) {
	case string:
		types[t] = true
	case []any:
		for _, e := range t {
			if n, ok := e.(string); ok {
				types[n] = true
			}
		}
	default:
		return nil, false
	}
	if types["number"] {
		types["integer"] = true
	}
	for _, c := range []struct {
		typ string
		v   any
	}{{"object", map[string]any{"unexpected": true}}, {"string", "not what the schema wants"}, {"boolean", true}, {"array", []any{}}, {"integer", 42}} {
		if !types[c.typ] {
			return c.v, true
		}
	}
	return nil, false
}

func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if n, ok := e.(string); ok && n != "null" {
				return n
			}
		}
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	return ""
}

// resolve follows a local reference ("#/$defs/X", "#/definitions/X").
func resolve(root map[string]any, ref string) map[string]any {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = root
	for _, p := range strings.Split(path, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	m, _ := cur.(map[string]any)
	return m
}

func stringList(v any) []string {
	arr, _ := v.([]any)
	var out []string
	for _, e := range arr {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	}
	return 0, false
}

func numberOr(v any, def float64) float64 {
	if n, ok := number(v); ok {
		return n
	}
	return def
}
