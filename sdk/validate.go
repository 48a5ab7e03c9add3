package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// compiledSchema is a tool's input schema as the SDK checks inputs against it: its keywords looked up once, when a tool
// is registered, instead of in maps of the schema for every value of every call, and
// its pattern compiled once. It knows the keywords schemaFor emits: type, properties,
// required, additionalProperties, items, enum, minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, minLength, maxLength, minItems, maxItems, pattern and format
// date-time. A keyword of another type than the one it takes is ignored, as are
// unknown keywords and a pattern that does not compile.
type compiledSchema struct {
	typ     any // "type" as written: a string, a list of them, or nil for any type
	hasType bool
	enum    []any
	hasEnum bool

	props    map[string]*compiledSchema // "properties" that are schemas
	required []string
	closed   bool            // additionalProperties: false
	extra    *compiledSchema // additionalProperties as a schema, or nil
	items    *compiledSchema

	minItems, maxItems, minLength, maxLength   bound
	minimum, maximum, exclMinimum, exclMaximum bound

	pattern  string
	re       *regexp.Regexp
	dateTime bool
}

// bound is a numeric keyword, if the schema has one.
type bound struct {
	n  float64
	ok bool
}

// compileSchema returns the compiled form of s, nil for no schema (any input).
func compileSchema(s map[string]any) *compiledSchema {
	if s == nil {
		return nil
	}
	c := &compiledSchema{}
	c.typ, c.hasType = s["type"]
	c.enum, c.hasEnum = s["enum"].([]any)
	if props, ok := s["properties"].(map[string]any); ok {
		c.props = make(map[string]*compiledSchema, len(props))
		for k, p := range props {
			if ps, ok := p.(map[string]any); ok {
				c.props[k] = compileSchema(ps)
			}
		}
	}
	c.required = stringsOf(s["required"])
	switch extra := s["additionalProperties"].(type) {
	case bool:
		c.closed = !extra
	case map[string]any:
		c.extra = compileSchema(extra)
	}
	if items, ok := s["items"].(map[string]any); ok {
		c.items = compileSchema(items)
	}
	for _, b := range []struct {
		key string
		to  *bound
	}{
		{"minItems", &c.minItems}, {"maxItems", &c.maxItems}, {"minLength", &c.minLength}, {"maxLength", &c.maxLength},
		{"minimum", &c.minimum}, {"maximum", &c.maximum}, {"exclusiveMinimum", &c.exclMinimum}, {"exclusiveMaximum", &c.exclMaximum},
	} {
		b.to.n, b.to.ok = num(s[b.key])
	}
	if p, ok := s["pattern"].(string); ok {
		if re, err := regexp.Compile(p); err == nil {
			c.pattern, c.re = p, re
		}
	}
	c.dateTime = s["format"] == "date-time"
	return c
}

// validate checks the JSON input raw against c, so a plugin refuses what its schema
// refuses even when its host does not check (Terrarium does; another host might not).
// The error names the first failing location. raw must be valid JSON: a tool's input
// is part of its call's, which callTool checked, and another validity pass would cost
// a tool with a schema a millisecond or more per MiB in a wasm guest.
func (c *compiledSchema) validate(raw []byte) error {
	if c == nil {
		return nil
	}
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if raw[0] == '{' && !c.hasEnum {
		if done, err := c.checkMembers(raw); done {
			if err != nil {
				return err
			}
			return nil // not checkMembers' nil *schemaError, which as an error is not nil
		}
	}
	v, err := inputTree(raw)
	if err != nil {
		return err
	}
	if err := c.check(v); err != nil {
		return err
	}
	return nil // not check's nil *schemaError, which as an error is not nil
}

// member is a top-level member of an input: its key without quotes (unescaped) and its
// value as written.
type member struct {
	key, value []byte
}

// maxMembers is how many members checkMembers takes; it finds a repeated key by
// comparing each key with the later ones.
const maxMembers = 32

// checkMembers checks the valid JSON object raw against c as check would check its
// tree, member by member, without the tree: in a wasm guest each of its allocations
// (the map, every member's value, a copy of every string) costs about a microsecond,
// and a string whose schema has only a type is not even copied. It declines (done false)
// an object of more than maxMembers members, and one with an object or array it would
// not walk (an ignored member's, or one nested too deeply), so that inputTree bounds
// every value's nesting, which decodeValid relies on.
func (c *compiledSchema) checkMembers(raw []byte) (done bool, err *schemaError) {
	var buf [8]member
	ms := buf[:0]
	scanJSON(raw, func(key, value []byte) {
		if len(ms) > maxMembers {
			return
		}
		k := key[1 : len(key)-1]
		if bytes.IndexByte(k, '\\') >= 0 || !utf8.Valid(k) {
			s, _ := unquote(key)
			k = []byte(s)
		}
		ms = append(ms, member{k, value})
	})
	if len(ms) > maxMembers {
		return false, nil
	}
	if c.hasType && !typeMatches(c.typ, map[string]any(nil)) {
		return true, mismatch("want %v, got object", c.typ)
	}
	for _, r := range c.required {
		if !slices.ContainsFunc(ms, func(m member) bool { return string(m.key) == r }) {
			return true, mismatch("missing property %q", r)
		}
	}
	for i, m := range ms {
		ps, known := c.props[string(m.key)]
		if !known && c.closed {
			return true, mismatch("unknown property %q", m.key)
		}
		if !known {
			ps = c.extra
		}
		// The last of a repeated key counts, as in encoding/json.
		if ps == nil || slices.ContainsFunc(ms[i+1:], func(later member) bool { return bytes.Equal(later.key, m.key) }) {
			if m.value[0] == '{' || m.value[0] == '[' {
				return false, nil
			}
			continue
		}
		done, err := ps.checkValue(m.value)
		if !done {
			return false, nil
		}
		if err != nil {
			err.at = "/" + string(m.key) + err.at
			return true, err
		}
	}
	return true, nil
}

// checkValue checks the valid JSON value v, a top-level member's, against c, or
// declines (done false) a value nested too deeply. A string is decoded only for a keyword
// that reads it.
func (c *compiledSchema) checkValue(v []byte) (done bool, err *schemaError) {
	if v[0] == '"' && !c.hasEnum && !c.minLength.ok && !c.maxLength.ok && c.re == nil && !c.dateTime {
		if c.hasType && !typeMatches(c.typ, "") {
			return true, mismatch("want %v, got string", c.typ)
		}
		return true, nil
	}
	e, deep := memberTree(v)
	if deep != nil {
		return false, nil
	}
	return true, c.check(e)
}

// inputTree returns the valid JSON value raw as treeOf does. The members of a top-level
// object, which a tool's input usually is, are found by scanJSON, which passes over a
// string eight bytes at a time where gjson goes a byte at a time: in a wasm guest, 4 µs
// for a KiB of text, about as much as decoding the tool's input. Deeper values are
// treeOf's.
func inputTree(raw []byte) (any, error) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if raw[0] != '{' {
		return treeOf(gjson.ParseBytes(raw), 0)
	}
	m := map[string]any{}
	var err error
	scanJSON(raw, func(key, value []byte) {
		if err != nil {
			return
		}
		k, _ := unquote(key)
		m[k], err = memberTree(value)
	})
	return m, err
}

// memberTree returns the valid JSON value v, a top-level member's, as treeOf does.
func memberTree(v []byte) (any, error) {
	switch v[0] {
	case '"':
		s, _ := unquote(v)
		return s, nil
	case '{', '[':
		return treeOf(gjson.ParseBytes(v), 1)
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	return json.Number(v), nil
}

// maxDepth is how deeply treeOf nests, encoding/json's own limit.
const maxDepth = 10000

// treeOf returns the JSON value r as encoding/json decodes it into an any with
// UseNumber (numbers as json.Number, the last of duplicate keys winning), without
// encoding/json's scanner, which in a wasm guest costs far more than gjson's.
func treeOf(r gjson.Result, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d deep", maxDepth)
	}
	switch r.Type {
	case gjson.Null:
		return nil, nil
	case gjson.False:
		return false, nil
	case gjson.True:
		return true, nil
	case gjson.Number:
		return json.Number(r.Raw), nil
	case gjson.String:
		return validUTF8(r.Str), nil
	}
	var err error
	if r.IsArray() {
		a := []any{}
		r.ForEach(func(_, e gjson.Result) bool {
			var v any
			v, err = treeOf(e, depth+1)
			a = append(a, v)
			return err == nil
		})
		return a, err
	}
	m := map[string]any{}
	r.ForEach(func(k, e gjson.Result) bool {
		m[validUTF8(k.Str)], err = treeOf(e, depth+1)
		return err == nil
	})
	return m, err
}

// validUTF8 returns s with each byte that is not UTF-8 replaced by U+FFFD, as
// encoding/json decodes strings.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // an invalid byte is one utf8.RuneError
		b.WriteRune(r)
	}
	return b.String()
}

// check checks the value v against c. The failure's location is put together only on
// a failure, on the way back up: a string built for every value checked, as a path
// would be, is an allocation each, about half a microsecond in a wasm guest.
func (c *compiledSchema) check(v any) *schemaError {
	if c.hasType && !typeMatches(c.typ, v) {
		return mismatch("want %v, got %s", c.typ, jsonType(v))
	}
	if c.hasEnum && !slices.ContainsFunc(c.enum, func(e any) bool { return sameJSON(e, v) }) {
		return mismatch("%v is not one of %v", v, c.enum)
	}
	switch v := v.(type) {
	case map[string]any:
		for _, r := range c.required {
			if _, ok := v[r]; !ok {
				return mismatch("missing property %q", r)
			}
		}
		for k, e := range v {
			ps, known := c.props[k]
			if !known {
				if c.closed {
					return mismatch("unknown property %q", k)
				}
				if ps = c.extra; ps == nil {
					continue
				}
			}
			if err := ps.check(e); err != nil {
				err.at = "/" + k + err.at
				return err
			}
		}
	case []any:
		if c.minItems.ok && float64(len(v)) < c.minItems.n {
			return mismatch("%d items, want at least %v", len(v), c.minItems.n)
		}
		if c.maxItems.ok && float64(len(v)) > c.maxItems.n {
			return mismatch("%d items, want at most %v", len(v), c.maxItems.n)
		}
		if c.items != nil {
			for i, e := range v {
				if err := c.items.check(e); err != nil {
					err.at = "/" + strconv.Itoa(i) + err.at
					return err
				}
			}
		}
	case string:
		if c.minLength.ok || c.maxLength.ok {
			// Counted only for a bound: in a wasm guest, 2 µs a KiB.
			n := float64(utf8.RuneCountInString(v))
			if c.minLength.ok && n < c.minLength.n {
				return mismatch("%v characters, want at least %v", n, c.minLength.n)
			}
			if c.maxLength.ok && n > c.maxLength.n {
				return mismatch("%v characters, want at most %v", n, c.maxLength.n)
			}
		}
		if c.re != nil && !c.re.MatchString(v) {
			return mismatch("%q does not match %s", v, c.pattern)
		}
		if c.dateTime {
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return mismatch("%q is not a date-time", v)
			}
		}
	case json.Number:
		f, _ := v.Float64()
		if m := c.minimum; m.ok && f < m.n {
			return mismatch("%v is below the minimum %v", v, m.n)
		}
		if m := c.maximum; m.ok && f > m.n {
			return mismatch("%v is above the maximum %v", v, m.n)
		}
		if m := c.exclMinimum; m.ok && f <= m.n {
			return mismatch("%v is not above %v", v, m.n)
		}
		if m := c.exclMaximum; m.ok && f >= m.n {
			return mismatch("%v is not below %v", v, m.n)
		}
	}
	return nil
}

// schemaError is a value's failure to match its schema.
type schemaError struct {
	at  string // where the value is, a JSON pointer: "" is the whole input
	msg string
}

// mismatch returns the failure of the value being checked; its caller adds where it is.
func mismatch(format string, args ...any) *schemaError {
	return &schemaError{msg: fmt.Sprintf(format, args...)}
}

func (e *schemaError) Error() string {
	if e.at == "" {
		return "the input: " + e.msg
	}
	return e.at + ": " + e.msg
}

func typeMatches(t any, v any) bool {
	switch t := t.(type) {
	case string:
		return typeIs(t, v)
	case []any:
		return slices.ContainsFunc(t, func(e any) bool { s, _ := e.(string); return typeIs(s, v) })
	}
	return true
}

func typeIs(t string, v any) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		if _, err := n.Int64(); err == nil {
			return true
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f)
	}
	return true
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func num(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

func stringsOf(v any) []string {
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// sameJSON compares an enum value from the schema with a decoded value.
func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return strings.TrimSpace(string(x)) == strings.TrimSpace(string(y))
}
