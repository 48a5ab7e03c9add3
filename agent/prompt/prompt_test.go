package prompt_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/prompt"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

func writePrompts(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const travelPrompt = `---
model: test/travel
config:
  temperature: 0.4
tools: [add]
input:
  schema:
    city: string
    days?: integer
  default:
    days: 3
output:
  schema:
    city: string
    plan(array): string
---
{{role "system"}}
You plan trips. The traveller likes {{@state.likes}}.
{{> signature}}
{{role "user"}}
Plan {{days}} days in {{city}}.
{{#if budget}}Budget: {{budget}}{{/if}}
`

func TestPromptFileRendersWithInputStateAndPartials(t *testing.T) {
	dir := writePrompts(t, map[string]string{
		"travel.prompt":     travelPrompt,
		"_signature.prompt": "Sign every plan as Terra.",
	})
	r := agent.NewRegistry()
	agent.DefineTool(r, "add", "adds", func(ctx context.Context, in struct{ A, B int }) (int, error) { return in.A + in.B, nil })
	prompts, err := prompt.LoadDir(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(prompts) != 1 || prompts[0].Name() != "travel" || r.Lookup("/prompt/travel") == nil {
		t.Fatalf("prompts = %v", prompts)
	}
	type likes struct {
		Likes string `json:"likes"`
	}
	// Render inside a session flow so @state is the session's state.
	flow := session.DefineSessionFlow(r, "render", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[struct{}], p *session.SessionFlowParams[struct{}, likes]) error {
		for range inCh {
			p.Session.SetCustom(likes{Likes: "museums"})
			a, err := prompts[0].Render(ctx, map[string]any{"city": "Lisbon"})
			if err != nil {
				return err
			}
			if a.Model != "test/travel" || a.Config.(map[string]any)["temperature"] != 0.4 || len(a.Tools) != 1 || a.Tools[0] != "add" {
				t.Errorf("settings = %s", jsonOf(a))
			}
			if a.Output == nil || a.Output.Format != "json" || a.Output.JSONSchema["type"] != "object" {
				t.Errorf("output = %s", jsonOf(a.Output))
			}
			got := testmodel.Transcript(a.Messages)
			want := []string{
				"system: \nYou plan trips. The traveller likes museums.\nSign every plan as Terra.",
				"user: \nPlan 3 days in Lisbon.\n",
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("messages = %q\nwant       %q", got, want)
			}
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		return nil
	})
	c, _ := flow.StreamBidi(context.Background())
	c.Send(&session.SessionFlowInput{})
	for _, err := range c.Receive() {
		if err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if _, err := c.Output(); err != nil {
		t.Fatal(err)
	}

	// Outside a session @state.likes is missing: rendering fails, naming it.
	resp, err := prompts[0].Execute(context.Background(), map[string]any{"city": "Lisbon"})
	if err == nil {
		t.Fatalf("rendered without a session: %v", resp)
	}
	if !errors.Is(err, prompt.ErrTemplate) || !strings.Contains(err.Error(), "travel.prompt:18") || !strings.Contains(err.Error(), "@state.likes") {
		t.Errorf("missing state: %v", err)
	}
}

func TestPromptErrorsNameFileLineAndVariable(t *testing.T) {
	cases := map[string]struct {
		src  string
		want []string
	}{
		"badyaml.prompt":  {"---\nmodel: test/x\nconfig: [unclosed\n---\nHello", []string{"badyaml.prompt:3", "front matter"}},
		"unclosed.prompt": {"---\nmodel: test/x\nHello", []string{"unclosed.prompt:1", "not closed"}},
		"badtpl.prompt":   {"---\nmodel: test/x\n---\nline one\nHello {{#if x}} never closed\n", []string{"badtpl.prompt:6", "Expecting OpenEndBlock"}},
	}
	for name, c := range cases {
		dir := writePrompts(t, map[string]string{name: c.src})
		_, err := prompt.Load(agent.NewRegistry(), filepath.Join(dir, name))
		if !errors.Is(err, prompt.ErrTemplate) {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", name, err, w)
			}
		}
	}
	dir := writePrompts(t, map[string]string{"greet.prompt": "---\nmodel: test/x\n---\nHello {{name}},\nyou live in {{address.city}}.\n"})
	p, err := prompt.Load(agent.NewRegistry(), filepath.Join(dir, "greet.prompt"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Render(context.Background(), map[string]any{"name": "Ann", "address": map[string]any{"street": "x"}})
	if !errors.Is(err, prompt.ErrTemplate) || !strings.Contains(err.Error(), "greet.prompt:5") || !strings.Contains(err.Error(), "{{address.city}}") {
		t.Errorf("missing nested variable: %v", err)
	}
	a, err := p.Render(context.Background(), map[string]any{"name": "Ann", "address": map[string]any{"city": "Oslo"}})
	if err != nil || a.Messages[0].Text() != "Hello Ann,\nyou live in Oslo." {
		t.Errorf("render = %q, %v", a.Messages[0].Text(), err)
	}
	// A code-defined template that does not parse panics at definition, naming it.
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), `prompt "broken"`) {
			t.Errorf("recover = %v", r)
		}
	}()
	prompt.Define(agent.NewRegistry(), "broken", agent.WithSystem("{{#each}}"))
}

func TestDataPromptExecute(t *testing.T) {
	type RoleInput struct {
		Role    string `json:"role"`
		Context string `json:"context"`
	}
	type TaskResponse struct {
		Task     string   `json:"task"`
		Steps    []string `json:"steps"`
		Priority string   `json:"priority"`
	}
	r := agent.NewRegistry()
	testmodel.Define(r, "test/data").ReplyText("```json\n{\"task\":\"t\",\"steps\":[\"a\"],\"priority\":\"p\"}\n```")
	p := prompt.DefineData[RoleInput, TaskResponse](r, "tasks",
		agent.WithModelName("test/data"),
		agent.WithSystem("You are a {{role}} planner."),
		agent.WithPrompt("Plan: {{context}}"),
	)
	out, resp, err := p.Execute(context.Background(), RoleInput{Role: "careful", Context: "release"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Task != "t" || resp.Request.Output.Format != "json" {
		t.Errorf("out = %+v", out)
	}
	want := []string{"system: You are a careful planner.", "user: Plan: release | Output should be in JSON format and conform to the following schema:\n\n```\n" + toIndentedSchema(t, resp.Request.Output.Schema) + "\n```\n"}
	if got := testmodel.Transcript(resp.Request.Messages); !slices.Equal(got, want) {
		t.Errorf("the model received %q, want %q", got, want)
	}
}

func toIndentedSchema(t *testing.T, s map[string]any) string {
	t.Helper()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jsonOf shows a value in a failure message.
func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestParseNamesTheSourceInErrors(t *testing.T) {
	r := agent.NewRegistry()
	p, err := prompt.Parse(r, "greeter", "agents/greeter.yaml (prompt)", []byte("---\nmodel: test/m\n---\nHello {{name}}!"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := prompt.Lookup(r, "greeter"); got != p {
		t.Error("the parsed prompt is not registered under its name")
	}
	if p.Settings().ModelName != "test/m" {
		t.Errorf("model = %q", p.Settings().ModelName)
	}
	_, err = prompt.Parse(r, "broken", "agents/broken.yaml (prompt)", []byte("---\nmodel: [\n---\nHi"))
	if !errors.Is(err, prompt.ErrTemplate) || !strings.Contains(err.Error(), "agents/broken.yaml (prompt):2") {
		t.Errorf("broken front matter: %v", err)
	}
}
