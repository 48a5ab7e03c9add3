package abi_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

// TestWireTypesRefuseNullElements finds, in abi's source, every field holding an array
// of objects ([]*T), and checks that decoding null into one of its elements fails,
// naming it: encoding/json would make it a nil pointer, on which the first reader of
// the array (a session's input checks, a provider's encoder) panics.
func TestWireTypesRefuseNullElements(t *testing.T) {
	// How to decode each type holding such a field, and what else a value needs to
	// get as far as its arrays.
	types := map[string]struct {
		v    func() any
		base string
	}{
		"Message":               {func() any { return new(abi.Message) }, `"role": "user", `},
		"Artifact":              {func() any { return new(abi.Artifact) }, ``},
		"GenerateRequest":       {func() any { return new(abi.GenerateRequest) }, ``},
		"Document":              {func() any { return new(abi.Document) }, ``},
		"GenerateResponseChunk": {func() any { return new(abi.GenerateResponseChunk) }, ``},
		"GenerateActionOptions": {func() any { return new(abi.GenerateActionOptions) }, ``},
		"Resume":                {func() any { return new(abi.Resume) }, ``},
		"ToolResponse":          {func() any { return new(abi.ToolResponse) }, `"name": "t", `},
		"HandlerInput":          {func() any { return new(abi.HandlerInput) }, ``},
	}
	fields := arraysOfObjects(t, ".")
	if len(fields) == 0 {
		t.Fatal("found no array of objects in abi's source")
	}
	for typ, names := range fields {
		tt, ok := types[typ]
		if !ok {
			t.Errorf("abi.%s holds arrays of objects (%s): give it an UnmarshalJSON refusing null elements (abi.NoNulls), and add it here",
				typ, strings.Join(names, ", "))
			continue
		}
		for _, name := range names {
			in := `{` + tt.base + `"` + name + `": [{}, null]}`
			if name == "content" || name == "parts" || name == "respond" || name == "restart" {
				in = `{` + tt.base + `"` + name + `": [{"text": "a"}, null]}`
			}
			if name == "messages" || name == "input" {
				in = `{` + tt.base + `"` + name + `": [{"role": "user", "content": []}, null]}`
			}
			err := json.Unmarshal([]byte(in), tt.v())
			if err == nil || !strings.Contains(err.Error(), name+"[1] is null") {
				t.Errorf("abi.%s decoding %s: %v, want an error naming %s[1]", typ, in, err, name)
			}
		}
	}
	// The same values without the null decode.
	var r abi.Resume
	if err := json.Unmarshal([]byte(`{"respond": [{"toolResponse": {"name": "t", "content": [{"text": "a"}]}}]}`), &r); err != nil || len(r.Respond) != 1 {
		t.Errorf("a resume without null: %+v, %v", r, err)
	}
}

// arraysOfObjects returns, by type name, the JSON names of the []*T fields of the
// struct types declared in the Go package in dir (tests aside).
func arraysOfObjects(t *testing.T, dir string) map[string][]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := spec.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, f := range st.Fields.List {
				arr, ok := f.Type.(*ast.ArrayType)
				if !ok || arr.Len != nil || f.Tag == nil {
					continue
				}
				if _, ok := arr.Elt.(*ast.StarExpr); !ok {
					continue
				}
				tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
				out[spec.Name.Name] = append(out[spec.Name.Name], strings.Split(tag, ",")[0])
			}
			return true
		})
	}
	return out
}

// TestInjectedSkipsNil: the helpers that strip injected parts from a history skip a
// nil message or part, which a Go caller may hand them, rather than panic.
func TestInjectedSkipsNil(t *testing.T) {
	if abi.Injected(nil) {
		t.Error("a nil part is injected")
	}
	msgs := []*abi.Message{nil, abi.NewUserTextMessage("hi")}
	if got := abi.WithoutInjected(msgs); len(got) != 2 || got[0] != nil || got[1] != msgs[1] {
		t.Errorf("WithoutInjected = %v", got)
	}
}
