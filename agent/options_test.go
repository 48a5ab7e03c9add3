package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// TestMisplacedOptionsDoNotCompile builds code that gives options where they do not
// apply and checks that the compiler refuses each, naming the option's kind: the
// guarantee the option kinds exist for.
func TestMisplacedOptionsDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	cases := []struct{ name, code, want string }{
		{"user prompt in an agent", `var _ = session.WithGenerateOpts[struct{}](agent.WithPrompt("hi"))`,
			"agent.PromptingOption does not implement agent.CommonOption"},
		{"returning tool requests in an agent", `var _ = session.WithGenerateOpts[struct{}](agent.WithReturnToolRequests(true))`,
			"agent.GenerateOption does not implement agent.CommonOption"},
		{"documents in a prompt definition", `var _ = prompt.Define(agent.NewRegistry(), "p", agent.WithDocs())`,
			"agent.GenerateOption does not implement agent.PromptOption"},
		{"tool restarts in a prompt definition", `var _ = prompt.Define(agent.NewRegistry(), "p", agent.WithToolRestarts())`,
			"agent.GenerateOption does not implement agent.PromptOption"},
	}
	_, here, _, _ := runtime.Caller(0)
	module := filepath.Dir(filepath.Dir(here))
	dir := t.TempDir()
	replace := map[string]string{}
	for i, c := range cases {
		src := filepath.Join(dir, c.name+".go")
		code := "package misuse\n\nimport (\n\t\"github.com/terrarium-ai/terrarium/agent\"\n\t\"github.com/terrarium-ai/terrarium/agent/prompt\"\n\t\"github.com/terrarium-ai/terrarium/agent/session\"\n)\n\nvar (\n\t_ = prompt.Define\n\t_ = session.WithGenerateOpts[struct{}]\n)\n\n" + c.code + "\n"
		if err := os.WriteFile(src, []byte(code), 0o600); err != nil {
			t.Fatal(err)
		}
		// Each case is a package of its own, so every error is reported.
		replace[filepath.Join(module, "internal", "misuse", string(rune('a'+i)), "x.go")] = src
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for i := range cases {
		pkgs = append(pkgs, "./internal/misuse/"+string(rune('a'+i)))
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append([]string{"build", "-overlay", overlayFile}, pkgs...)...)
	cmd.Dir = module
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("the misplaced options compiled")
	}
	for _, c := range cases {
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%s: the compiler did not say %q:\n%s", c.name, c.want, out)
		}
	}
}

func TestRepeatedSingleOptionIsAnError(t *testing.T) {
	r := agent.NewRegistry()
	testmodel.Define(r, "test/a").ReplyText("a")
	m := testmodel.New("test/b").ReplyText("b")
	cases := []struct {
		name string
		opts []agent.GenerateOption
		want string
	}{
		{"model twice", []agent.GenerateOption{agent.WithModelName("test/a"), agent.WithModel(m)}, "WithModel after WithModelName"},
		{"same option twice", []agent.GenerateOption{agent.WithModelName("test/a"), agent.WithModelName("test/a")}, "WithModelName given twice"},
		{"config twice", []agent.GenerateOption{agent.WithModelName("test/a"), agent.WithConfig(1), agent.WithConfig(2)}, "config can be set once"},
		{"output twice", []agent.GenerateOption{agent.WithModelName("test/a"), agent.WithOutputType(1), agent.WithOutputSchema(map[string]any{"type": "string"})}, "WithOutputSchema after WithOutputType"},
		{"prompt twice", []agent.GenerateOption{agent.WithModelName("test/a"), agent.WithPrompt("x"), agent.WithPrompt("y")}, "WithPrompt given twice"},
		{"settings and an option", []agent.GenerateOption{agent.WithSettings(&agent.Settings{ModelName: "test/a"}), agent.WithModel(m)}, "WithModel after WithSettings"},
	}
	for _, c := range cases {
		_, err := agent.Generate(context.Background(), r, c.opts...)
		if !errors.Is(err, agent.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidOption saying %q", c.name, err, c.want)
		}
	}
	// Lists add up rather than clash.
	if _, err := agent.Generate(context.Background(), r, agent.WithModelName("test/a"), agent.WithPrompt("x"),
		agent.WithTools(newAdd(nil)), agent.WithTools(), agent.WithMiddleware(), agent.WithMiddleware()); err != nil {
		t.Errorf("repeated list options: %v", err)
	}
}

func TestWithDefaultsYieldsToTheCallsOptions(t *testing.T) {
	r := agent.NewRegistry()
	def := testmodel.Define(r, "test/default")
	mine := testmodel.Define(r, "test/mine").ReplyText("mine")
	defaults := &agent.Settings{ModelName: "test/default", Config: map[string]any{"t": 1}, Tools: []agent.Tool{newAdd(nil)}}
	_, err := agent.Generate(context.Background(), r, agent.WithModelName("test/mine"), agent.WithPrompt("hi"),
		agent.WithToolNames(), agent.WithDefaults(defaults))
	if err != nil {
		t.Fatal(err)
	}
	req := mine.LastRequest()
	if len(def.Requests()) != 0 || req.Config.(map[string]any)["t"] != float64(1) || len(req.Tools) != 1 {
		t.Errorf("request to the chosen model = %+v (the default model got %d)", req, len(def.Requests()))
	}
}

func TestResponseHistoryIsWhatTheCallerSendsBack(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "test/h").
		Reply(toolReq("add", "1", map[string]any{"a": 1, "b": 2})).
		ReplyText(`{"sum": 3}`)
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("test/h"), agent.WithSystem("sys"),
		agent.WithPrompt("add"), agent.WithTools(newAdd(nil)), agent.WithOutputType(struct {
			Sum int `json:"sum"`
		}{}))
	if err != nil {
		t.Fatal(err)
	}
	got := testmodel.Transcript(resp.History())
	want := []string{"system: sys", "user: add", "model: call(add)", "tool: result(add)", `model: {"sum": 3}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("History = %q, want %q (without the injected format instructions)", got, want)
	}
	// The model itself saw the instructions.
	last := m.LastRequest().Messages[1]
	if len(last.Content) != 2 || !abi.Injected(last.Content[1]) {
		t.Errorf("the model's request lacks the injected instructions: %+v", last)
	}
}
