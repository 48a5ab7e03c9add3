package sdk

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

type schemaBase struct {
	ID      string `json:"id"`
	Shadow  int    `json:"shadow"`
	Promote bool
}

type schemaAll struct {
	schemaBase
	Name     string            `json:"name" jsonschema:"description=The name\\, in full,minLength=1"`
	Nick     *string           `json:"nick,omitempty"`
	Age      uint8             `json:"age"`
	Score    float64           `json:"score,omitzero" jsonschema:"minimum=0,maximum=1.5"`
	Kind     string            `json:"kind" jsonschema:"enum=a|b,enum=c"`
	Count    int               `json:"count,omitempty" jsonschema:"required,default=3,example=5,example=7"`
	Tags     []string          `json:"tags,omitempty" jsonschema:"enum=x|y,maxItems=2"`
	Labels   map[string]int    `json:"labels,omitempty"`
	Any      any               `json:"any,omitempty"`
	Raw      json.RawMessage   `json:"raw,omitempty"`
	When     time.Time         `json:"when"`
	Addr     netip.Addr        `json:"addr,omitempty"`
	Bytes    []byte            `json:"bytes,omitempty"`
	Pair     [2]int            `json:"pair,omitempty"`
	Quoted   int64             `json:"quoted,string,omitempty"`
	Shadow   string            `json:"shadow,omitempty" jsonschema_description:"Outer, wins"`
	Message  *abi.Message      `json:"message,omitempty"`
	Nested   struct{ X int }   `json:"nested"`
	ByID     map[int]bool      `json:"byId,omitempty"`
	Skipped  string            `json:"-"`
	private  string            // unexported: not in the schema
	Headers  map[string]string `json:",omitempty"`
	Positive bool              `json:"positive,omitempty" jsonschema:"default=true"`
}

type schemaTree struct {
	Value    string        `json:"value"`
	Children []*schemaTree `json:"children,omitempty"`
}

func TestSchemaOfStruct(t *testing.T) {
	got := roundTrip(t, schemaFor[schemaAll]())
	want := roundTrip(t, map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"id", "Promote", "name", "age", "kind", "count", "when", "nested"},
		"properties": map[string]any{
			"id":      map[string]any{"type": "string"},
			"Promote": map[string]any{"type": "boolean"},
			"name":    map[string]any{"type": "string", "description": "The name, in full", "minLength": 1},
			"nick":    map[string]any{"type": "string"},
			"age":     map[string]any{"type": "integer", "minimum": 0},
			"score":   map[string]any{"type": "number", "minimum": 0, "maximum": 1.5},
			"kind":    map[string]any{"type": "string", "enum": []any{"a", "b", "c"}},
			"count":   map[string]any{"type": "integer", "default": 3, "examples": []any{5, 7}},
			"tags":    map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []any{"x", "y"}}, "maxItems": 2},
			"labels":  map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "integer"}},
			"any":     map[string]any{},
			"raw":     map[string]any{},
			"when":    map[string]any{"type": "string", "format": "date-time"},
			"addr":    map[string]any{"type": "string"},
			"bytes":   map[string]any{"type": "string", "contentEncoding": "base64"},
			"pair":    map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "minItems": 2, "maxItems": 2},
			"quoted":  map[string]any{"type": "string"},
			"shadow":  map[string]any{"type": "string", "description": "Outer, wins"},
			"message": map[string]any{},
			"nested": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"X"},
				"properties": map[string]any{"X": map[string]any{"type": "integer"}},
			},
			"byId":     map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "boolean"}},
			"Headers":  map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			"positive": map[string]any{"type": "boolean", "default": true},
		},
	})
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("schema:\n%s\nwant:\n%s", g, w)
	}

	// The host's validator accepts the schema, and a value of the type validates.
	v, err := schema.Compile(schemaFor[schemaAll]())
	if err != nil {
		t.Fatal(err)
	}
	nick := "ada"
	val := schemaAll{
		schemaBase: schemaBase{ID: "1"}, Name: "Ada", Nick: &nick, Kind: "c", Count: 2,
		Tags: []string{"x"}, Labels: map[string]int{"a": 1}, Any: []int{1}, Raw: json.RawMessage(`{"k":1}`),
		When: time.Unix(0, 0).UTC(), Addr: netip.MustParseAddr("127.0.0.1"), Bytes: []byte("hi"),
		Quoted: 7, Shadow: "s", Message: abi.NewUserTextMessage("hi"), ByID: map[int]bool{1: true},
		Headers: map[string]string{"a": "b"}, Positive: true,
	}
	if err := v.Validate(val); err != nil {
		t.Errorf("a value of the type does not validate: %v", err)
	}
	bad := map[string]any{"id": "1", "Promote": true, "name": "", "age": 1, "kind": "z", "count": 1, "when": "now", "shadow": "s", "nested": map[string]any{"X": 1}}
	if err := v.Validate(bad); err == nil {
		t.Error("an invalid value validates")
	}
}

func TestSchemaOfScalarsAndSpecials(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  map[string]any
		want map[string]any
	}{
		{"any", schemaFor[any](), nil},
		{"raw", schemaFor[json.RawMessage](), nil},
		{"message", schemaFor[*abi.Message](), nil},
		{"string", schemaFor[string](), map[string]any{"type": "string"}},
		{"pointer", schemaFor[**int](), map[string]any{"type": "integer"}},
		{"float32", schemaFor[float32](), map[string]any{"type": "number"}},
		{"number", schemaFor[json.Number](), map[string]any{"type": "number"}},
		{"slice of any", schemaFor[[]any](), map[string]any{"type": "array"}},
		{"map of any", schemaFor[map[string]any](), map[string]any{"type": "object"}},
		{"time", schemaFor[time.Time](), map[string]any{"type": "string", "format": "date-time"}},
		{"empty struct", schemaFor[struct{}](), map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}},
		{"channel", schemaFor[chan int](), nil},
	} {
		if !reflect.DeepEqual(roundTrip(t, tc.got), roundTrip(t, tc.want)) {
			t.Errorf("%s: schema = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestSchemaOfRecursiveType(t *testing.T) {
	got := roundTrip(t, schemaFor[schemaTree]())
	want := roundTrip(t, map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"value"},
		"properties": map[string]any{
			"value":    map[string]any{"type": "string"},
			"children": map[string]any{"type": "array"}, // items: any value
		},
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("schema = %v, want %v", got, want)
	}
	if _, err := schema.Compile(got); err != nil {
		t.Error(err)
	}
}

func TestSchemaEmbeddingConflicts(t *testing.T) {
	type A struct{ X, Y int }
	type B struct {
		X int
		Y int `json:"Y"`
	}
	type C struct {
		A
		B
	}
	// X is ambiguous at the same depth (dropped, as encoding/json does); B's tagged Y
	// wins.
	got := schemaFor[C]()
	props := got["properties"].(map[string]any)
	if _, ok := props["X"]; ok || len(props) != 1 {
		t.Errorf("properties = %v, want only Y", props)
	}
	b, _ := json.Marshal(C{A{1, 2}, B{3, 4}})
	if string(b) != `{"Y":4}` {
		t.Fatalf("encoding/json gives %s", b)
	}
}

func TestSplitEscaped(t *testing.T) {
	got := splitEscaped(`description=a\, b,enum=x|y,required`)
	want := []string{"description=a, b", "enum=x|y", "required"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitEscaped = %q, want %q", got, want)
	}
}

// roundTrip returns v as encoding/json decodes it, so that schemas built with different
// Go types ([]string or []any, int or float64) compare equal.
func roundTrip(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
