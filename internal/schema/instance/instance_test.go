package instance

import (
	"encoding/json"
	"testing"

	"github.com/terrarium-ai/terrarium/internal/schema"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("schema %s: %v", s, err)
	}
	return m
}

func encode(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestMinimalAndFull(t *testing.T) {
	for _, tc := range []struct {
		name, schema, minimal, full string
	}{
		{"any", `{}`, `{}`, `{}`},
		{"object", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"s":{"type":"string"}},"required":["s","a"]}`,
			`{"a":1,"s":"a"}`, `{"a":1,"b":true,"s":"a"}`},
		{"properties without a type", `{"properties":{"n":{"type":"number"}},"required":["n"]}`, `{"n":1.5}`, `{"n":1.5}`},
		{"required without a schema", `{"type":"object","required":["x"]}`, `{"x":"a"}`, `{"x":"a"}`},
		{"const and enum", `{"type":"object","properties":{"c":{"const":"v"},"e":{"enum":["x","y"]}},"required":["c","e"]}`,
			`{"c":"v","e":"x"}`, `{"c":"v","e":"x"}`},
		{"string bounds and formats", `{"type":"array","minItems":4,"items":{"anyOf":[{"type":"string","minLength":3,"maxLength":5}]}}`,
			`["aaa","aaa","aaa","aaa"]`, `["aaa","aaa","aaa","aaa"]`},
		{"empty string allowed", `{"type":"string","maxLength":0}`, `""`, `""`},
		{"date-time", `{"type":["null","string"],"format":"date-time"}`, `"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05Z"`},
		{"arrays", `{"type":"array","items":{"type":"integer"}}`, `[]`, `[1]`},
		{"array of at most none", `{"type":"array","maxItems":0}`, `[]`, `[]`},
		{"number bounds", `{"type":"number","exclusiveMaximum":-2}`, `-3`, `-3`},
		{"integer above a fractional minimum", `{"type":"integer","minimum":2.5}`, `3`, `3`},
		{"integer below a fractional maximum", `{"type":"integer","maximum":-0.5}`, `-1`, `-1`},
		{"integer below an exclusive maximum", `{"type":"integer","exclusiveMaximum":0}`, `-1`, `-1`},
		{"allOf merged", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]}`,
			`{"a":"a","b":true}`, `{"a":"a","b":true}`},
		{"references", `{"$defs":{"P":{"type":"object","properties":{"name":{"type":"string","format":"email"}},"required":["name"]}},"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"required":["p"]}`,
			`{"p":{"name":"ada@example.com"}}`, `{"p":{"name":"ada@example.com"}}`},
		{"recursion bounded", `{"$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}},"required":["next"]}},"$ref":"#/$defs/N"}`,
			`{"next":{"next":{"next":{"next":{}}}}}`, `{"next":{"next":{"next":{"next":{}}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := decode(t, tc.schema)
			for _, v := range []struct {
				what, want string
				got        any
			}{{"Minimal", tc.minimal, Minimal(s)}, {"Full", tc.full, Full(s)}} {
				if encode(v.got) != v.want {
					t.Errorf("%s = %s, want %s", v.what, encode(v.got), v.want)
				}
				if tc.name != "recursion bounded" {
					if err := schema.Validate(s, v.got); err != nil {
						t.Errorf("%s %s is not valid: %v", v.what, encode(v.got), err)
					}
				}
			}
		})
	}
}

func TestRequiredAsGoStrings(t *testing.T) {
	s := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer", "minimum": 3}}, "required": []string{"a"}}
	if got := encode(Minimal(s)); got != `{"a":3}` {
		t.Errorf("Minimal = %s", got)
	}
}

func TestInvalid(t *testing.T) {
	s := decode(t, `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"additionalProperties":false}`)
	got := Invalid(s)
	want := []string{
		`an array instead of an object: [1,2]`,
		`required property "city" missing: {}`,
		`property "city" of the wrong type: {"city":{"unexpected":true}}`,
		`a property the schema forbids: {"city":"a","unexpectedProperty":true}`,
	}
	if len(got) != len(want) {
		t.Fatalf("Invalid = %v", got)
	}
	for i, smp := range got {
		if line := smp.What + ": " + encode(smp.Value); line != want[i] {
			t.Errorf("sample %d = %s, want %s", i, line, want[i])
		}
		if schema.Validate(s, smp.Value) == nil {
			t.Errorf("sample %q is valid", smp.What)
		}
	}
	if got := Invalid(decode(t, `{"type":["number","null"]}`)); len(got) != 1 || encode(got[0].Value) != `{"unexpected":true}` {
		t.Errorf("Invalid(number or null) = %v", got)
	}
	for _, s := range []string{`{}`, `{"description":"anything"}`} {
		if got := Invalid(decode(t, s)); len(got) != 0 {
			t.Errorf("Invalid(%s) = %v, want none", s, got)
		}
	}
}

func TestValid(t *testing.T) {
	s := decode(t, `{"type": "object", "additionalProperties": false, "required": ["expr"],
		"properties": {
			"expr": {"type": "string", "minLength": 1, "maxLength": 4096, "examples": ["1 + 2"]},
			"unit": {"type": "string", "enum": ["m", "ft", "in"]},
			"n": {"type": "integer", "minimum": 1, "maximum": 7},
			"tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 10}}}`)
	v, err := schema.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, smp := range Valid(s) {
		if err := v.Validate(smp.Value); err != nil {
			t.Errorf("%s: %s is invalid: %v", smp.What, encode(smp.Value), err)
		}
		got[smp.What] = encode(smp.Value)
	}
	for what, want := range map[string]string{
		"required properties only": `{"expr":"1 + 2"}`,
		"every property":           `{"expr":"1 + 2","n":1,"tags":["a"],"unit":"m"}`,
		"upper bounds":             `{"expr":"1 + 2","n":7,"tags":["aaaaa","aaaaa","aaaaa"],"unit":"m"}`,
		"unit = ft":                `{"expr":"1 + 2","n":1,"tags":["a"],"unit":"ft"}`,
		"unit = in":                `{"expr":"1 + 2","n":1,"tags":["a"],"unit":"in"}`,
	} {
		if got[what] != want {
			t.Errorf("%s = %s, want %s", what, got[what], want)
		}
	}
	// Minimal and Full ignore examples: the rule-based models answer with plain values.
	if m := encode(Minimal(s)); m != `{"expr":"a"}` {
		t.Errorf("Minimal = %s", m)
	}
}

func TestInvalidBreaksEachConstraint(t *testing.T) {
	s := decode(t, `{"type": "object", "required": ["n"],
		"properties": {
			"n": {"type": "integer", "minimum": 1, "exclusiveMaximum": 8},
			"word": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
			"unit": {"enum": ["m", "ft"]},
			"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}}}`)
	v, err := schema.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, smp := range Invalid(s) {
		seen[smp.What] = true
		if v.Validate(smp.Value) == nil {
			t.Errorf("%s: %s is valid", smp.What, encode(smp.Value))
		}
	}
	for _, want := range []string{`property "n" below minimum 1`, `property "n" at exclusiveMaximum 8`,
		`property "word" shorter than minLength 2`, `property "word" longer than maxLength 4`, `property "word" not matching its pattern`,
		`property "unit" outside its enum`, `property "tags" with fewer than minItems 1`, `property "tags" with more than maxItems 2`} {
		if !seen[want] {
			t.Errorf("no sample %q among %v", want, seen)
		}
	}
}
