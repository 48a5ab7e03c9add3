package sdk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

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
// decodes it, also where checkMembers checks an object without its tree.
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
}

// FuzzValidate holds validate, which checks a top-level object's members without its
// tree (checkMembers), to check on the tree, for schemas closed and open.
func FuzzValidate(f *testing.F) {
	f.Add(`{"name":"ab","inner":{"x":1}}`)
	f.Add(`{"name":1e400}`)
	f.Add(`[[[[]]]]`)
	f.Add(`{"name":"ab","name":1,"tags":["a"],"x":{"y":[]}}`)
	f.Add(`{"n\u0061me":"abc","age":"x","kind":"c"}`)
	schemas := []map[string]any{schemaFor[validateIn](), schemaFor[map[string]int](), {"type": "object"}}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return // validate's callers check that first
		}
		for _, s := range schemas {
			c := compileSchema(s)
			got := c.validate([]byte(in))
			var want error
			if v, err := inputTree([]byte(in)); err != nil {
				want = err
			} else if err := c.check(v); err != nil {
				want = err
			}
			if (got == nil) != (want == nil) {
				t.Errorf("validate(%q) = %v, on the tree %v", in, got, want)
			}
		}
	})
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
		if got, err := inputTree([]byte(in)); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("inputTree(%q) = %#v, %v; want %#v", in, got, err, want)
		}
	})
}
