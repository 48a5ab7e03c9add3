package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

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
	typ     any   // "type" as written, for messages
	kinds   kinds // the kinds typ allows
	hasType bool
	enum    []any
	hasEnum bool

	// free is set when c allows every value: nothing in one is checked. walkObject and
	// walkArray are set when an object's members, or an array's items, are checked.
	free, walkObject, walkArray bool

	props    []property     // "properties" that are schemas, by name
	index    map[string]int // props' indices by name, for many properties
	required []string
	// reqMask has bit j set for required[j] (j < 64) that is one of props: those are
	// noted as members are met, the others looked for among the members at the end.
	reqMask uint64
	reqRest bool            // some of required are not in reqMask
	closed  bool            // additionalProperties: false
	extra   *compiledSchema // additionalProperties as a schema, or nil
	items   *compiledSchema

	minItems, maxItems, minLength, maxLength   bound
	minimum, maximum, exclMinimum, exclMaximum bound

	pattern  string
	re       *regexp.Regexp
	dateTime bool
}

// property is one of an object schema's properties.
type property struct {
	name   string
	schema *compiledSchema
	req    uint64 // the bits of reqMask that name this property
}

// maxLinearProps is how many properties an object schema may have for a member's to be
// looked up by comparing its key with each: fewer map lookups, whose hashing costs more
// than a few comparisons of short keys in a wasm guest.
const maxLinearProps = 16

// prop returns the property named key, or nil.
func (c *compiledSchema) prop(key []byte) *property {
	if c.index != nil {
		if i, ok := c.index[string(key)]; ok {
			return &c.props[i]
		}
		return nil
	}
	for i := range c.props {
		if c.props[i].name == string(key) {
			return &c.props[i]
		}
	}
	return nil
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
	c.required = stringsOf(s["required"])
	if props, ok := s["properties"].(map[string]any); ok {
		c.props = []property{} // not nil: an object's members are walked
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if ps, ok := props[k].(map[string]any); ok {
				c.props = append(c.props, property{name: k, schema: compileSchema(ps)})
			}
		}
		if len(c.props) > maxLinearProps {
			c.index = make(map[string]int, len(c.props))
			for i, p := range c.props {
				c.index[p.name] = i
			}
		}
	}
	for j, r := range c.required {
		if p := c.prop([]byte(r)); p != nil && j < 64 {
			p.req |= 1 << j
			c.reqMask |= 1 << j
		} else {
			c.reqRest = true
		}
	}
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
	c.kinds = allKinds
	if c.hasType {
		c.kinds = kindsOf(c.typ)
	}
	c.walkObject = c.props != nil || len(c.required) > 0 || c.closed || c.extra != nil
	c.walkArray = c.items != nil || c.minItems.ok || c.maxItems.ok
	c.free = c.kinds == allKinds && !c.hasEnum && !c.walkObject && !c.walkArray &&
		!c.minLength.ok && !c.maxLength.ok && c.re == nil && !c.dateTime &&
		!c.minimum.ok && !c.maximum.ok && !c.exclMinimum.ok && !c.exclMaximum.ok
	return c
}

// validate checks the JSON input raw against c, so a plugin refuses what its schema
// refuses even when its host does not check (Terrarium does; another host might not).
// The error names the first failing location. raw must be valid JSON: a tool's input
// is part of its call's, which callTool checked, and another validity pass would cost
// a tool with a schema a millisecond or more per MiB in a wasm guest.
//
// It checks raw in one pass over its bytes, without decoding it into a tree: in a wasm
// guest each allocation costs about half a microsecond, and a tree of a structured input
// (a map per object, a slice per array, a value and a string per member) was most of a
// tool call's time (BENCHMARKS.md, "a Go guest decoding a structured input"). It
// allocates only on a failure, for an escaped key, an enum's value and an object of more
// than 16 members.
func (c *compiledSchema) validate(raw []byte) error {
	if c == nil {
		return nil
	}
	w := walker{b: raw}
	_, err := w.value(c, skipSpace(raw, 0), 0)
	if w.deep {
		return errTooDeep
	}
	if err != nil {
		return err
	}
	return nil // not value's nil *schemaError, which as an error is not nil
}

// walker checks a valid JSON value, b, against a compiled schema as encoding/json
// would decode it into an any (of a repeated key the last counts), walking its bytes.
type walker struct {
	b []byte
	// deep is set when a value is nested more than maxDepth deep: every value is
	// walked, also where its schema allows anything, so that decodeValid, whose decoder
	// has no depth limit, never sees one.
	deep bool
}

// member is an object's member as object records it: its key (unescaped) and its
// value's failure.
type member struct {
	key []byte
	err *schemaError
}

// errTooDeep is the failure of an input nested more than maxDepth deep.
var errTooDeep = fmt.Errorf("nested more than %d deep", maxDepth)

// value checks the value at b[i], nested depth deep (the input's top is 0), against
// c (nil: any value) and returns the index after it.
func (w *walker) value(c *compiledSchema, i, depth int) (int, *schemaError) {
	b := w.b
	if c == nil || c.free {
		return w.skip(i, depth), nil
	}
	if depth > maxDepth {
		w.deep = true
		return len(b), nil
	}
	if !c.allows(b[i:]) {
		return w.skip(i, depth), mismatch("want %v, got %s", c.typ, kindName(b[i]))
	}
	if c.hasEnum {
		end := w.skip(i, depth)
		if w.deep {
			return end, nil
		}
		v, err := treeOf(gjson.ParseBytes(b[i:end]), depth)
		if err != nil {
			w.deep = true // not reached: skip bounds the nesting as treeOf does
			return end, nil
		}
		if !slices.ContainsFunc(c.enum, func(e any) bool { return sameJSON(e, v) }) {
			return end, mismatch("%v is not one of %v", v, c.enum)
		}
	}
	switch b[i] {
	case '{':
		if !c.walkObject {
			return w.skip(i, depth), nil
		}
		return w.object(c, i, depth)
	case '[':
		if !c.walkArray {
			return w.skip(i, depth), nil
		}
		return w.array(c, i, depth)
	case '"':
		end := stringEnd(b, i+1)
		return end, c.checkString(b[i:end])
	case 't', 'n':
		return i + 4, nil
	case 'f':
		return i + 5, nil
	}
	end := numberEnd(b, i)
	return end, c.checkNumber(b[i:end])
}

// object checks the object at b[i] against c: its required properties, then its
// members, the first failing one in order. Of a repeated key the last counts. It
// records its members in its own frame (a slice kept in the walker, appended to through
// a pointer, would be on the heap): it recurses only as deep as c's own nesting, as a
// value no schema reaches into is skipped.
func (w *walker) object(c *compiledSchema, i, depth int) (int, *schemaError) {
	b := w.b
	var buf [16]member
	ms := buf[:0]
	var seen uint64 // reqMask's bits of the properties met
	if i = skipSpace(b, i+1); b[i] != '}' {
		for {
			keyEnd := stringEnd(b, i+1)
			key := b[i+1 : keyEnd-1]
			if !plainKey(key) {
				s, _ := unquote(b[i:keyEnd])
				key = []byte(s)
			}
			i = skipSpace(b, skipSpace(b, keyEnd)+1) // past the colon
			var err *schemaError
			var ps *compiledSchema
			if p := c.prop(key); p != nil {
				ps = p.schema
				seen |= p.req
			} else if ps = c.extra; c.closed {
				err, ps = mismatch("unknown property %q", key), nil
			}
			var verr *schemaError
			if i, verr = w.value(ps, i, depth+1); w.deep {
				return i, nil
			}
			if err == nil && verr != nil {
				verr.at = "/" + string(key) + verr.at
				err = verr
			}
			ms = append(ms, member{key, err})
			if i = skipSpace(b, i); b[i] == '}' {
				break
			}
			i = skipSpace(b, i+1) // past the comma
		}
	}
	if seen != c.reqMask || c.reqRest {
		for j, r := range c.required {
			if j < 64 && c.reqMask&(1<<j) != 0 {
				if seen&(1<<j) != 0 {
					continue
				}
			} else if slices.ContainsFunc(ms, func(m member) bool { return string(m.key) == r }) {
				continue
			}
			return i + 1, mismatch("missing property %q", r)
		}
	}
	return i + 1, lastFailure(ms)
}

// plainKey reports whether the key k, as written between its quotes, is itself:
// without escapes, and valid UTF-8. Keys are short and mostly ASCII, checked here a
// byte at a time without calls, which in a wasm guest cost more than the loop.
func plainKey(k []byte) bool {
	for _, c := range k {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			return bytes.IndexByte(k, '\\') < 0 && utf8.Valid(k)
		}
	}
	return true
}

// lastFailure returns the failure of the first member in ms that failed and whose key
// comes not again: of a repeated key the last counts.
func lastFailure(ms []member) *schemaError {
	var last map[string]int // for a large object, where comparing each key with the later ones is dear
	for j, m := range ms {
		if m.err == nil {
			continue
		}
		var again bool
		if len(ms) <= maxMembers {
			again = slices.ContainsFunc(ms[j+1:], func(later member) bool { return bytes.Equal(later.key, m.key) })
		} else {
			if last == nil {
				last = make(map[string]int, len(ms))
				for k, m := range ms {
					last[string(m.key)] = k
				}
			}
			again = last[string(m.key)] != j
		}
		if !again {
			return m.err
		}
	}
	return nil
}

// maxMembers is how many members an object may have for lastFailure to look for a
// failed member's key among the later ones, rather than in a map.
const maxMembers = 32

// array checks the array at b[i] against c: its length, then its items, the first
// failing one.
func (w *walker) array(c *compiledSchema, i, depth int) (int, *schemaError) {
	b := w.b
	var failed *schemaError
	n := 0
	if i = skipSpace(b, i+1); b[i] != ']' {
		for {
			items := c.items
			if failed != nil {
				items = nil // the rest is only walked
			}
			var err *schemaError
			if i, err = w.value(items, i, depth+1); w.deep {
				return i, nil
			}
			if err != nil {
				err.at = "/" + strconv.Itoa(n) + err.at
				failed = err
			}
			n++
			if i = skipSpace(b, i); b[i] == ']' {
				break
			}
			i = skipSpace(b, i+1) // past the comma
		}
	}
	if c.minItems.ok && float64(n) < c.minItems.n {
		return i + 1, mismatch("%d items, want at least %v", n, c.minItems.n)
	}
	if c.maxItems.ok && float64(n) > c.maxItems.n {
		return i + 1, mismatch("%d items, want at most %v", n, c.maxItems.n)
	}
	return i + 1, failed
}

// skip returns the index after the valid JSON value at b[i], nested depth deep,
// setting w.deep if a value in it is nested more than maxDepth deep. It keeps no stack:
// a value's nesting is the number of containers open around it.
func (w *walker) skip(i, depth int) int {
	b := w.b
	if depth > maxDepth {
		w.deep = true
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i+1)
	case 't', 'n':
		return i + 4
	case 'f':
		return i + 5
	case '{', '[':
	default:
		return numberEnd(b, i)
	}
	open := 0
	for {
		switch b[i] {
		case '{', '[':
			open++
			// A container with something in it holds a value one deeper.
			if i = skipSpace(b, i+1); b[i] != '}' && b[i] != ']' && depth+open > maxDepth {
				w.deep = true
				return len(b)
			}
			continue
		case '}', ']':
			open--
			i++
		case '"':
			i = stringEnd(b, i+1)
		default: // numbers, literals, commas, colons and spaces
			i++
		}
		if open == 0 {
			return i
		}
	}
}

// checkString checks the valid JSON string v, as written, against c's keywords for
// strings. It is decoded only for a keyword that reads it.
func (c *compiledSchema) checkString(v []byte) *schemaError {
	if !c.minLength.ok && !c.maxLength.ok && c.re == nil && !c.dateTime {
		return nil
	}
	s := stringOf(v)
	if c.minLength.ok || c.maxLength.ok {
		// Counted only for a bound: in a wasm guest, 2 µs a KiB.
		n := float64(utf8.RuneCountInString(s))
		if c.minLength.ok && n < c.minLength.n {
			return mismatch("%v characters, want at least %v", n, c.minLength.n)
		}
		if c.maxLength.ok && n > c.maxLength.n {
			return mismatch("%v characters, want at most %v", n, c.maxLength.n)
		}
	}
	if c.re != nil && !c.re.MatchString(s) {
		return mismatch("%q does not match %s", s, c.pattern)
	}
	if c.dateTime {
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return mismatch("%q is not a date-time", s)
		}
	}
	return nil
}

// stringOf returns the valid JSON string v as encoding/json decodes it. One without
// escapes that is valid UTF-8 is not copied: the result shares v's bytes and must not
// outlive the check.
func stringOf(v []byte) string {
	if s := v[1 : len(v)-1]; len(s) > 0 && bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return unsafe.String(&s[0], len(s))
	}
	s, _ := unquote(v)
	return s
}

// checkNumber checks the valid JSON number v against c's bounds.
func (c *compiledSchema) checkNumber(v []byte) *schemaError {
	if !c.minimum.ok && !c.maximum.ok && !c.exclMinimum.ok && !c.exclMaximum.ok {
		return nil
	}
	f, _ := strconv.ParseFloat(unsafe.String(&v[0], len(v)), 64) // out of range: ±Inf, as before
	if m := c.minimum; m.ok && f < m.n {
		return mismatch("%s is below the minimum %v", v, m.n)
	}
	if m := c.maximum; m.ok && f > m.n {
		return mismatch("%s is above the maximum %v", v, m.n)
	}
	if m := c.exclMinimum; m.ok && f <= m.n {
		return mismatch("%s is not above %v", v, m.n)
	}
	if m := c.exclMaximum; m.ok && f >= m.n {
		return mismatch("%s is not below %v", v, m.n)
	}
	return nil
}

// maxDepth is how deeply treeOf nests, encoding/json's own limit.
const maxDepth = 10000

// treeOf returns the JSON value r as encoding/json decodes it into an any with
// UseNumber (numbers as json.Number, the last of duplicate keys winning), without
// encoding/json's scanner, which in a wasm guest costs far more than gjson's.
func treeOf(r gjson.Result, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
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

// kinds is a set of JSON kinds, what a schema's "type" allows.
type kinds uint8

const (
	kindObject kinds = 1 << iota
	kindArray
	kindString
	kindBoolean
	kindNull
	kindNumber
	kindInteger // a number whose value is whole
	allKinds    = 1<<iota - 1
)

// kindsOf returns the kinds the "type" keyword t allows. A list allows what its names
// do; an unknown name, or a keyword neither a name nor a list, allows every kind.
func kindsOf(t any) kinds {
	switch t := t.(type) {
	case string:
		return kindNamed(t)
	case []any:
		var k kinds
		for _, e := range t {
			s, _ := e.(string)
			k |= kindNamed(s)
		}
		return k
	}
	return allKinds
}

func kindNamed(t string) kinds {
	switch t {
	case "object":
		return kindObject
	case "array":
		return kindArray
	case "string":
		return kindString
	case "boolean":
		return kindBoolean
	case "null":
		return kindNull
	case "number":
		return kindNumber
	case "integer":
		return kindInteger
	}
	return allKinds
}

// allows reports whether c's type allows the valid JSON value at the start of v.
func (c *compiledSchema) allows(v []byte) bool {
	k := kindOf(v[0])
	return c.kinds&k != 0 || k == kindNumber && c.kinds&kindInteger != 0 && isInteger(v[:numberEnd(v, 0)])
}

// kindOf returns the kind of the valid JSON value that starts with the byte c.
func kindOf(c byte) kinds {
	switch c {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	case 't', 'f':
		return kindBoolean
	case 'n':
		return kindNull
	}
	return kindNumber
}

// kindName names the kind of the valid JSON value that starts with the byte c.
func kindName(c byte) string {
	switch kindOf(c) {
	case kindObject:
		return "object"
	case kindArray:
		return "array"
	case kindString:
		return "string"
	case kindBoolean:
		return "boolean"
	case kindNull:
		return "null"
	}
	return "number"
}

// isInteger reports whether the valid JSON number n is whole, as JSON Schema's
// "integer" means: it fits an int64, or it is a finite float64 without a fraction.
func isInteger(n []byte) bool {
	if len(n) <= 18 && !slices.ContainsFunc(n, func(c byte) bool { return c == '.' || c == 'e' || c == 'E' }) {
		return true // up to 18 digits, or a minus and 17: an int64
	}
	s := unsafe.String(&n[0], len(n))
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f == math.Trunc(f)
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
