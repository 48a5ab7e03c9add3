package sdk

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// validate checks raw against schema as a tool registered with it does.
func validate(schema map[string]any, raw []byte) error {
	return compileSchema(schema).validate(raw)
}

type validateIn struct {
	Name  string   `json:"name" jsonschema:"minLength=2,maxLength=5,pattern=^[a-z]+$"`
	Age   int      `json:"age,omitempty" jsonschema:"minimum=0,maximum=150"`
	Tags  []string `json:"tags,omitempty" jsonschema:"maxItems=2"`
	Kind  string   `json:"kind,omitempty" jsonschema:"enum=a|b"`
	Inner *struct {
		X float64 `json:"x"`
	} `json:"inner,omitempty"`
}

func TestValidate(t *testing.T) {
	s := schemaFor[validateIn]()
	good := []string{`{"name":"ab"}`, `{"name":"abc","age":3,"tags":["x"],"kind":"b","inner":{"x":1.5}}`, `{"name":"ab","age":2.0}`}
	for _, in := range good {
		if err := validate(s, []byte(in)); err != nil {
			t.Errorf("validate(%s): %v", in, err)
		}
	}
	bad := map[string]string{
		`{}`:                                 `missing property "name"`,
		`{"name":"a"}`:                       "at least 2",
		`{"name":"abcdef"}`:                  "at most 5",
		`{"name":"AB"}`:                      "does not match",
		`{"name":"ab","age":-1}`:             "below the minimum",
		`{"name":"ab","age":1.5}`:            "want integer",
		`{"name":"ab","tags":["a","b","c"]}`: "at most 2",
		`{"name":"ab","kind":"c"}`:           "not one of",
		`{"name":"ab","inner":{"x":"1"}}`:    "/inner/x: want number",
		`{"name":"ab","extra":1}`:            `unknown property "extra"`,
	}
	for in, want := range bad {
		err := validate(s, []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate(%s) = %v, want an error mentioning %q", in, err, want)
		}
	}
}

// TestValidateNamesTheLocation checks the whole message of a failure at the top, in an
// object and in an array: where the value is, then what is wrong with it.
func TestValidateNamesTheLocation(t *testing.T) {
	s := schemaFor[validateIn]()
	for in, want := range map[string]string{
		`{}`:                                  `the input: missing property "name"`,
		`[]`:                                  `the input: want object, got array`,
		`{"name":"ab","inner":{"x":"1"}}`:     `/inner/x: want number, got string`,
		`{"name":"ab","tags":["x",1]}`:        `/tags/1: want string, got number`,
		`{"name":"ab","inner":{"x":1,"y":2}}`: `/inner: unknown property "y"`,
	} {
		if err := validate(s, []byte(in)); err == nil || err.Error() != want {
			t.Errorf("validate(%s) = %v, want %s", in, err, want)
		}
	}
}

// TestValidateRepeatedKey checks that of a repeated key the last counts, as encoding/json
// decodes it.
func TestValidateRepeatedKey(t *testing.T) {
	s := schemaFor[validateIn]()
	if err := validate(s, []byte(`{"name":1,"name":"ab"}`)); err != nil {
		t.Errorf("a bad name, then a good one: %v", err)
	}
	if err := validate(s, []byte(`{"name":"ab","name":1}`)); err == nil || err.Error() != "/name: want string, got number" {
		t.Errorf("a good name, then a bad one: %v, want /name: want string, got number", err)
	}
	if err := validate(s, []byte(`{"n\u0061me":"ab","name":"x"}`)); err == nil || err.Error() != "/name: 1 characters, want at least 2" {
		t.Errorf("an escaped key, then the same unescaped: %v, want /name: 1 characters, want at least 2", err)
	}
}

// TestValidateWalks checks validate's whole messages on inputs of every shape it walks:
// nested objects, arrays of objects, nulls, wrong kinds, unknown and repeated keys,
// escapes, maps, numbers at the limits of int64 and float64, and large objects.
func TestValidateWalks(t *testing.T) {
	c := compileSchema(schemaFor[walkIn]())
	const base = `"id":"o-1","customer":{"name":"Ada","email":"a@b"},"items":[{"sku":"s","qty":1,"price":1.5}]`
	many := func(last string) string { // a map of 40 entries, "k0" first bad, then last
		var b strings.Builder
		b.WriteString(`"counts":{"k0":"bad"`)
		for i := 1; i < 40; i++ {
			fmt.Fprintf(&b, `,"k%d":%d`, i, i)
		}
		return b.String() + `,"k0":` + last + `}`
	}
	for _, tc := range []struct{ in, want string }{
		{`{` + base + `}`, ""},
		{`{` + base + `,"tags":["x","y"],"notes":"short","when":"2026-11-28T04:00:00Z","level":"warn","counts":{"a":1},"n":{"u":0,"i8":-1,"any":{"x":[null]}}}`, ""},
		{` {"items":[],"customer":{"name":"A"},"\u0069d":"x"} `, ""},
		{`{}`, `the input: missing property "id"`},
		{`[]`, `the input: want object, got array`},
		{`{"id":1,"customer":{"name":"A"},"items":[]}`, `/id: want string, got number`},
		{`{"id":"a","customer":null,"items":[]}`, `/customer: want object, got null`},
		{`{"id":"a","customer":{"name":""},"items":[]}`, `/customer/name: 0 characters, want at least 1`},
		{`{"id":"a","customer":{"name":"A","email":"ab"},"items":[]}`, `/customer/email: "ab" does not match @`},
		{`{"id":"a","customer":{"name":"A","phone":"1"},"items":[]}`, `/customer: unknown property "phone"`},
		{`{"id":"a","customer":{"email":"a@b"},"items":[]}`, `/customer: missing property "name"`},
		{`{"id":"a","customer":{"name":"","name":"A"},"items":[]}`, ""},
		{`{"id":"a","customer":{"name":"A","name":""},"items":[]}`, `/customer/name: 0 characters, want at least 1`},
		{`{"id":"a","customer":{"name":"A"},"items":null}`, `/items: want array, got null`},
		{`{"id":"a","customer":{"name":"A"},"items":[null]}`, `/items/0: want object, got null`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":1,"price":1},{"sku":"s","qty":0,"price":1}]}`, `/items/1/qty: 0 is below the minimum 1`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":1.5,"price":1}]}`, `/items/0/qty: want integer, got number`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":2.0,"price":1}]}`, ""},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":-0,"price":1}]}`, `/items/0/qty: -0 is below the minimum 1`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":9223372036854775807,"price":1}]}`, ""},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":99999999999999999999,"price":1}]}`, ""},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":1e400,"price":1}]}`, `/items/0/qty: want integer, got number`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":1` + strings.Repeat("0", 400) + `,"price":1}]}`, `/items/0/qty: want integer, got number`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":1,"price":0}]}`, `/items/0/price: 0 is not above 0`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":1,"price":1e-400}]}`, `/items/0/price: 1e-400 is not above 0`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":1,"price":"1"}]}`, `/items/0/price: want number, got string`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"qty":1,"price":1}]}`, `/items/0: missing property "sku"`},
		{`{"id":"a","customer":{"name":"A"},"items":[{},{},{},{}]}`, `/items: 4 items, want at most 3`},
		{`{"id":"a","customer":{"name":"A"},"items":[{"sku":"s","qty":1,"price":1},{"sku":1,"qty":1,"price":1},{"sku":true,"qty":1,"price":1}]}`, `/items/1/sku: want string, got number`},
		{`{` + base + `,"tags":["x","z"]}`, `/tags/1: z is not one of [x y]`},
		{`{` + base + `,"tags":"x"}`, `/tags: want array, got string`},
		{`{` + base + `,"level":"debug"}`, `/level: debug is not one of [info warn]`},
		{`{` + base + `,"notes":"too long, far"}`, `/notes: 13 characters, want at most 8`},
		{`{` + base + `,"when":"yesterday"}`, `/when: "yesterday" is not a date-time`},
		{`{` + base + `,"counts":{"a":1,"b":"x"}}`, `/counts/b: want integer, got string`},
		{`{` + base + `,"n":{"u":-1,"i8":0,"any":null}}`, `/n/u: -1 is below the minimum 0`},
		{`{` + base + `,"n":{"u":1,"i8":true,"any":null}}`, `/n/i8: want integer, got boolean`},
		{`{` + base + `,` + many(`1`) + `}`, ""},
		{`{` + base + `,` + many(`false`) + `}`, `/counts/k0: want integer, got boolean`},
		{`{` + base + `,"extra":{"deep":[[[1]]]}}`, `the input: unknown property "extra"`},
	} {
		err := c.validate([]byte(tc.in))
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("validate(%s) = %v, want %s", tc.in, err, cmp.Or(tc.want, "nil"))
		}
	}
}

// TestValidateRequired checks that every required property is looked for, the first
// missing one named: those that are properties, noted as they are met (up to 64), and
// the others, looked for among the members.
func TestValidateRequired(t *testing.T) {
	props := map[string]any{}
	var required []any
	for i := range 70 {
		name := fmt.Sprintf("p%02d", i)
		props[name] = map[string]any{"type": "integer"}
		required = append(required, name)
	}
	required = append(required, "free") // not a property
	c := compileSchema(map[string]any{"type": "object", "properties": props, "required": required})
	all := func(skip string) string {
		var b strings.Builder
		b.WriteString(`{"free":null`)
		for i := range 70 {
			if name := fmt.Sprintf("p%02d", i); name != skip {
				fmt.Fprintf(&b, `,%q:%d`, name, i)
			}
		}
		return b.String() + "}"
	}
	for in, want := range map[string]string{
		all(""):    "<nil>",
		all("p00"): `the input: missing property "p00"`,
		all("p63"): `the input: missing property "p63"`,
		all("p64"): `the input: missing property "p64"`,
		all("p69"): `the input: missing property "p69"`,
		strings.Replace(all(""), `"free":null,`, "", 1): `the input: missing property "free"`,
		`{"p01":1,"p00":"x"}`:                           `the input: missing property "p02"`,
	} {
		if err := c.validate([]byte(in)); fmt.Sprint(err) != want {
			t.Errorf("validate(%.30s...) = %v, want %s", in, err, want)
		}
	}
	// Without the one that is not a property, past the 64th is still looked for.
	c = compileSchema(map[string]any{"type": "object", "properties": props, "required": required[:70]})
	if err := c.validate([]byte(all("p69"))); fmt.Sprint(err) != `the input: missing property "p69"` {
		t.Errorf("validate without p69 = %v, want missing property \"p69\"", err)
	}
}

// TestValidateBoundsEveryMember checks that a value nested more than maxDepth deep is
// refused wherever it is, also in a member the schema ignores or a repeated key's
// first: decodeValid's decoder has no depth limit of its own.
func TestValidateBoundsEveryMember(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	open := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{}}}
	for _, in := range []string{`{"b":` + deep + `}`, `{"a":` + deep + `,"a":1}`, `{"a":` + deep + `}`} {
		if err := validate(open, []byte(in)); err == nil || !strings.Contains(err.Error(), "nested more than") {
			t.Errorf("validate(%.20s...) = %v, want nested more than %d deep", in, err, maxDepth)
		}
	}
	// Deep anywhere, even past a failure or inside a value of the wrong kind, the input
	// is refused for its depth, as when a tree of it was built first; one level less
	// is checked as any input.
	walked := compileSchema(schemaFor[walkIn]())
	almost := strings.Repeat("[", maxDepth-2) + strings.Repeat("]", maxDepth-2)
	for in, want := range map[string]string{
		`{"id":1,"n":{"any":` + deep + `}}`:                                                     errTooDeep.Error(),
		`{"id":1,"customer":` + deep + `}`:                                                      errTooDeep.Error(),
		`{"id":"a","customer":{"name":"A"},"items":[],"tags":` + deep + `}`:                     errTooDeep.Error(),
		`{"id":"a","customer":{"name":"A"},"items":[],"n":{"u":1,"i8":1,"any":` + almost + `}}`: "<nil>",
		`{"id":1,"customer":{"name":"A"},"items":[],"n":{"u":1,"i8":1,"any":` + almost + `}}`:   "/id: want string, got number",
	} {
		if err := walked.validate([]byte(in)); fmt.Sprint(err) != want {
			t.Errorf("validate(%.40s...) = %v, want %s", in, err, want)
		}
	}
	// A schema as deep as the input: the walk follows it all the way down.
	schema := map[string]any{"type": "number"}
	for range maxDepth + 1 {
		schema = map[string]any{"type": "array", "items": schema}
	}
	deepest := strings.Repeat("[", maxDepth+1) + "1" + strings.Repeat("]", maxDepth+1)
	if err := validate(schema, []byte(deepest)); err != errTooDeep {
		t.Errorf("validate(%.20s...) against a schema as deep = %v, want %v", deepest, err, errTooDeep)
	}
}

// FuzzValidate holds validate, which walks the input's bytes, to treeFailures, which
// checks its tree as validate did before: the same inputs refused, each with a failure
// the tree's check could have named (it took an object's members in map order).
func FuzzValidate(f *testing.F) {
	f.Add(`{"name":"ab","inner":{"x":1}}`)
	f.Add(`{"name":1e400}`)
	f.Add(`[[[[]]]]`)
	f.Add(`{"name":"ab","name":1,"tags":["a"],"x":{"y":[]}}`)
	f.Add(`{"n\u0061me":"abc","age":"x","kind":"c"}`)
	f.Add(`{"id":"o-1","customer":{"name":"A","email":"a@b"},"items":[{"sku":"s","qty":1,"price":1.5}],"tags":["x"],"notes":""}`)
	f.Add(`{"id":null,"customer":{"name":"A","name":2},"items":[{"sku":"s","qty":1.5,"price":"1"},null],"tags":[1],"extra":[]}`)
	f.Add(`{"a":1,"b":-1,"c":1e400,"d":9223372036854775808,"e":-0.0,"f":12345678901234567890,"g":2.0}`)
	f.Add(`{"when":"2026-11-28T04:00:00Z","level":"warn","levels":["info","x"],"n":{"u":0,"i8":-129}}`)
	schemas := []*compiledSchema{
		compileSchema(schemaFor[validateIn]()), compileSchema(schemaFor[map[string]int]()), compileSchema(map[string]any{"type": "object"}),
		compileSchema(schemaFor[walkIn]()), compileSchema(schemaFor[[]walkIn]()),
		compileSchema(map[string]any{"type": []any{"integer", "null"}, "enum": []any{1, 2.5, nil, "x"}}),
		compileSchema(map[string]any{"type": "object", "required": []any{"a", "b", "c"}, "properties": map[string]any{"b": map[string]any{"type": "string"}}}),
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return // validate's callers check that first
		}
		tree, treeErr := treeOf(gjson.Parse(in), 0)
		for _, c := range schemas {
			got := c.validate([]byte(in))
			switch {
			case treeErr != nil:
				if got != treeErr {
					t.Errorf("validate(%q) = %v, want %v", in, got, treeErr)
				}
			case got == nil:
				if want := treeFailures(c, tree); want != nil {
					t.Errorf("validate(%q) passed, the tree's check fails: %q", in, want)
				}
			default:
				if want := treeFailures(c, tree); !slices.Contains(want, got.Error()) {
					t.Errorf("validate(%q) = %v, the tree's check: %q", in, got, want)
				}
			}
		}
	})
}

// walkIn is an input of every shape validate walks: a nested object, arrays of objects
// and of strings, maps, numbers with bounds, an enum, a date-time and an any.
type walkIn struct {
	ID       string `json:"id"`
	Customer struct {
		Name  string `json:"name" jsonschema:"minLength=1"`
		Email string `json:"email,omitempty" jsonschema:"pattern=@"`
	} `json:"customer"`
	Items []struct {
		SKU   string  `json:"sku"`
		Qty   int     `json:"qty" jsonschema:"minimum=1"`
		Price float64 `json:"price" jsonschema:"exclusiveMinimum=0"`
	} `json:"items" jsonschema:"maxItems=3"`
	Tags   []string       `json:"tags,omitempty" jsonschema:"enum=x|y"`
	Notes  string         `json:"notes,omitempty" jsonschema:"maxLength=8"`
	When   time.Time      `json:"when,omitzero"`
	Level  string         `json:"level,omitempty" jsonschema:"enum=info|warn"`
	Counts map[string]int `json:"counts,omitempty"`
	N      struct {
		U   uint `json:"u"`
		I8  int8 `json:"i8"`
		Any any  `json:"any"`
	} `json:"n,omitzero"`
}

// treeFailures checks the tree v (treeOf's) against c as validate checked inputs
// before it walked their bytes: nil if v passes, else each failure that check could
// have returned, which took an object's members in the map's order.
func treeFailures(c *compiledSchema, v any) []string {
	var fails []string
	for _, e := range checkTree(c, v) {
		fails = append(fails, e.Error())
	}
	return fails
}

func checkTree(c *compiledSchema, v any) []*schemaError {
	one := func(format string, args ...any) []*schemaError { return []*schemaError{mismatch(format, args...)} }
	if c.hasType && !typeMatches(c.typ, v) {
		return one("want %v, got %s", c.typ, jsonType(v))
	}
	if c.hasEnum && !slices.ContainsFunc(c.enum, func(e any) bool { return sameJSON(e, v) }) {
		return one("%v is not one of %v", v, c.enum)
	}
	switch v := v.(type) {
	case map[string]any:
		for _, r := range c.required {
			if _, ok := v[r]; !ok {
				return one("missing property %q", r)
			}
		}
		var all []*schemaError
		for k, e := range v {
			var ps *compiledSchema
			p := c.prop([]byte(k))
			if p != nil {
				ps = p.schema
			} else {
				if c.closed {
					all = append(all, mismatch("unknown property %q", k))
					continue
				}
				if ps = c.extra; ps == nil {
					continue
				}
			}
			for _, err := range checkTree(ps, e) {
				err.at = "/" + k + err.at
				all = append(all, err)
			}
		}
		return all
	case []any:
		if c.minItems.ok && float64(len(v)) < c.minItems.n {
			return one("%d items, want at least %v", len(v), c.minItems.n)
		}
		if c.maxItems.ok && float64(len(v)) > c.maxItems.n {
			return one("%d items, want at most %v", len(v), c.maxItems.n)
		}
		if c.items != nil {
			for i, e := range v {
				if errs := checkTree(c.items, e); errs != nil {
					for _, err := range errs {
						err.at = "/" + strconv.Itoa(i) + err.at
					}
					return errs
				}
			}
		}
	case string:
		if c.minLength.ok || c.maxLength.ok {
			n := float64(utf8.RuneCountInString(v))
			if c.minLength.ok && n < c.minLength.n {
				return one("%v characters, want at least %v", n, c.minLength.n)
			}
			if c.maxLength.ok && n > c.maxLength.n {
				return one("%v characters, want at most %v", n, c.maxLength.n)
			}
		}
		if c.re != nil && !c.re.MatchString(v) {
			return one("%q does not match %s", v, c.pattern)
		}
		if c.dateTime {
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return one("%q is not a date-time", v)
			}
		}
	case json.Number:
		f, _ := v.Float64()
		if m := c.minimum; m.ok && f < m.n {
			return one("%v is below the minimum %v", v, m.n)
		}
		if m := c.maximum; m.ok && f > m.n {
			return one("%v is above the maximum %v", v, m.n)
		}
		if m := c.exclMinimum; m.ok && f <= m.n {
			return one("%v is not above %v", v, m.n)
		}
		if m := c.exclMaximum; m.ok && f >= m.n {
			return one("%v is not below %v", v, m.n)
		}
	}
	return nil
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
	}
	return "number"
}

// FuzzTreeOf checks that the validator sees a tool's input as encoding/json decodes
// it (into an any, with UseNumber).
func FuzzTreeOf(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u00e9"],"b":{"c":null,"d":true},"a":false}`, `"\ud800"`, `[]`, `{}`, `-0`, "\"\xff\"",
		" {\"a\xff\":\"\xfe\", \"b\\u00e9\":\"x\\ud800\",\"c\":-1.5e3,\"d\":[true,false,null],\"a\ufffd\":{}} "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			return // deeper than encoding/json decodes
		}
		got, err := treeOf(gjson.Parse(in), 0)
		if err != nil {
			t.Fatalf("treeOf(%q): %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("treeOf(%q) = %#v, want %#v", in, got, want)
		}
	})
}
