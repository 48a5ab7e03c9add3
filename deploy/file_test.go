package deploy_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/deploy"
)

func TestParseAgentFile(t *testing.T) {
	src := `name: assistant
description: A helpful assistant.
model:
  name: offline/echo
  config: {temperature: 0.2}
  retries: 2
  timeout: 30s
prompt: assistant.prompt
tools: [askUser, calculator/calc]
plugins:
  - path: ../plugins/calculator
    grants:
      state: write
      timeout: 5s
      http: [api.example.com]
      secrets:
        KEY: {env: EXAMPLE_KEY}
snapshots:
  store: memory
  on: [turnEnd]
`
	f, err := deploy.Parse("agents/assistant.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "assistant" || f.Model.Name != "offline/echo" || f.Model.Timeout != 30*time.Second || f.Model.Retries != 2 {
		t.Errorf("parsed %+v", f)
	}
	g := f.Plugins[0].Grants
	if g.State != "write" || g.Timeout.Duration != 5*time.Second || g.HTTP[0] != "api.example.com" || g.Secrets["KEY"].Env != "EXAMPLE_KEY" {
		t.Errorf("grants %+v", g.Manifest)
	}
	if !f.PromptFile() || f.Resolve(f.Prompt) != "agents/assistant.prompt" {
		t.Errorf("prompt %q: file %v, resolved %q", f.Prompt, f.PromptFile(), f.Resolve(f.Prompt))
	}
	if f.Line("tools[1]") != 9 || f.Line("plugins[0].grants.timeout") != 14 {
		t.Errorf("lines: tools[1] %d, timeout %d", f.Line("tools[1]"), f.Line("plugins[0].grants.timeout"))
	}
}

func TestParseErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown key", "name: a\nmodel:\n  nam: x\n", `a.yaml:3: model.nam: unknown field "nam"`},
		{"wrong type", "name: a\nmodel:\n  name: x\n  retries: many\n", "a.yaml:4: model.retries: cannot unmarshal string"},
		{"syntax", "name: [\n", "a.yaml:1: "},
		{"duplicate key", "name: a\nname: b\n", `a.yaml:2: mapping key "name" already defined`},
		{"no name", "model: {name: x}\n", "a.yaml: name: missing"},
		{"bad name", "name: a b\nmodel: {name: x}\n", "a.yaml:1: name: \"a b\""},
		{"no model", "name: a\n", "a.yaml: model.name: missing"},
		{"unknown grant", "name: a\nmodel: {name: x}\nplugins:\n  - path: p\n    grants:\n      state: write\n      stat: write\n", `a.yaml:7: plugins[0].grants.stat: grants: json: unknown field "stat"`},
		{"bad grant type", "name: a\nmodel: {name: x}\nplugins:\n  - path: p\n    grants:\n      memoryPages: lots\n", "a.yaml:6: plugins[0].grants.memoryPages: grants: json: cannot unmarshal"},
		{"bad duration", "name: a\nmodel: {name: x}\nplugins:\n  - path: p\n    grants:\n      timeout: soon\n", "a.yaml:6: plugins[0].grants.timeout: grants: time: invalid duration"},
		{"bad pin", "name: a\nmodel: {name: x}\nplugins:\n  - path: p\n    sha256: abc\n", "a.yaml:5: plugins[0].sha256: \"abc\""},
		{"no path", "name: a\nmodel: {name: x}\nplugins:\n  - sha256: abc\n", "a.yaml:4: plugins[0].path: missing"},
		{"bad store", "name: a\nmodel: {name: x}\nsnapshots:\n  store: disk\n", "a.yaml:4: snapshots.store: \"disk\""},
		{"bad event", "name: a\nmodel: {name: x}\nsnapshots:\n  on: [turnEnd, never]\n", "a.yaml:4: snapshots.on[1]: \"never\""},
		{"isolation", "name: a\nmodel: {name: x}\nisolation: strict\n", "a.yaml:3: isolation: \"strict\": want pooled or session"},
		{"tool errors", "name: a\nmodel: {name: x}\ntoolErrors: ignore\n", "a.yaml:3: toolErrors: \"ignore\": want model or fail"},
		{"tenants reserved", "name: a\nmodel: {name: x}\ntenants: [a]\n", "a.yaml:3: tenants: tenants are not set in agent files"},
		{"two documents", "name: a\n---\nname: b\n", "a.yaml: want exactly one YAML document"},
		{"tagged list", "name: a\nmodel: {name: x}\ntools: !x\n", "a.yaml: the YAML decoder failed: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deploy.Parse("a.yaml", []byte(tc.src))
			if !errors.Is(err, deploy.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q, want one starting with %q", err, tc.want)
			}
		})
	}
}

// FuzzParse: any bytes give an agent file or an error about the file, never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name: a\nmodel: {name: x}\n"))
	f.Add([]byte(flightFile))
	f.Add([]byte("name: a\nmodel: {name: x}\nroutes:\n  - title: T\n    steps: [{next: [{step: s}]}]\nprompt: p\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := deploy.Parse("a.yaml", data)
		if err != nil && !errors.Is(err, deploy.ErrInvalid) {
			t.Errorf("error %v does not wrap ErrInvalid", err)
		}
		if err == nil && file.Name == "" {
			t.Error("a file without a name parsed")
		}
	})
}
