package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// refusedParameters are a value of each chat completions parameter Terrarium refuses
// (docs/serving.md's table), which the openai package must meet as a 400 naming it.
var refusedParameters = []struct {
	Param string `json:"param"`
	Value any    `json:"value"`
	code  string
}{
	{"n", 2, "unsupported_value"},
	{"logprobs", true, "unsupported_value"},
	{"parallel_tool_calls", false, "unsupported_value"},
	{"store", true, "unsupported_value"},
	{"service_tier", "flex", "unsupported_value"},
	{"modalities", []string{"text", "audio"}, "unsupported_value"},
	{"tool_choice", "required", "unsupported_value"},
	{"top_logprobs", 3, "unsupported_parameter"},
	{"audio", map[string]string{"voice": "alloy", "format": "mp3"}, "unsupported_parameter"},
	{"prediction", map[string]string{"type": "content", "content": "x"}, "unsupported_parameter"},
	{"web_search_options", map[string]any{}, "unsupported_parameter"},
	{"functions", []any{map[string]string{"name": "f"}}, "unsupported_parameter"},
	{"function_call", "auto", "unsupported_parameter"},
	{"metadata", map[string]string{"k": "v"}, "unsupported_parameter"},
	{"moderation", map[string]any{}, "unsupported_parameter"},
	{"prompt_cache_key", "k", "unsupported_parameter"},
	{"prompt_cache_retention", "24h", "unsupported_parameter"},
	{"prompt_cache_options", map[string]any{}, "unsupported_parameter"},
	{"temperature", 0.2, "unsupported_parameter"},
	{"top_p", 0.9, "unsupported_parameter"},
	{"frequency_penalty", 0.5, "unsupported_parameter"},
	{"presence_penalty", 0.5, "unsupported_parameter"},
	{"logit_bias", map[string]int{"50256": -100}, "unsupported_parameter"},
	{"max_tokens", 16, "unsupported_parameter"},
	{"max_completion_tokens", 16, "unsupported_parameter"},
	{"stop", []string{"\n"}, "unsupported_parameter"},
	{"seed", 7, "unsupported_parameter"},
	{"reasoning_effort", "low", "unsupported_parameter"},
	{"verbosity", "low", "unsupported_parameter"},
}

// TestOpenAIClientAsAppsUseIt: the openai package answers an interrupt and a client
// tool (streamed) as tool calls, asks for JSON of a schema, reads the usage whole and
// streamed, and meets each refusal as a BadRequestError naming the parameter.
func TestOpenAIClientAsAppsUseIt(t *testing.T) {
	dir := clients(t)
	s := sharedServe(t)
	cases, _ := json.Marshal(refusedParameters)
	type usage struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	}
	var got struct {
		Interrupt struct {
			Finish, Name, Answer, AnswerFinish string
			Arguments                          map[string]any
		}
		ClientTool struct {
			Finish, Name, Answer string
			Arguments            map[string]any
		}
		JSON  map[string]any
		Usage struct {
			Whole    usage
			Streamed struct {
				Usage   usage
				Choices int
			}
		}
		Refusals []struct {
			Param, Type, Code, Refused, Error string
			Status                            int
			Accepted                          bool
		}
	}
	node(t, dir, "openai-apps.mjs", &got, s.url, "assistant", string(cases))
	if i := got.Interrupt; i.Finish != "tool_calls" || i.Name != "askUser" || i.Arguments["question"] != "Which colour?" ||
		i.Answer != `Tool results: "green"` || i.AnswerFinish != "stop" {
		t.Errorf("interrupt: %+v", i)
	}
	if c := got.ClientTool; c.Finish != "tool_calls" || c.Name != "lookup" || c.Arguments["word"] != "terrarium" ||
		c.Answer != `Tool results: "a glass garden (terrarium)"` {
		t.Errorf("client tool: %+v", c)
	}
	// The offline model fills a schema with minimal values.
	if got.JSON["city"] != "a" || got.JSON["day"] != 1.0 || len(got.JSON) != 2 {
		t.Errorf("json_schema: %v", got.JSON)
	}
	// The offline model counts a token a word: the tool call (4 words in, the call
	// out) and the answer (the user's 4 words, the call and its result in; 3 words out).
	want := usage{Prompt: 10, Completion: 4, Total: 14}
	if got.Usage.Whole != want || got.Usage.Streamed.Usage != want || got.Usage.Streamed.Choices != 0 {
		t.Errorf("usage %+v, want %+v whole and streamed", got.Usage, want)
	}
	if len(got.Refusals) != len(refusedParameters) {
		t.Fatalf("%d refusals for %d parameters", len(got.Refusals), len(refusedParameters))
	}
	for i, r := range got.Refusals {
		if r.Status != 400 || r.Error != "BadRequestError" || r.Type != "invalid_request_error" || r.Refused != r.Param ||
			r.Code != refusedParameters[i].code {
			t.Errorf("%s: %+v, want a 400 %s naming it", r.Param, r, refusedParameters[i].code)
		}
	}
}

// TestAISDKRunsAToolAndStreams: the AI SDK (ai, @ai-sdk/openai-compatible) runs its own
// tool in generateText's steps, its result resuming the turn with no session header,
// and streams with streamText.
func TestAISDKRunsAToolAndStreams(t *testing.T) {
	dir := clients(t)
	s := sharedServe(t)
	var got struct {
		Text      string
		Steps     []string
		ToolCalls []struct {
			Name  string
			Input map[string]any
		}
		Ran      []string
		Usage    struct{ InputTokens, OutputTokens, TotalTokens int }
		Streamed struct {
			Text, Finish string
			Parts        int
			Usage        struct{ InputTokens, OutputTokens int }
		}
	}
	node(t, dir, "vercel.mjs", &got, s.url, "assistant")
	if got.Text != `Tool results: "a glass garden (terrarium)"` || strings.Join(got.Steps, ",") != "tool-calls,stop" ||
		len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != "lookup" || got.ToolCalls[0].Input["word"] != "terrarium" ||
		len(got.Ran) != 1 || got.Usage.TotalTokens == 0 {
		t.Errorf("generateText: %+v", got)
	}
	if st := got.Streamed; st.Text != "echo: Hello from the AI SDK" || st.Parts < 3 || st.Finish != "stop" || st.Usage.OutputTokens != 6 {
		t.Errorf("streamText: %+v", st)
	}
}

// TestLangChainBindsTools: LangChain's ChatOpenAI with bindTools gets the tool call,
// and the ToolMessage answering it continues the turn.
func TestLangChainBindsTools(t *testing.T) {
	dir := clients(t)
	s := sharedServe(t)
	var got struct {
		ToolCalls []struct {
			Name string
			Args map[string]any
		}
		Finish, Answer, Streamed string
		Usage                    struct {
			Input  int `json:"input_tokens"`
			Output int `json:"output_tokens"`
		}
	}
	node(t, dir, "langchain.mjs", &got, s.url, "assistant")
	if len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != "lookup" || got.ToolCalls[0].Args["word"] != "terrarium" || got.Finish != "tool_calls" ||
		got.Answer != `Tool results: "a glass garden (terrarium)"` || got.Usage.Input == 0 || got.Streamed != "echo: Hello from LangChain" {
		t.Errorf("LangChain: %+v", got)
	}
}

// TestMCPClientOnServeTenants: the MCP TypeScript SDK against serve's /mcp, for two
// tenants: each lists its own tools (a's agent has the plugins' tools, b's only
// askUser, which MCP does not serve), a's MCP session keeps its notes from one call to
// the next while another session has none, and a client without a key is refused.
func TestMCPClientOnServeTenants(t *testing.T) {
	dir := clients(t)
	const admin = "admin-mcp-0123456789abcdef0123456789"
	t.Setenv(adminKeyEnv, admin)
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	src := "tenants:\n  - id: a\n    agents: [assistant]\n    plugins: {offline: {}, calculator: {timeout: 5s}, clock: {timeout: 5s}, scratchpad: {state: write}, profile: {state: write}}\n" +
		"  - id: b\n    agents: [support]\n    plugins: {offline: {}}\n"
	if err := os.WriteFile(tenants, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-data", t.TempDir(), "-tenants", tenants, exampleDeployment)
	var got struct {
		Tenants []struct {
			Tools        []string
			Notes        struct{ Notes []string }
			OtherSession struct{ Notes []string }
			Calc         struct{ Value float64 }
			Session      string
		}
		NoKey string
	}
	node(t, dir, "mcp-tenants.mjs", &got, s.url, s.makeKey(t, admin, "a"), s.makeKey(t, admin, "b"))
	if len(got.Tenants) != 2 {
		t.Fatalf("%+v", got)
	}
	a, b := got.Tenants[0], got.Tenants[1]
	if strings.Join(a.Tools, ",") != "calculator_calc,clock_now,scratchpad_note,scratchpad_notes" || len(b.Tools) != 0 {
		t.Errorf("a sees %v, b sees %v", a.Tools, b.Tools)
	}
	if strings.Join(a.Notes.Notes, ",") != "first,second" || len(a.OtherSession.Notes) != 0 || a.Calc.Value != 42 || a.Session == "" {
		t.Errorf("a's sessions: %+v", a)
	}
	if !strings.HasPrefix(got.NoKey, "StreamableHTTPError 401:") {
		t.Errorf("without a key: %q", got.NoKey)
	}
}
