package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/conformance"
	"github.com/terrarium-ai/terrarium/host/conformance/conformancetest"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// The tests below build the plugin, load it into a host and drive it through the agent
// against loopback servers that check each request and replay answers in the Messages
// API's documented wire format.

const testKey = "sk-ant-test-key"

var (
	wasmOnce  sync.Once
	wasmBytes []byte
)

// pluginWasm builds the plugin once per test binary.
func pluginWasm(t *testing.T) []byte {
	t.Helper()
	wasmOnce.Do(func() {
		b, err := os.ReadFile(pluginbuild.ForTest(t, "."))
		if err != nil {
			t.Fatal(err)
		}
		wasmBytes = b
	})
	if wasmBytes == nil {
		t.Fatal("the plugin did not build")
	}
	return wasmBytes
}

// loadPlugin loads the plugin into a fresh host, configured for the API at baseURL
// (config adds or overrides keys), and returns the registry serving its models.
func loadPlugin(t *testing.T, baseURL string, config map[string]string) (*agent.Registry, *host.Plugin) {
	t.Helper()
	r := agent.NewRegistry()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := host.New(r, host.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	cfg := map[string]string{"baseURL": baseURL + "/v1"}
	for k, v := range config {
		cfg[k] = v
	}
	p, err := h.Load(context.Background(), pluginWasm(t), host.Manifest{
		HTTP:    []string{provider.Host(baseURL)},
		Config:  cfg,
		Secrets: map[string]host.Secret{"ANTHROPIC_API_KEY": {Value: testKey, Header: "x-api-key"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, p
}

// exchange is one request a scripted server expects and the answer it replays.
type exchange struct {
	// check inspects the request's decoded body (the common headers and path are
	// checked for every request).
	check func(t *testing.T, r *http.Request, body map[string]any)
	reply func(w http.ResponseWriter)
}

// scripted is a loopback Messages API that plays exchanges in order.
type scripted struct {
	*httptest.Server
	t     *testing.T
	mu    sync.Mutex
	plays []exchange
	n     int
}

func newScripted(t *testing.T, plays ...exchange) *scripted {
	s := &scripted{t: t, plays: plays}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.Close()
		if s.n != len(s.plays) {
			t.Errorf("the server got %d requests, want %d", s.n, len(s.plays))
		}
	})
	return s
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := s.n
	s.n++
	s.mu.Unlock()
	t := s.t
	if i >= len(s.plays) {
		t.Errorf("unexpected request %d: %s %s", i+1, r.Method, r.URL)
		http.Error(w, "unexpected", 500)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		t.Errorf("request %d: %s %s, want POST /v1/messages", i+1, r.Method, r.URL.Path)
	}
	for k, want := range map[string]string{"x-api-key": testKey, "anthropic-version": "2023-06-01", "content-type": "application/json"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("request %d: header %s = %q, want %q", i+1, k, got, want)
		}
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Errorf("request %d: body: %v", i+1, err)
	}
	if p := s.plays[i]; p.check != nil {
		p.check(t, r, body)
	}
	s.plays[i].reply(w)
}

// replyJSON answers with a status, headers (name, value pairs) and a JSON body.
func replyJSON(status int, body string, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

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

// replySSE streams events, flushing each.
func replySSE(events ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("content-type", "text/event-stream")
		w.WriteHeader(200)
		for _, e := range events {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

// jsonEq reports whether v encodes to the JSON want (keys in any order).
func jsonEq(t *testing.T, what string, v any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	var g any
	json.Unmarshal([]byte(jsonOf(t, v)), &g)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s =\n%s\nwant\n%s", what, jsonOf(t, g), jsonOf(t, w))
	}
}

func TestPluginDescribes(t *testing.T) {
	t.Parallel()
	srv := newScripted(t)
	r, p := loadPlugin(t, srv.URL, map[string]string{"models": "claude-a, claude-b"})
	d := p.Descriptor()
	jsonEq(t, "capabilities", d.Capabilities, `{"http":["`+provider.Host(srv.URL)+`"],"config":["baseURL","models","apiKeySecret"],"secrets":["ANTHROPIC_API_KEY"]}`)
	for _, name := range []string{"anthropic/claude-a", "anthropic/claude-b"} {
		m, err := r.LookupModel(name)
		if err != nil {
			t.Fatal(err)
		}
		s := m.Info().Supports
		if !s.Multiturn || !s.Tools || !s.SystemRole || !s.Media || !s.ToolChoice || s.Constrained != abi.ConstrainedNone || strings.Join(s.Output, ",") != "text,json" {
			t.Errorf("%s supports %+v", name, s)
		}
	}
	// Without the models key granted, the default models are served.
	r, _ = loadPlugin(t, srv.URL, nil)
	for _, name := range defaults.Models {
		if _, err := r.LookupModel("anthropic/" + name); err != nil {
			t.Error(err)
		}
	}
}

// TestNoAPIKey checks that an empty apiKeySecret sends no key (a gateway that adds it)
// and asks for no secret.
func TestNoAPIKey(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k, ok := r.Header["X-Api-Key"]; ok {
			t.Errorf("x-api-key sent: %q", k)
		}
		replyJSON(200, message("end_turn", textBlock("via the gateway")))(w)
	}))
	defer srv.Close()
	r, p := loadPlugin(t, srv.URL, map[string]string{"apiKeySecret": ""})
	if s := p.Descriptor().Capabilities.Secrets; len(s) != 0 {
		t.Errorf("secrets = %v", s)
	}
	text, err := agent.GenerateText(context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("hi"))
	if err != nil || text != "via the gateway" {
		t.Errorf("text %q, err %v", text, err)
	}
}

func TestGenerateText(t *testing.T) {
	t.Parallel()
	srv := newScripted(t, exchange{
		check: func(t *testing.T, r *http.Request, body map[string]any) {
			jsonEq(t, "body", body, `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"Hello, Claude"}]}]}`)
		},
		reply: replyJSON(200, message("end_turn", textBlock("Hello! How can I help?"))),
	})
	r, _ := loadPlugin(t, srv.URL, nil)
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("Hello, Claude"))
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
	srv := newScripted(t, exchange{
		check: func(t *testing.T, r *http.Request, body map[string]any) {
			jsonEq(t, "body", body, `{
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
		reply: replyJSON(200, message("max_tokens", textBlock("Under the palm"))),
	})
	r, _ := loadPlugin(t, srv.URL, nil)
	resp, err := agent.Generate(context.Background(), r,
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
	srv := newScripted(t,
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				tools := body["tools"].([]any)
				tool := tools[0].(map[string]any)
				schema := tool["input_schema"].(map[string]any)
				if len(tools) != 1 || tool["name"] != "math__add" || tool["description"] != "Adds two integers." || schema["type"] != "object" || schema["properties"].(map[string]any)["a"] == nil {
					t.Errorf("tools = %s", jsonOf(t, tools))
				}
				jsonEq(t, "tool_choice", body["tool_choice"], `{"type":"auto"}`)
			},
			reply: replyJSON(200, message("tool_use",
				textBlock("I'll add them."),
				`{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"math__add","input":{"a":2,"b":3}}`)),
		},
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				jsonEq(t, "messages", body["messages"], `[
					{"role":"user","content":[{"type":"text","text":"What is 2+3?"}]},
					{"role":"assistant","content":[{"type":"text","text":"I'll add them."},
						{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"math__add","input":{"a":2,"b":3}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":[{"type":"text","text":"{\"sum\":5}"}]}]}
				]`)
			},
			reply: replyJSON(200, message("end_turn", textBlock("2+3 = 5."))),
		},
	)
	r, _ := loadPlugin(t, srv.URL, nil)
	var calls atomic.Int32
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"),
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
	srv := newScripted(t, exchange{
		check: func(t *testing.T, r *http.Request, body map[string]any) {
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
		reply: replyJSON(200, message("end_turn", textBlock("Here it is:\n```json\n{\"name\": \"Pancakes\", \"ingredients\": [\"flour\", \"milk\", \"eggs\"]}\n```"))),
	})
	r, _ := loadPlugin(t, srv.URL, nil)
	out, _, err := agent.GenerateData[Recipe](context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("A pancake recipe."))
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

func TestStreamingForwardsChunksAsTheyArrive(t *testing.T) {
	t.Parallel()
	const pause = 300 * time.Millisecond
	var resumed atomic.Int64 // when the server went on after its pause (unix nanoseconds)
	srv := newScripted(t, exchange{
		check: func(t *testing.T, r *http.Request, body map[string]any) {
			if body["stream"] != true || r.Header.Get("accept") != "text/event-stream" {
				t.Errorf("not a stream request: accept %q, body %s", r.Header.Get("accept"), jsonOf(t, body))
			}
		},
		reply: func(w http.ResponseWriter) {
			w.Header().Set("content-type", "text/event-stream; charset=utf-8")
			w.WriteHeader(200)
			write := func(s string) { io.WriteString(w, s); w.(http.Flusher).Flush() }
			write(streamStart + blockStart(0, `{"type":"text","text":""}`) + sseEvent("ping", `{"type":"ping"}`) + textDelta(0, "Once upon "))
			time.Sleep(pause)
			resumed.Store(time.Now().UnixNano())
			write(textDelta(0, "a time") + textDelta(0, "."))
			write(blockStop(0) + streamEnd("end_turn", 5))
		},
	})
	r, _ := loadPlugin(t, srv.URL, nil)
	var chunks []string
	var first time.Time
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("A story.")) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
			continue
		}
		if first.IsZero() {
			first = time.Now()
		}
		chunks = append(chunks, v.Chunk.Text())
	}
	if strings.Join(chunks, "|") != "Once upon |a time|." {
		t.Errorf("chunks %q", chunks)
	}
	if first.IsZero() || first.UnixNano() >= resumed.Load() {
		t.Errorf("the first chunk reached the caller at %v, after the server resumed at %v", first, time.Unix(0, resumed.Load()))
	}
	if final == nil || final.Text() != "Once upon a time." || final.FinishReason != abi.FinishStop || final.Usage.OutputTokens != 5 || final.Usage.InputTokens != 25 {
		t.Errorf("final %s", jsonOf(t, final))
	}
}

func TestStreamingToolArgumentsAccumulate(t *testing.T) {
	t.Parallel()
	jsonDelta := func(s string) string {
		b, _ := json.Marshal(s)
		return sseEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":`+string(b)+`}}`)
	}
	srv := newScripted(t,
		exchange{
			reply: replySSE(streamStart,
				blockStart(0, `{"type":"text","text":""}`), textDelta(0, "Adding."), blockStop(0),
				blockStart(1, `{"type":"tool_use","id":"toolu_stream_1","name":"math__add","input":{}}`),
				jsonDelta(""), jsonDelta(`{"a": 4`), jsonDelta(`0, "b`), jsonDelta(`": 2}`),
				blockStop(1), streamEnd("tool_use", 30)),
		},
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				msgs := body["messages"].([]any)
				jsonEq(t, "tool_use", msgs[1].(map[string]any)["content"].([]any)[1], `{"type":"tool_use","id":"toolu_stream_1","name":"math__add","input":{"a":40,"b":2}}`)
				jsonEq(t, "tool_result", msgs[2], `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_stream_1","content":[{"type":"text","text":"{\"sum\":42}"}]}]}`)
			},
			reply: replySSE(streamStart, blockStart(0, `{"type":"text","text":""}`), textDelta(0, "It is 42."), blockStop(0), streamEnd("end_turn", 4)),
		},
	)
	r, _ := loadPlugin(t, srv.URL, nil)
	var calls atomic.Int32
	var inputs []string
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"),
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
	srv := newScripted(t,
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				jsonEq(t, "thinking", body["thinking"], `{"type":"enabled","budget_tokens":2048}`)
			},
			reply: replySSE(streamStart,
				blockStart(0, `{"type":"thinking","thinking":""}`), thinkingDelta("Two plus "), thinkingDelta("two is four."),
				sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}`),
				blockStop(0),
				blockStart(1, `{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}`), blockStop(1),
				blockStart(2, `{"type":"text","text":""}`), textDelta(2, "4"), blockStop(2),
				streamEnd("end_turn", 40)),
		},
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				jsonEq(t, "assistant turn sent back", body["messages"].([]any)[1], `{"role":"assistant","content":[
					{"type":"thinking","thinking":"Two plus two is four.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
					{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},
					{"type":"text","text":"4"}]}`)
			},
			reply: replyJSON(200, message("end_turn",
				`{"type":"thinking","thinking":"Times two.","signature":"sig2"}`, textBlock("8"))),
		},
	)
	r, _ := loadPlugin(t, srv.URL, nil)
	cfg := agent.WithConfig(map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 2048}})
	var reasoning []string
	var first *abi.GenerateResponse
	for v, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("anthropic/claude-opus-4-1"), agent.WithPrompt("2+2?"), cfg) {
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
	second, err := agent.Generate(context.Background(), r, agent.WithModelName("anthropic/claude-opus-4-1"), agent.WithMessages(history...), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if second.Reasoning() != "Times two." || second.Text() != "8" || second.Message.Content[0].Metadata["signature"] != "sig2" {
		t.Errorf("second %s", jsonOf(t, second))
	}
}

// apiErr is an error body of the Messages API.
func apiErr(typ, msg string) string {
	return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status     int
		header     []string
		body       string
		code       abi.ErrorCode
		message    string
		retryAfter float64
	}{
		{401, nil, apiErr("authentication_error", "invalid x-api-key"), abi.CodePermissionDenied, "invalid x-api-key", 0},
		{404, nil, apiErr("not_found_error", "model: claude-sonnet-4-5"), abi.CodeNotFound, "model: claude-sonnet-4-5", 0},
		{429, []string{"retry-after", "17"}, apiErr("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), abi.CodeLimitExceeded, "rate limit", 17},
		{500, nil, apiErr("api_error", "Internal server error"), abi.CodeUnavailable, "Internal server error", 0},
		{529, nil, apiErr("overloaded_error", "Overloaded"), abi.CodeUnavailable, "Overloaded", 0},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			srv := newScripted(t, exchange{reply: replyJSON(tc.status, tc.body, tc.header...)})
			r, _ := loadPlugin(t, srv.URL, nil)
			_, err := agent.Generate(context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("hi"))
			var ce *host.CallError
			var ae *abi.Error
			if !errors.As(err, &ce) || ce.Plugin != "anthropic" || ce.Export != plugin.ExportGenerate || !errors.As(err, &ae) {
				t.Fatalf("error %v (%T)", err, err)
			}
			if ae.Status != tc.status || ae.Code != tc.code || !strings.Contains(ae.Message, tc.message) || ae.RetryAfter != tc.retryAfter {
				t.Errorf("error %+v, want status %d, code %s, message with %q, retryAfter %v", ae, tc.status, tc.code, tc.message, tc.retryAfter)
			}
		})
	}
}

func TestStreamAndNetworkFailures(t *testing.T) {
	t.Parallel()
	// An error event in the middle of a stream, after a chunk went out.
	srv := newScripted(t, exchange{reply: replySSE(streamStart, blockStart(0, `{"type":"text","text":""}`), textDelta(0, "Hel"),
		sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))})
	r, _ := loadPlugin(t, srv.URL, nil)
	var got error
	var chunks int
	for v, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("hi")) {
		if err != nil {
			got = err
		} else if !v.Done {
			chunks++
		}
	}
	var ae *abi.Error
	if !errors.As(got, &ae) || ae.Code != abi.CodeUnavailable || !strings.Contains(ae.Message, "Overloaded") || chunks != 1 {
		t.Errorf("mid-stream error: %v after %d chunks", got, chunks)
	}

	// A server that hangs up on every connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	r, _ = loadPlugin(t, "http://"+ln.Addr().String(), nil)
	_, err = agent.Generate(context.Background(), r, agent.WithModelName("anthropic/claude-sonnet-4-5"), agent.WithPrompt("hi"))
	if !errors.As(err, &ae) || ae.Code != abi.CodeUnavailable || ae.Status != 0 || !agent.Transient(err) {
		t.Errorf("network error: %v", err)
	}
}

func TestReliableRetriesThenFallsBack(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls[body.Model]++
		n := calls[body.Model]
		mu.Unlock()
		switch {
		case body.Model == "claude-primary" && n%2 == 1:
			replyJSON(529, apiErr("overloaded_error", "Overloaded"))(w)
		case body.Model == "claude-primary":
			replyJSON(503, apiErr("api_error", "Service unavailable"), "retry-after", "0.01")(w)
		default:
			replyJSON(200, message("end_turn", textBlock("from "+body.Model)))(w)
		}
	}))
	defer srv.Close()
	r, _ := loadPlugin(t, srv.URL, map[string]string{"models": "claude-primary,claude-backup"})
	rel := agent.Reliability{Retries: 2, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Backups: []string{"anthropic/claude-backup"}}
	start := time.Now()
	text, err := agent.GenerateText(context.Background(), r, agent.WithModelName("anthropic/claude-primary"), agent.WithPrompt("hi"),
		agent.WithMiddleware(agent.Reliable(r, rel)))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if text != "from claude-backup" || calls["claude-primary"] != 3 || calls["claude-backup"] != 1 {
		t.Errorf("text %q, calls %v", text, calls)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestFakeAnthropic drives the plugin against the fake server of fakeserver_test.go.
func TestFakeAnthropic(t *testing.T) {
	t.Parallel()
	srv := newFakeAnthropic(t)
	r, _ := loadPlugin(t, srv.URL, nil)
	ctx := context.Background()
	model := agent.WithModelName("anthropic/claude-sonnet-4-5")

	text, err := agent.GenerateText(ctx, r, model, agent.WithSystem("Be nice."), agent.WithPrompt("hello there"))
	if err != nil || text != "echo: hello there" {
		t.Errorf("echo: %q, %v", text, err)
	}
	// A tool call, streamed, and the answer to its result.
	var calls atomic.Int32
	var chunks int
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(ctx, r, model, agent.WithPrompt(`please use math/add {"a": 20, "b": 22}`), agent.WithTools(addTool(&calls))) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
		} else {
			chunks++
		}
	}
	if final == nil || final.Text() != `Tool results: {"sum":42}` || calls.Load() != 1 || chunks < 4 {
		t.Errorf("tool call: %s after %d chunks, %d calls", jsonOf(t, final), chunks, calls.Load())
	}
	// toolChoice required calls the first tool with a minimal input.
	resp, err := agent.Generate(ctx, r, model, agent.WithPrompt("add something"), agent.WithTools(addTool(&calls)),
		agent.WithToolChoice(abi.ToolChoiceRequired), agent.WithReturnToolRequests(true))
	if tr := resp.ToolRequests(); err != nil || len(tr) != 1 || tr[0].Name != "math/add" || jsonOf(t, tr[0].Input) != `{"a":0,"b":0}` {
		t.Errorf("required tool: %s, %v", jsonOf(t, resp), err)
	}
	// JSON output through the format instructions.
	out, _, err := agent.GenerateData[Recipe](ctx, r, model, agent.WithPrompt("a recipe"))
	if err != nil || out.Name != "" || out.Ingredients == nil {
		t.Errorf("JSON output: %+v, %v", out, err)
	}
	// Thinking, stop sequences and max_tokens.
	resp, err = agent.Generate(ctx, r, model, agent.WithPrompt("one two three four"),
		agent.WithConfig(map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}, "maxOutputTokens": 3}))
	if err != nil || resp.Reasoning() != "Thinking about: one two three four" || resp.Text() != "echo: one two" || resp.FinishReason != abi.FinishLength {
		t.Errorf("thinking and max_tokens: %s, %v", jsonOf(t, resp), err)
	}
	resp, err = agent.Generate(ctx, r, model, agent.WithPrompt("stop HERE please"), agent.WithConfig(map[string]any{"stopSequences": []string{"HERE"}}))
	if err != nil || resp.Text() != "echo: stop " || resp.FinishReason != abi.FinishStop || !strings.Contains(resp.FinishMessage, "HERE") {
		t.Errorf("stop sequence: %s, %v", jsonOf(t, resp), err)
	}
	// Errors on request.
	_, err = agent.Generate(ctx, r, model, agent.WithPrompt("/status 529"))
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Status != 529 || ae.RetryAfter != 1 {
		t.Errorf("/status 529: %v", err)
	}
	// A request breaking the API's rules is refused as the API does.
	direct, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 10, "messages": []any{
		map[string]any{"role": "user", "content": "a"}, map[string]any{"role": "user", "content": "b"}}})
	hr, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(string(direct)))
	hr.Header.Set("x-api-key", "k")
	hr.Header.Set("anthropic-version", apiVersion)
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), "roles must alternate") {
		t.Errorf("consecutive user messages: %d %s", res.StatusCode, b)
	}
}

// TestConformanceAgainstFake runs the plugin conformance suite on the plugin talking to
// the fake server.
func TestConformanceAgainstFake(t *testing.T) {
	t.Parallel()
	srv := newFakeAnthropic(t)
	conformancetest.Require(t, pluginWasm(t), conformance.Options{Manifest: host.Manifest{
		HTTP:    []string{provider.Host(srv.URL)},
		Config:  map[string]string{"baseURL": srv.URL + "/v1", "models": "claude-sonnet-4-5"},
		Secrets: map[string]host.Secret{"ANTHROPIC_API_KEY": {Value: testKey, Header: "x-api-key"}},
	}})
}
