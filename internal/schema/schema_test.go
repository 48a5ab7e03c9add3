package schema

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type city struct {
	Name string   `json:"name" jsonschema:"description=the city's name"`
	Days int      `json:"days,omitempty" jsonschema:"minimum=1"`
	Tags []string `json:"tags,omitempty"`
	Near *city    `json:"near,omitempty"`
	Home address  `json:"home"`
}

type address struct {
	Street string `json:"street"`
}

func TestInferInlinesAndKeepsRecursion(t *testing.T) {
	s := For[city]()
	b, _ := json.Marshal(s)
	if s["type"] != "object" {
		t.Fatalf("root is not an object: %s", b)
	}
	if _, ok := s["$schema"]; ok {
		t.Errorf("$schema should be dropped: %s", b)
	}
	props := s["properties"].(map[string]any)
	home := props["home"].(map[string]any)
	if home["type"] != "object" {
		t.Errorf("non-recursive definition not inlined: %s", b)
	}
	near := props["near"].(map[string]any)
	if near["$ref"] != "#/$defs/city" {
		t.Errorf("recursive reference not kept: %s", b)
	}
	if _, ok := s["$defs"].(map[string]any)["city"]; !ok {
		t.Errorf("recursive definition not kept: %s", b)
	}
	if _, ok := s["$defs"].(map[string]any)["address"]; ok {
		t.Errorf("inlined definition still in $defs: %s", b)
	}
	// The result is the caller's to change.
	s["type"] = "changed"
	if For[city]()["type"] != "object" {
		t.Error("Infer returned a shared map")
	}
	if For[any]() != nil {
		t.Error("any should have no schema")
	}
	if got := For[[]string]()["type"]; got != "array" {
		t.Errorf("[]string type = %v", got)
	}
}

func TestValidate(t *testing.T) {
	v, err := Compile(For[city]())
	if err != nil {
		t.Fatal(err)
	}
	good := []any{
		map[string]any{"name": "Paris", "home": map[string]any{"street": "x"}},
		city{Name: "Oslo", Days: 2, Near: &city{Name: "Bergen"}},
	}
	for _, g := range good {
		if err := v.Validate(g); err != nil {
			t.Errorf("Validate(%v): %v", g, err)
		}
	}
	bad := map[string]string{
		`{"home":{"street":"x"}}`:                           "missing property 'name'",
		`{"name":"x","home":{"street":"x"},"extra":1}`:      "extra",
		`{"name":1,"home":{"street":"x"}}`:                  "/name",
		`{"name":"x","days":0,"home":{"street":"x"}}`:       "/days",
		`{"name":"x","home":{"street":"x"},"near":{"a":1}}`: "/near",
	}
	for in, want := range bad {
		err := v.ValidateJSON([]byte(in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateJSON(%s) = %v, want ErrInvalid mentioning %q", in, err, want)
		}
	}
	if err := v.ValidateJSON([]byte(`{oops`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("broken JSON: %v", err)
	}
	if _, err := Compile(map[string]any{"type": 5}); err == nil {
		t.Error("Compile accepted an invalid schema")
	}
	anyV, _ := Compile(nil)
	if err := anyV.Validate(map[string]any{"x": 1}); err != nil {
		t.Errorf("nil schema rejected a value: %v", err)
	}
}

// nested returns a schema nesting objects depth levels deep (counting the root).
func nested(depth int) map[string]any {
	s := map[string]any{"type": "object"}
	for range depth/2 - 1 {
		s = map[string]any{"type": "object", "properties": map[string]any{"a": s}}
	}
	return s
}

func TestCompileLimits(t *testing.T) {
	if _, err := Compile(nested(MaxDepth)); err != nil {
		t.Errorf("a schema at the depth limit: %v", err)
	}
	// Compiling takes time growing with the square of the depth: 5,000 levels took
	// minutes before the limit.
	if _, err := Compile(nested(5000)); err == nil || !strings.Contains(err.Error(), "nested deeper than 64") {
		t.Errorf("a schema nested 5,000 levels: %v", err)
	}
	wide := map[string]any{"enum": []any{strings.Repeat("x", MaxBytes)}}
	if _, err := Compile(wide); err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Errorf("a schema over the size limit: %v", err)
	}
}

func TestCompileRefusesExternalReferences(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "private.json")
	if err := os.WriteFile(file, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + file, "file://" + fifo, "https://json-schema.example/s.json", "other.json"} {
		for _, s := range []map[string]any{{"$ref": ref}, {"$schema": ref}, {"properties": map[string]any{"a": map[string]any{"$ref": ref}}}} {
			done := make(chan error, 1)
			go func() { _, err := Compile(s); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "external reference") {
					t.Errorf("%v: %v", s, err)
				}
			case <-time.After(30 * time.Second): // a guard against a hang (the FIFO), not a speed check
				t.Fatalf("%v: still compiling after 30s", s)
			}
		}
	}
	// References within the schema, and the drafts' own meta-schemas, still work.
	for _, s := range []map[string]any{
		{"$defs": map[string]any{"n": map[string]any{"type": "integer"}}, "$ref": "#/$defs/n"},
		{"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer"},
		{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "integer"},
	} {
		if err := Validate(s, 1); err != nil {
			t.Errorf("%v: %v", s, err)
		}
	}
}

// TestSchemaOfAnnotationsOnlyAcceptsAnythingWithoutGarbage: a schema asserting nothing
// ({} or annotations only) accepts every value without walking it; one keyword more
// and values are checked again.
func TestSchemaOfAnnotationsOnlyAcceptsAnythingWithoutGarbage(t *testing.T) {
	value := map[string]any{"result": -1.5, "expression": "(1.5 + 2) * -3 / 7"}
	for _, s := range []map[string]any{{}, {"description": "the result", "title": "Result", "examples": []any{1}}} {
		v, err := Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		if allocs := testing.AllocsPerRun(100, func() {
			if err := v.Validate(value); err != nil {
				t.Fatalf("schema %v: %v", s, err)
			}
		}); allocs != 0 {
			t.Errorf("schema %v: %v allocations per validation, want none", s, allocs)
		}
	}
	if err := Validate(map[string]any{"description": "a number", "type": "number"}, value); !errors.Is(err, ErrInvalid) {
		t.Errorf("a schema with an assertion accepted %v: %v", value, err)
	}
	if _, err := Compile(map[string]any{"description": 5}); err == nil {
		t.Error("a schema whose annotation is invalid compiled")
	}
}
