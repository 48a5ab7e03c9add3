// Package genkitref gives tests access to Genkit's reference files, which live beside
// the repository in ../shared/reference/genkit: its JSON schema of the wire types and its
// conformance cases for the generate loop.
package genkitref

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// Dir returns the directory holding Genkit's reference files. It looks for
// ../shared/reference/genkit beside the module root, starting from the working
// directory, and can be overridden with TERRARIUM_GENKIT_REF.
func Dir() (string, error) {
	if d := os.Getenv("TERRARIUM_GENKIT_REF"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			ref := filepath.Join(filepath.Dir(d), "shared", "reference", "genkit")
			if _, err := os.Stat(ref); err != nil {
				return "", fmt.Errorf("genkitref: %s not found beside the module (%w)", ref, err)
			}
			return ref, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("genkitref: no go.mod above %s", wd)
		}
	}
}

// Require skips t (fails it in CI) when the reference files are not beside the
// checkout: tests that use them call it first.
func Require(t testing.TB) {
	t.Helper()
	_, err := Dir()
	testenv.Need(t, "Genkit's reference files in ../shared/reference/genkit (or TERRARIUM_GENKIT_REF)", err)
}

// File reads one reference file by name, e.g. "generate.yaml".
func File(name string) ([]byte, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, name))
}

var (
	compileOnce sync.Once
	compiler    *jsonschema.Compiler
	compileErr  error
	compileMu   sync.Mutex // the compiler is not safe for concurrent use
	schemas     sync.Map   // definition name -> *jsonschema.Schema
)

const schemaURL = "file:///genkit-schema.json"

// Validate checks that data (JSON) is valid against the definition def (e.g. "Message")
// of Genkit's schema.
func Validate(def string, data []byte) error {
	compileOnce.Do(func() {
		raw, err := File("genkit-schema.json")
		if err != nil {
			compileErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			compileErr = err
			return
		}
		compiler = jsonschema.NewCompiler()
		compileErr = compiler.AddResource(schemaURL, doc)
	})
	if compileErr != nil {
		return compileErr
	}
	s, ok := schemas.Load(def)
	if !ok {
		compileMu.Lock()
		sch, err := compiler.Compile(schemaURL + "#/$defs/" + def)
		compileMu.Unlock()
		if err != nil {
			return fmt.Errorf("genkitref: compiling %s: %w", def, err)
		}
		s, _ = schemas.LoadOrStore(def, sch)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("genkitref: %w", err)
	}
	return s.(*jsonschema.Schema).Validate(inst)
}

// ValidateValue marshals v and validates it against def.
func ValidateValue(def string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return Validate(def, b)
}
