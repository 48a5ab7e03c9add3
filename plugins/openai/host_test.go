package main

// Host-level tests: the plugin is built to WebAssembly, loaded into a host and driven
// through the agent against loopback servers: providertest's fake server for the cases
// every provider shares, scripted replays of OpenAI's wire format for the rest.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/sdk/provider/providertest"
)

var openai = &providertest.Provider{
	Name:          "openai",
	Dir:           ".",
	BasePath:      "/v1",
	KeySecret:     "OPENAI_API_KEY",
	KeyHeader:     "Authorization",
	DefaultModels: defaults.Models,
	DefaultHost:   "api.openai.com",
	Supports: abi.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, Media: true, ToolChoice: true,
		Output: []string{"text", "json"}, Constrained: abi.ConstrainedAll},
	Reasoning: map[string]any{"reasoning_effort": "low"},
	Codec:     codec{},
	// The tool's output and text in its tool message, the image in a user message after
	// it (tool messages hold text only).
	ToolContent: func(t *testing.T, body map[string]any) {
		msgs, _ := body["messages"].([]any)
		providertest.JSONEq(t, "the messages after the call", msgs[len(msgs)-2:], `[
			{"role":"tool","tool_call_id":"call_fake_1","content":"drawn\nA red square."},
			{"role":"user","content":[{"type":"text","text":"The tools returned these files:"},{"type":"image_url","image_url":{"url":"`+providertest.TinyPNG+`"}}]}]`)
	},
}

func TestProvider(t *testing.T) { providertest.Run(t, openai) }

// completionJSON is a whole response with one choice.
func completionJSON(message, finish string) string {
	return `{"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": "gpt-test-2025",
		"choices": [{"index": 0, "message": ` + message + `, "logprobs": null, "finish_reason": "` + finish + `"}],
		"usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16,
			"prompt_tokens_details": {"cached_tokens": 2}, "completion_tokens_details": {"reasoning_tokens": 1}}}`
}

// events frames chunks as server-sent events.
func events(chunks ...string) func(http.ResponseWriter) {
	for i, c := range chunks {
		chunks[i] = "data: " + c + "\n\n"
	}
	return providertest.ReplyEvents(chunks...)
}

// deltaJSON is a streamed chunk with one delta.
func deltaJSON(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

func TestText(t *testing.T) {
	t.Parallel()
	srv := openai.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Accept") != "application/json" || r.Header.Get("Authorization") != "Bearer "+providertest.TestKey {
				t.Errorf("request %s, Accept %q, Authorization %q", r.URL.Path, r.Header.Get("Accept"), r.Header.Get("Authorization"))
			}
			providertest.JSONEq(t, "body", body, `{"messages":[{"content":"Say hi","role":"user"}],"model":"meta-llama/llama-3.1-8b:free"}`)
		},
		Reply: providertest.ReplyJSON(200, completionJSON(`{"role": "assistant", "content": "Hi there!", "refusal": null}`, "stop")),
	})
	r, _ := openai.Load(t, srv.URL, map[string]string{"models": "meta-llama/llama-3.1-8b:free"})
	resp, err := agent.Generate(t.Context(), r, openai.Model("meta-llama/llama-3.1-8b:free"), agent.WithPrompt("Say hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Hi there!" || resp.FinishReason != abi.FinishStop || resp.LatencyMs <= 0 {
		t.Errorf("response = %s", providertest.JSON(resp))
	}
	if u := resp.Usage; u.InputTokens != 12 || u.OutputTokens != 4 || u.TotalTokens != 16 || u.CachedContentTokens != 2 || u.ThoughtsTokens != 1 {
		t.Errorf("usage = %+v", u)
	}
	if providertest.Field(resp.Custom, "id") != "chatcmpl-test" || providertest.Field(resp.Custom, "model") != "gpt-test-2025" {
		t.Errorf("custom = %v", resp.Custom)
	}
}

func TestMultiTurnSystemAndConfig(t *testing.T) {
	t.Parallel()
	srv := openai.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			providertest.JSONEq(t, "messages", body["messages"], `[{"content":"You are terse.","role":"system"},{"content":"My name is Ada.","role":"user"},`+
				`{"content":"Hello, Ada.","role":"assistant"},{"content":"What is my name?","role":"user"}]`)
			for k, want := range map[string]any{"temperature": 0.1, "top_p": 0.5, "max_tokens": 50.0, "stop": []any{"\n\n"}, "seed": 42.0, "user": "ada-1", "model": "history"} {
				if providertest.JSON(body[k]) != providertest.JSON(want) {
					t.Errorf("%s = %v, want %v", k, body[k], want)
				}
			}
			for _, k := range []string{"topP", "maxOutputTokens", "stopSequences", "stream", "tools", "response_format"} {
				if _, ok := body[k]; ok {
					t.Errorf("body has %s", k)
				}
			}
		},
		Reply: providertest.ReplyJSON(200, completionJSON(`{"role": "assistant", "content": "Ada."}`, "stop")),
	})
	r, _ := openai.Load(t, srv.URL, map[string]string{"models": "history"})
	resp, err := agent.Generate(t.Context(), r, openai.Model("history"),
		agent.WithSystem("You are terse."),
		agent.WithMessages(abi.NewUserTextMessage("My name is Ada."), abi.NewModelTextMessage("Hello, Ada.")),
		agent.WithPrompt("What is my name?"),
		agent.WithConfig(map[string]any{"temperature": 0.1, "topP": 0.5, "maxOutputTokens": 50, "stopSequences": []string{"\n\n"}, "seed": 42, "user": "ada-1"}))
	if err != nil || resp.Text() != "Ada." {
		t.Errorf("text %q, err %v", resp.Text(), err)
	}
}

type addInput struct {
	A int `json:"a"`
	B int `json:"b"`
}

// addTool is a native tool named math/add (sent as math__add) recording its calls.
func addTool(calls *[]addInput) agent.Tool {
	var mu sync.Mutex
	return agent.NewTool("math/add", "Adds two integers.", func(ctx context.Context, in addInput) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		*calls = append(*calls, in)
		return in.A + in.B, nil
	})
}

func TestTools(t *testing.T) {
	t.Parallel()
	srv := openai.Script(t,
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				if fn := providertest.Field(body, "tools", 0, "function"); providertest.Field(body, "tools", 0, "type") != "function" ||
					providertest.Field(fn, "name") != "math__add" || providertest.Field(fn, "description") != "Adds two integers." ||
					providertest.Field(fn, "parameters", "properties", "a", "type") != "integer" {
					t.Errorf("tools = %s", providertest.JSON(body["tools"]))
				}
				if body["tool_choice"] != "auto" {
					t.Errorf("tool_choice = %v", body["tool_choice"])
				}
			},
			Reply: providertest.ReplyJSON(200, completionJSON(`{"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_abc123", "type": "function", "function": {"name": "math__add", "arguments": "{\"a\": 2, \"b\": 3}"}}]}`, "tool_calls")),
		},
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				providertest.JSONEq(t, "follow-up messages", body["messages"], `[{"content":"What is 2+3?","role":"user"},`+
					`{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"a\":2,\"b\":3}","name":"math__add"},"id":"call_abc123","type":"function"}]},`+
					`{"content":"5","role":"tool","tool_call_id":"call_abc123"}]`)
			},
			Reply: providertest.ReplyJSON(200, completionJSON(`{"role": "assistant", "content": "2 + 3 = 5"}`, "stop")),
		})
	r, _ := openai.Load(t, srv.URL, map[string]string{"models": "tools"})
	var calls []addInput
	resp, err := agent.Generate(t.Context(), r, openai.Model("tools"),
		agent.WithPrompt("What is 2+3?"), agent.WithTools(addTool(&calls)), agent.WithToolChoice(abi.ToolChoiceAuto))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "2 + 3 = 5" || !slices.Equal(calls, []addInput{{2, 3}}) {
		t.Errorf("text %q, tool calls %v", resp.Text(), calls)
	}
	// The history holds the request under the tool's own name, with the API's call id.
	if tr := resp.Request.Messages[1].ToolRequests(); len(tr) != 1 || tr[0].Name != "math/add" || tr[0].Ref != "call_abc123" {
		t.Errorf("history = %s", providertest.JSON(resp.Request.Messages))
	}
}

type forecast struct {
	City  string  `json:"city"`
	TempC float64 `json:"tempC"`
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	srv := openai.Script(t,
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				rf := body["response_format"]
				if providertest.Field(rf, "type") != "json_schema" || providertest.Field(rf, "json_schema", "name") != "output" ||
					providertest.Field(rf, "json_schema", "strict") != false || providertest.Field(rf, "json_schema", "schema", "properties", "city", "type") != "string" {
					t.Errorf("response_format = %s", providertest.JSON(rf))
				}
				if got := providertest.Field(body, "messages", 0, "content"); got != "Weather in Oslo?" {
					t.Errorf("constrained output still got instructions: %v", got)
				}
			},
			Reply: providertest.ReplyJSON(200, completionJSON(`{"role": "assistant", "content": "{\"city\": \"Oslo\", \"tempC\": -3.5}"}`, "stop")),
		},
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				if rf := providertest.JSON(body["response_format"]); rf != `{"type":"json_object"}` {
					t.Errorf("response_format = %s", rf)
				}
				if parts := providertest.JSON(providertest.Field(body, "messages", 0, "content")); !strings.Contains(parts, "JSON") {
					t.Errorf("unconstrained output lacks instructions: %s", parts)
				}
			},
			Reply: providertest.ReplyJSON(200, completionJSON(`{"role": "assistant", "content": "Here:\n`+"```json"+`\n{\"city\": \"Bergen\", \"tempC\": 4}\n`+"```"+`"}`, "stop")),
		})
	r, _ := openai.Load(t, srv.URL, map[string]string{"models": "json"})
	for _, tc := range []struct {
		constrained bool
		want        forecast
	}{{true, forecast{"Oslo", -3.5}}, {false, forecast{"Bergen", 4}}} {
		out, _, err := agent.GenerateData[forecast](t.Context(), r, openai.Model("json"), agent.WithPrompt("Weather in "+tc.want.City+"?"), agent.WithConstrained(tc.constrained))
		if err != nil || *out != tc.want {
			t.Errorf("output %+v, %v; want %+v", out, err, tc.want)
		}
	}
}

func TestStreamingToolCall(t *testing.T) {
	t.Parallel()
	args := func(index int, extra, args string) string {
		return deltaJSON(`{"tool_calls":[{"index":`+fmt.Sprint(index)+extra+`,"function":{`+args+`}}]}`, "")
	}
	srv := openai.Script(t,
		providertest.Exchange{Reply: events(
			deltaJSON(`{"role":"assistant","content":null}`, ""),
			args(0, `,"id":"call_s1","type":"function"`, `"name":"math__add","arguments":""`),
			args(0, "", `"arguments":"{\"a\""`),
			args(0, "", `"arguments":": 2, "`),
			args(0, "", `"arguments":"\"b\": 3}"`),
			deltaJSON(`{}`, "tool_calls"),
			`[DONE]`,
		)},
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				if providertest.Field(body, "messages", 2, "tool_call_id") != "call_s1" || providertest.Field(body, "messages", 2, "content") != "5" {
					t.Errorf("follow-up = %s", providertest.JSON(body["messages"]))
				}
			},
			Reply: events(deltaJSON(`{"content":"It is 5."}`, ""), deltaJSON(`{}`, "stop"), `[DONE]`),
		})
	r, _ := openai.Load(t, srv.URL, map[string]string{"models": "stream-tools"})
	var calls []addInput
	var partials []string
	var whole []*abi.ToolRequest
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(t.Context(), r, openai.Model("stream-tools"), agent.WithPrompt("2+3?"), agent.WithTools(addTool(&calls))) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
			continue
		}
		for _, p := range v.Chunk.Content {
			if !p.IsToolRequest() || v.Chunk.Role != abi.RoleModel {
				continue
			}
			if p.ToolRequest.Partial {
				partials = append(partials, providertest.JSON(p.ToolRequest.Input))
			} else {
				whole = append(whole, p.ToolRequest)
			}
		}
	}
	if want := []string{"null", `{}`, `{"a":2}`, `{"a":2,"b":3}`}; !slices.Equal(partials, want) {
		t.Errorf("partial inputs = %q, want %q", partials, want)
	}
	if len(whole) != 1 || whole[0].Name != "math/add" || whole[0].Ref != "call_s1" || providertest.JSON(whole[0].Input) != `{"a":2,"b":3}` {
		t.Errorf("whole requests = %s", providertest.JSON(whole))
	}
	if !slices.Equal(calls, []addInput{{2, 3}}) || final.Text() != "It is 5." {
		t.Errorf("tool calls %v, final %q", calls, final.Text())
	}
}
