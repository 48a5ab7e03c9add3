package main

// Host-level tests: the plugin is built to WebAssembly, loaded into a host and driven
// through the agent against loopback servers: providertest's fake server for the cases
// every provider shares, scripted replays of the Messages API's wire format for the
// rest.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/sdk/provider/providertest"
)

var anthropic = &providertest.Provider{
	Name:          "anthropic",
	Dir:           ".",
	BasePath:      "/v1",
	KeySecret:     "ANTHROPIC_API_KEY",
	KeyHeader:     "x-api-key",
	DefaultModels: defaults.Models,
	DefaultHost:   "api.anthropic.com",
	Supports: abi.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, Media: true, ToolChoice: true,
		Output: []string{"text", "json"}, Constrained: abi.ConstrainedNone},
	Reasoning: map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}},
	Codec:     codec{},
	// The tool's output, text and image all in its tool_result block.
	ToolContent: func(t *testing.T, body map[string]any) {
		msgs, _ := body["messages"].([]any)
		_, data, _ := strings.Cut(providertest.TinyPNG, ",")
		providertest.JSONEq(t, "the message after the call", msgs[len(msgs)-1], `{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"call_fake_1","content":[{"type":"text","text":"drawn"},{"type":"text","text":"A red square."},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+data+`"}}]}]}`)
	},
}

func TestProvider(t *testing.T) { providertest.Run(t, anthropic) }

// message is a whole Messages API response with the given content blocks.
func message(stop string, content ...string) string {
	return `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
		`"content":[` + strings.Join(content, ",") + `],"stop_reason":"` + stop + `","stop_sequence":null,` +
		`"usage":{"input_tokens":12,"output_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":4}}`
}

func textBlock(s string) string {
	b, _ := json.Marshal(s)
	return `{"type":"text","text":` + string(b) + `}`
}

func TestGenerateText(t *testing.T) {
	t.Parallel()
	srv := anthropic.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			providertest.JSONEq(t, "body", body, `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"Hello, Claude"}]}]}`)
		},
		Reply: providertest.ReplyJSON(200, message("end_turn", textBlock("Hello! How can I help?"))),
	})
	r, _ := anthropic.Load(t, srv.URL, nil)
	resp, err := agent.Generate(t.Context(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("Hello, Claude"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Hello! How can I help?" || resp.FinishReason != abi.FinishStop {
		t.Errorf("response %s", jsonOf(t, resp))
	}
	if u := resp.Usage; u.InputTokens != 12 || u.OutputTokens != 6 || u.TotalTokens != 18 || u.CachedContentTokens != 4 {
		t.Errorf("usage %+v", u)
	}
	if c, _ := resp.Custom.(map[string]any); c["id"] != "msg_01XFDUDYJgAACzvnptvVoYEL" {
		t.Errorf("custom %v", resp.Custom)
	}
}

func TestMultiTurnSystemAndConfig(t *testing.T) {
	t.Parallel()
	srv := anthropic.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			providertest.JSONEq(t, "body", body, `{
				"model": "claude-haiku-4-5",
				"system": "You are a pirate.\n\nKeep it short.",
				"max_tokens": 256, "temperature": 0.3, "top_p": 0.8, "top_k": 20, "stop_sequences": ["###"],
				"thinking": {"type": "enabled", "budget_tokens": 1024}, "metadata": {"user_id": "u-1"},
				"messages": [
					{"role": "user", "content": [{"type": "text", "text": "Hi."}, {"type": "text", "text": "Are you there?"}]},
					{"role": "assistant", "content": [{"type": "text", "text": "Arr, I be here."}]},
					{"role": "user", "content": [{"type": "text", "text": "Where is the treasure?"},
						{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}
				]}`)
		},
		Reply: providertest.ReplyJSON(200, message("max_tokens", textBlock("Under the palm"))),
	})
	r, _ := anthropic.Load(t, srv.URL, nil)
	resp, err := agent.Generate(t.Context(), r,
		agent.WithModelName("anthropic/claude-haiku-4-5"),
		agent.WithSystem("You are a pirate."),
		agent.WithMessages(
			abi.NewUserTextMessage("Hi."),
			abi.NewUserTextMessage("Are you there?"),
			abi.NewModelTextMessage("Arr, I be here."),
			abi.NewSystemTextMessage("Keep it short."),
			abi.NewUserMessage(abi.NewTextPart("Where is the treasure?"), abi.NewMediaPart("image/png", "data:image/png;base64,iVBORw0KGgo=")),
		),
		agent.WithConfig(map[string]any{
			"maxOutputTokens": 256, "temperature": 0.3, "topP": 0.8, "topK": 20, "stopSequences": []string{"###"},
			"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}, "metadata": map[string]any{"user_id": "u-1"},
		}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Under the palm" || resp.FinishReason != abi.FinishLength {
		t.Errorf("response %s", jsonOf(t, resp))
	}
}

// addInput and addOutput are the native tool's types.
type addInput struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOutput struct {
	Sum int `json:"sum"`
}

// addTool is a native tool whose name needs sanitizing.
func addTool(calls *atomic.Int32) agent.Tool {
	return agent.NewTool("math/add", "Adds two integers.", func(_ context.Context, in addInput) (addOutput, error) {
		calls.Add(1)
		return addOutput{Sum: in.A + in.B}, nil
	})
}

func TestToolCalling(t *testing.T) {
	t.Parallel()
	srv := anthropic.Script(t,
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				tools := body["tools"].([]any)
				tool := tools[0].(map[string]any)
				schema := tool["input_schema"].(map[string]any)
				if len(tools) != 1 || tool["name"] != "math__add" || tool["description"] != "Adds two integers." || schema["type"] != "object" || schema["properties"].(map[string]any)["a"] == nil {
					t.Errorf("tools = %s", jsonOf(t, tools))
				}
				providertest.JSONEq(t, "tool_choice", body["tool_choice"], `{"type":"auto"}`)
			},
			Reply: providertest.ReplyJSON(200, message("tool_use",
				textBlock("I'll add them."),
				`{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"math__add","input":{"a":2,"b":3}}`)),
		},
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				providertest.JSONEq(t, "messages", body["messages"], `[
					{"role":"user","content":[{"type":"text","text":"What is 2+3?"}]},
					{"role":"assistant","content":[{"type":"text","text":"I'll add them."},
						{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"math__add","input":{"a":2,"b":3}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":[{"type":"text","text":"{\"sum\":5}"}]}]}
				]`)
			},
			Reply: providertest.ReplyJSON(200, message("end_turn", textBlock("2+3 = 5."))),
		},
	)
	r, _ := anthropic.Load(t, srv.URL, nil)
	var calls atomic.Int32
	resp, err := agent.Generate(t.Context(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"),
		agent.WithPrompt("What is 2+3?"), agent.WithTools(addTool(&calls)), agent.WithToolChoice(abi.ToolChoiceAuto))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "2+3 = 5." || calls.Load() != 1 {
		t.Errorf("text %q after %d tool calls", resp.Text(), calls.Load())
	}
	// The history holds the tool request under its own name, with the API's id as ref.
	req := resp.Request.Messages[1].ToolRequests()
	if len(req) != 1 || req[0].Name != "math/add" || req[0].Ref != "toolu_01A09q90qw90lq917835lq9" {
		t.Errorf("history %s", jsonOf(t, resp.Request.Messages))
	}
}

// Recipe is the structured output of TestJSONOutput.
type Recipe struct {
	Name        string   `json:"name"`
	Ingredients []string `json:"ingredients"`
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	srv := anthropic.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			msgs := body["messages"].([]any)
			content := msgs[0].(map[string]any)["content"].([]any)
			instr, _ := content[len(content)-1].(map[string]any)["text"].(string)
			if len(msgs) != 1 || !strings.Contains(instr, "Output should be in JSON format") || !strings.Contains(instr, `"ingredients"`) {
				t.Errorf("no format instructions: %s", jsonOf(t, msgs))
			}
			if body["output_format"] != nil || body["output"] != nil {
				t.Errorf("the output config leaked into the body: %s", jsonOf(t, body))
			}
		},
		Reply: providertest.ReplyJSON(200, message("end_turn", textBlock("Here it is:\n```json\n{\"name\": \"Pancakes\", \"ingredients\": [\"flour\", \"milk\", \"eggs\"]}\n```"))),
	})
	r, _ := anthropic.Load(t, srv.URL, nil)
	out, _, err := agent.GenerateData[Recipe](t.Context(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("A pancake recipe."))
	if err != nil {
		t.Fatal(err)
	}
	if out.Name != "Pancakes" || strings.Join(out.Ingredients, ",") != "flour,milk,eggs" {
		t.Errorf("output %+v", out)
	}
}

// streamStart is a stream's message_start event.
var streamStart = sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_stream","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`)

// streamEnd ends a stream with the given stop reason.
func streamEnd(stop string, outputTokens int) string {
	return sseEvent("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, outputTokens)) +
		sseEvent("message_stop", `{"type":"message_stop"}`)
}

func textDelta(i int, s string) string {
	b, _ := json.Marshal(s)
	return sseEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, b))
}

func blockStart(i int, block string) string {
	return sseEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, block))
}

func blockStop(i int) string {
	return sseEvent("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}

func TestStreamingToolArgumentsAccumulate(t *testing.T) {
	t.Parallel()
	jsonDelta := func(s string) string {
		b, _ := json.Marshal(s)
		return sseEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":`+string(b)+`}}`)
	}
	srv := anthropic.Script(t,
		providertest.Exchange{
			Reply: providertest.ReplyEvents(streamStart,
				blockStart(0, `{"type":"text","text":""}`), textDelta(0, "Adding."), blockStop(0),
				blockStart(1, `{"type":"tool_use","id":"toolu_stream_1","name":"math__add","input":{}}`),
				jsonDelta(""), jsonDelta(`{"a": 4`), jsonDelta(`0, "b`), jsonDelta(`": 2}`),
				blockStop(1), streamEnd("tool_use", 30)),
		},
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				msgs := body["messages"].([]any)
				providertest.JSONEq(t, "tool_use", msgs[1].(map[string]any)["content"].([]any)[1], `{"type":"tool_use","id":"toolu_stream_1","name":"math__add","input":{"a":40,"b":2}}`)
				providertest.JSONEq(t, "tool_result", msgs[2], `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_stream_1","content":[{"type":"text","text":"{\"sum\":42}"}]}]}`)
			},
			Reply: providertest.ReplyEvents(streamStart, blockStart(0, `{"type":"text","text":""}`), textDelta(0, "It is 42."), blockStop(0), streamEnd("end_turn", 4)),
		},
	)
	r, _ := anthropic.Load(t, srv.URL, nil)
	var calls atomic.Int32
	var inputs []string
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(t.Context(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"),
		agent.WithPrompt("40+2?"), agent.WithTools(addTool(&calls))) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
			continue
		}
		for _, p := range v.Chunk.Content {
			if p.IsToolRequest() && v.Chunk.Role == abi.RoleModel {
				inputs = append(inputs, fmt.Sprintf("%s %v", jsonOf(t, p.ToolRequest.Input), p.ToolRequest.Partial))
			}
		}
	}
	want := []string{`null true`, `{"a":4} true`, `{"a":40} true`, `{"a":40,"b":2} true`, `{"a":40,"b":2} false`}
	if strings.Join(inputs, "\n") != strings.Join(want, "\n") {
		t.Errorf("tool request chunks:\n%s\nwant\n%s", strings.Join(inputs, "\n"), strings.Join(want, "\n"))
	}
	if final == nil || final.Text() != "It is 42." || calls.Load() != 1 {
		t.Errorf("final %s, %d tool calls", jsonOf(t, final), calls.Load())
	}
}

func TestThinking(t *testing.T) {
	t.Parallel()
	thinkingDelta := func(s string) string {
		return sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"`+s+`"}}`)
	}
	srv := anthropic.Script(t,
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				providertest.JSONEq(t, "thinking", body["thinking"], `{"type":"enabled","budget_tokens":2048}`)
			},
			Reply: providertest.ReplyEvents(streamStart,
				blockStart(0, `{"type":"thinking","thinking":""}`), thinkingDelta("Two plus "), thinkingDelta("two is four."),
				sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}`),
				blockStop(0),
				blockStart(1, `{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}`), blockStop(1),
				blockStart(2, `{"type":"text","text":""}`), textDelta(2, "4"), blockStop(2),
				streamEnd("end_turn", 40)),
		},
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				providertest.JSONEq(t, "assistant turn sent back", body["messages"].([]any)[1], `{"role":"assistant","content":[
					{"type":"thinking","thinking":"Two plus two is four.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
					{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},
					{"type":"text","text":"4"}]}`)
			},
			Reply: providertest.ReplyJSON(200, message("end_turn",
				`{"type":"thinking","thinking":"Times two.","signature":"sig2"}`, textBlock("8"))),
		},
	)
	r, _ := anthropic.Load(t, srv.URL, nil)
	cfg := agent.WithConfig(map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 2048}})
	var reasoning []string
	var first *abi.GenerateResponse
	for v, err := range agent.GenerateStream(t.Context(), r, agent.WithModelName("anthropic/claude-opus-4-1"), agent.WithPrompt("2+2?"), cfg) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			first = v.Response
		} else if s := v.Chunk.Reasoning(); s != "" {
			reasoning = append(reasoning, s)
		}
	}
	if strings.Join(reasoning, "|") != "Two plus |two is four." || first.Reasoning() != "Two plus two is four." || first.Text() != "4" {
		t.Fatalf("reasoning chunks %q, response %s", reasoning, jsonOf(t, first))
	}
	if sig := first.Message.Content[0].Metadata["signature"]; sig != "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" {
		t.Errorf("signature %v", sig)
	}
	history := append(first.Request.Messages, first.Message, abi.NewUserTextMessage("Times two?"))
	second, err := agent.Generate(t.Context(), r, agent.WithModelName("anthropic/claude-opus-4-1"), agent.WithMessages(history...), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if second.Reasoning() != "Times two." || second.Text() != "8" || second.Message.Content[0].Metadata["signature"] != "sig2" {
		t.Errorf("second %s", jsonOf(t, second))
	}
}
