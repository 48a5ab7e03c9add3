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

// validate checks a tool's JSON input against the schema the SDK inferred for it, so a
// plugin refuses what its schema refuses even when its host does not check (Terrarium
// does; another host might not). It knows the keywords schemaFor emits: type,
// properties, required, additionalProperties, items, enum, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems, maxItems,
// pattern and format date-time. The error names the first failing location. raw must
// be valid JSON: a tool's input is part of its call's, which callTool checked, and
// another validity pass would cost a tool with a schema a millisecond or more per MiB
// in a wasm guest.
func validate(schema map[string]any, raw []byte) error {
	if schema == nil {
		return nil
	}
	v, err := inputTree(raw)
	if err != nil {
		return err
	}
	if err := check(schema, v); err != nil {
		return err
	}
	return nil // not check's nil *schemaError, which as an error is not nil
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

// check checks the value v against the schema s. The failure's location is put
// together only on a failure, on the way back up: a string built for every value
// checked, as a path would be, is an allocation each, about half a microsecond in a
// wasm guest.
func check(s map[string]any, v any) *schemaError {
	if t, ok := s["type"]; ok && !typeMatches(t, v) {
		return mismatch("want %v, got %s", t, jsonType(v))
	}
	if enum, ok := s["enum"].([]any); ok {
		if !slices.ContainsFunc(enum, func(e any) bool { return sameJSON(e, v) }) {
			return mismatch("%v is not one of %v", v, enum)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for _, r := range stringsOf(s["required"]) {
			if _, ok := v[r]; !ok {
				return mismatch("missing property %q", r)
			}
		}
		for k, e := range v {
			ps, known := props[k].(map[string]any)
			if !known {
				if extra, ok := s["additionalProperties"].(bool); ok && !extra {
					return mismatch("unknown property %q", k)
				}
				if extra, ok := s["additionalProperties"].(map[string]any); ok {
					ps = extra
				} else {
					continue
				}
			}
			if err := check(ps, e); err != nil {
				err.at = "/" + k + err.at
				return err
			}
		}
	case []any:
		if n, ok := num(s["minItems"]); ok && float64(len(v)) < n {
			return mismatch("%d items, want at least %v", len(v), n)
		}
		if n, ok := num(s["maxItems"]); ok && float64(len(v)) > n {
			return mismatch("%d items, want at most %v", len(v), n)
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range v {
				if err := check(items, e); err != nil {
					err.at = "/" + strconv.Itoa(i) + err.at
					return err
				}
			}
		}
	case string:
		minLen, hasMin := num(s["minLength"])
		maxLen, hasMax := num(s["maxLength"])
		if hasMin || hasMax {
			// Counted only for a bound: in a wasm guest, 2 µs a KiB.
			n := float64(utf8.RuneCountInString(v))
			if hasMin && n < minLen {
				return mismatch("%v characters, want at least %v", n, minLen)
			}
			if hasMax && n > maxLen {
				return mismatch("%v characters, want at most %v", n, maxLen)
			}
		}
		if p, ok := s["pattern"].(string); ok {
			re, err := regexp.Compile(p)
			if err == nil && !re.MatchString(v) {
				return mismatch("%q does not match %s", v, p)
			}
		}
		if s["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return mismatch("%q is not a date-time", v)
			}
		}
	case json.Number:
		f, _ := v.Float64()
		if m, ok := num(s["minimum"]); ok && f < m {
			return mismatch("%v is below the minimum %v", v, m)
		}
		if m, ok := num(s["maximum"]); ok && f > m {
			return mismatch("%v is above the maximum %v", v, m)
		}
		if m, ok := num(s["exclusiveMinimum"]); ok && f <= m {
			return mismatch("%v is not above %v", v, m)
		}
		if m, ok := num(s["exclusiveMaximum"]); ok && f >= m {
			return mismatch("%v is not below %v", v, m)
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
