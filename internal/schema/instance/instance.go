// Package instance makes values for JSON Schemas: the smallest valid one, one with every
// property, a range of valid ones to try a tool with, and invalid ones. The conformance suite feeds them to tools, and the
// rule-based models (plugins/offline, the providers' fake servers in
// sdk/provider/providertest) answer with them.
//
// It imports only the standard library, so that it compiles into GOOS=wasip1 plugins.
// Schemas are decoded JSON (map[string]any); local references ("#/$defs/X") are
// followed. Values are plain and short: strings "a" (or a value of their format),
// integers 1, numbers 1.5, booleans true, each moved inside the schema's bounds; the
// const or the first enum value when there is one; the first alternative of anyOf and
// oneOf, every part of allOf merged.
package instance

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// maxDepth bounds the nesting of a value (recursive schemas).
const maxDepth = 8

// Minimal returns a value valid against s with only the required properties of its
// objects and the fewest items its arrays allow. A nil or empty schema (any value)
// gives an empty object.
func Minimal(s map[string]any) any { return gen{root: s}.value(s, 0) }

// Full returns a value valid against s with every property of its objects and at least
// one item in its arrays when they allow one.
func Full(s map[string]any) any { return gen{root: s, all: true}.value(s, 0) }

// Valid returns values valid against s to try a tool with, each differing from the
// others: one with only the required properties, one with every property (nested
// objects filled, arrays given an item), one at the upper bounds (longest strings,
// largest numbers, most items, within limits), one per further enum value of a
// property, and the schema's own examples. Where a schema gives examples for a value,
// they stand for it in every sample: a free-form string a tool interprets (an
// expression, a time zone) is tried with a value the author says is meaningful.
// Callers should still check each value against s.
func Valid(s map[string]any) []Sample {
	out := []Sample{
		{"required properties only", gen{root: s, examples: true}.value(s, 0)},
		{"every property", gen{root: s, all: true, examples: true}.value(s, 0)},
		{"upper bounds", gen{root: s, all: true, upper: true, examples: true}.value(s, 0)},
	}
	full, _ := out[1].Value.(map[string]any)
	props, _ := s["properties"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		ps, _ := props[k].(map[string]any)
		enum, _ := ps["enum"].([]any)
		for i, e := range enum {
			if i == 0 || full == nil {
				continue // the first value is in every other sample
			}
			v := maps.Clone(full)
			v[k] = e
			out = append(out, Sample{fmt.Sprintf("%s = %v", k, e), v})
		}
	}
	examples, _ := s["examples"].([]any)
	for i, e := range examples {
		if i > 0 {
			out = append(out, Sample{fmt.Sprintf("example %d", i+1), e})
		}
	}
	// Drop samples that came out alike: a schema without optional properties or
	// bounds makes the same value several times.
	var unique []Sample
	seen := map[string]bool{}
	for _, smp := range out {
		key, _ := json.Marshal(smp.Value)
		if !seen[string(key)] {
			seen[string(key)] = true
			unique = append(unique, smp)
		}
	}
	return unique
}

// Bounds of the values made at the upper bounds, to keep them small.
const (
	maxLength = 1024
	maxItems  = 3
)

// gen makes values satisfying schemas: the required properties only unless all, at
// the lower bounds unless upper, the first of a schema's examples where it has them
// if examples. root resolves local $refs.
type gen struct {
	root                 map[string]any
	all, upper, examples bool
}

// value builds a value satisfying s.
func (g gen) value(s map[string]any, depth int) any {
	if s == nil || depth > maxDepth {
		return map[string]any{}
	}
	if ref, ok := s["$ref"].(string); ok {
		return g.value(resolve(g.root, ref), depth+1)
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if e, ok := s["examples"].([]any); ok && len(e) > 0 && g.examples {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		alts, _ := s[k].([]any)
		if len(alts) == 0 {
			continue
		}
		if k != "allOf" {
			first, _ := alts[0].(map[string]any)
			return g.value(first, depth+1)
		}
		return g.value(merge(s, alts), depth+1)
	}
	switch typeOf(s) {
	case "object":
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		required := stringList(s["required"])
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if g.all || slices.Contains(required, k) {
				ps, _ := props[k].(map[string]any)
				obj[k] = g.value(ps, depth+1)
			}
		}
		for _, k := range required {
			if _, ok := obj[k]; !ok {
				obj[k] = "a" // required without a schema: anything
			}
		}
		return obj
	case "array":
		n := int(numberOr(s["minItems"], 0))
		if g.all && n == 0 && numberOr(s["maxItems"], 1) >= 1 {
			n = 1
		}
		if g.upper {
			n = max(n, int(min(numberOr(s["maxItems"], maxItems), maxItems)))
		}
		items, _ := s["items"].(map[string]any)
		arr := make([]any, n)
		for i := range arr {
			arr[i] = g.value(items, depth+1)
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
		if g.upper {
			n = max(n, int(min(numberOr(s["maxLength"], float64(n)), maxLength)))
		}
		if limit, ok := number(s["maxLength"]); ok && float64(n) > limit {
			n = int(limit)
		}
		return strings.Repeat("a", n)
	case "integer":
		// Bounds may be fractional: the smallest integer above the lower bound, unless
		// that passes the upper one.
		want := 1.0
		if g.upper {
			want = upper(s, 1000)
		}
		v := math.Ceil(bounded(s, want))
		if limit, ok := number(s["maximum"]); ok && v > limit {
			v = math.Floor(limit)
		}
		if limit, ok := number(s["exclusiveMaximum"]); ok && v >= limit {
			v = math.Ceil(limit) - 1
		}
		return int(v)
	case "number":
		if g.upper {
			return bounded(s, upper(s, 1000.5))
		}
		return bounded(s, 1.5)
	case "boolean":
		return !g.upper
	case "null":
		return nil
	}
	return map[string]any{}
}

// merge returns s without its allOf and with every part of it: their properties and
// required lists joined, any other keyword of a later part winning.
func merge(s map[string]any, parts []any) map[string]any {
	merged := maps.Clone(s)
	delete(merged, "allOf")
	props := map[string]any{}
	if p, ok := s["properties"].(map[string]any); ok {
		maps.Copy(props, p)
	}
	required := slices.Clone(stringList(s["required"]))
	for _, a := range parts {
		m, ok := a.(map[string]any)
		if !ok {
			continue
		}
		maps.Copy(merged, m)
		if p, ok := m["properties"].(map[string]any); ok {
			maps.Copy(props, p)
		}
		required = append(required, stringList(m["required"])...)
	}
	if len(props) > 0 {
		merged["properties"] = props
	}
	if len(required) > 0 {
		merged["required"] = required
	}
	return merged
}

// upper returns the largest value the schema's upper bound allows, or want where it
// sets none.
func upper(s map[string]any, want float64) float64 {
	if limit, ok := number(s["maximum"]); ok {
		return limit
	}
	if limit, ok := number(s["exclusiveMaximum"]); ok {
		return limit - 1
	}
	return want
}

// bounded returns want moved inside the schema's numeric bounds.
func bounded(s map[string]any, want float64) float64 {
	if limit, ok := number(s["minimum"]); ok && want < limit {
		want = limit
	}
	if limit, ok := number(s["exclusiveMinimum"]); ok && want <= limit {
		want = limit + 1
	}
	if limit, ok := number(s["maximum"]); ok && want > limit {
		want = limit
	}
	if limit, ok := number(s["exclusiveMaximum"]); ok && want >= limit {
		want = limit - 1
	}
	return want
}

// Sample is a generated value and what it is meant to show.
type Sample struct {
	What  string
	Value any
}

// Invalid returns values that violate s in plain ways: the wrong JSON type, a required
// property missing, a property of the wrong type, a property the schema forbids, and
// for each property each of its constraints (lengths, bounds, enum, pattern, numbers of
// items) broken alone. A schema that constrains nothing yields none.
func Invalid(s map[string]any) []Sample {
	if s == nil {
		return nil
	}
	root := s
	if ref, ok := s["$ref"].(string); ok {
		s = resolve(root, ref)
	}
	var out []Sample
	switch typeOf(s) {
	case "object":
		out = append(out, Sample{"an array instead of an object", []any{1, 2}})
		base, _ := gen{root: root}.value(s, 0).(map[string]any)
		props, _ := s["properties"].(map[string]any)
		if required := stringList(s["required"]); len(required) > 0 {
			k := required[0] // one required property shows the point
			v := maps.Clone(base)
			delete(v, k)
			out = append(out, Sample{fmt.Sprintf("required property %q missing", k), v})
			if ps, ok := props[k].(map[string]any); ok {
				if wrong, ok := wrongType(ps); ok {
					v := maps.Clone(base)
					v[k] = wrong
					out = append(out, Sample{fmt.Sprintf("property %q of the wrong type", k), v})
				}
			}
		}
		if extra, ok := s["additionalProperties"].(bool); ok && !extra {
			v := maps.Clone(base)
			v["unexpectedProperty"] = true
			out = append(out, Sample{"a property the schema forbids", v})
		}
		for _, k := range slices.Sorted(maps.Keys(props)) {
			ps, _ := props[k].(map[string]any)
			for _, c := range violations(gen{root: root, all: true}, ps) {
				v := maps.Clone(base)
				v[k] = c.Value
				out = append(out, Sample{fmt.Sprintf("property %q %s", k, c.What), v})
			}
		}
	case "":
		// No type: nothing plainly invalid.
	default:
		if wrong, ok := wrongType(s); ok {
			out = append(out, Sample{"a value of the wrong type", wrong})
		}
	}
	return out
}

// violations returns, for each constraint of s on its value, a value of the right
// type that breaks it alone.
func violations(g gen, s map[string]any) []Sample {
	var out []Sample
	add := func(what string, v any) { out = append(out, Sample{what, v}) }
	if n, ok := number(s["minLength"]); ok && n > 0 {
		add(fmt.Sprintf("shorter than minLength %v", n), strings.Repeat("a", int(n)-1))
	}
	if n, ok := number(s["maxLength"]); ok && n < maxLength {
		add(fmt.Sprintf("longer than maxLength %v", n), strings.Repeat("a", int(n)+1))
	}
	if n, ok := number(s["minimum"]); ok {
		add(fmt.Sprintf("below minimum %v", n), n-1)
	}
	if n, ok := number(s["exclusiveMinimum"]); ok {
		add(fmt.Sprintf("at exclusiveMinimum %v", n), n)
	}
	if n, ok := number(s["maximum"]); ok {
		add(fmt.Sprintf("above maximum %v", n), n+1)
	}
	if n, ok := number(s["exclusiveMaximum"]); ok {
		add(fmt.Sprintf("at exclusiveMaximum %v", n), n)
	}
	if _, ok := s["enum"].([]any); ok {
		add("outside its enum", "not one of the enum's values")
	}
	if _, ok := s["pattern"].(string); ok {
		add("not matching its pattern", "\x00 does not match")
	}
	items, _ := s["items"].(map[string]any)
	if n, ok := number(s["minItems"]); ok && n > 0 {
		add(fmt.Sprintf("with fewer than minItems %v", n), slices.Repeat([]any{g.value(items, 1)}, int(n)-1))
	}
	if n, ok := number(s["maxItems"]); ok && n < maxItems*10 {
		add(fmt.Sprintf("with more than maxItems %v", n), slices.Repeat([]any{g.value(items, 1)}, int(n)+1))
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

// typeOf returns the JSON type a schema asks for: its type, the first one other than
// null of a list of types, "object" for a schema with properties and no type, else "".
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

// stringList reads a list of strings: []any from decoded JSON, or []string from Go.
func stringList(v any) []string {
	if ss, ok := v.([]string); ok {
		return ss
	}
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
