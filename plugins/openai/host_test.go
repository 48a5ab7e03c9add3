package main

// Host-level tests: the plugin is built to WebAssembly, loaded into a host and driven
// through agent.Generate and agent.GenerateStream against a loopback server that checks
// each request and replays responses in OpenAI's wire format.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
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

var (
	wasmOnce sync.Once
	wasmData []byte
	wasmErr  error
)

// pluginWasm builds the plugin once per test binary.
func pluginWasm(t *testing.T) []byte {
	t.Helper()
	wasmOnce.Do(func() { wasmData, wasmErr = os.ReadFile(pluginbuild.ForTest(t, ".")) })
	if wasmErr != nil {
		t.Fatal(wasmErr)
	}
	return wasmData
}

// loadPlugin loads the plugin into a fresh host with a manifest pointing it at
// baseURL, and returns the registry.
func loadPlugin(t *testing.T, baseURL, models string, edit ...func(*host.Manifest)) (*agent.Registry, *host.Plugin) {
	t.Helper()
	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	m := host.Manifest{
		HTTP:    []string{provider.Host(baseURL)},
		Config:  map[string]string{"baseURL": baseURL, "models": models},
		Secrets: map[string]host.Secret{"OPENAI_API_KEY": {Value: "sk-test"}},
	}
	for _, e := range edit {
		e(&m)
	}
	p, err := h.Load(context.Background(), pluginWasm(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return r, p
}

// sharedModels are the models of the shared plugin; each test drives its own.
const sharedModels = "meta-llama/llama-3.1-8b:free,history,tools,json,stream,stream-tools,err-401,err-404,err-429,err-400,err-500,err-503,primary,backup,hangs,answers"

// shared is one host with the plugin loaded, its baseURL pointing at a router that
// hands each request to the handler of the test owning the model the body names, so
// that the plugin is loaded once for the tests that need no manifest of their own.
var shared struct {
	once     sync.Once
	reg      *agent.Registry
	h        *host.Host
	srv      *httptest.Server
	err      error
	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.h != nil {
		shared.h.Close(context.Background())
		shared.srv.Close()
	}
	os.Exit(code)
}

// sharedPlugin returns the registry of the shared host, and routes the requests for
// the given models to handler for the rest of the test.
func sharedPlugin(t *testing.T, handler http.HandlerFunc, models ...string) *agent.Registry {
	t.Helper()
	wasm := pluginWasm(t)
	shared.once.Do(func() {
		shared.handlers = map[string]http.HandlerFunc{}
		shared.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var body struct {
				Model string `json:"model"`
			}
			json.Unmarshal(b, &body)
			shared.mu.Lock()
			h := shared.handlers[body.Model]
			shared.mu.Unlock()
			if h == nil {
				replyJSON(404, `{"error": {"message": "no test serves this model", "code": "model_not_found"}}`)(w)
				return
			}
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			h(w, r)
		}))
		shared.reg = agent.NewRegistry()
		shared.h, shared.err = host.New(shared.reg, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if shared.err != nil {
			return
		}
		_, shared.err = shared.h.Load(context.Background(), wasm, host.Manifest{
			HTTP:    []string{provider.Host(shared.srv.URL)},
			Config:  map[string]string{"baseURL": shared.srv.URL + "/v1", "models": sharedModels},
			Secrets: map[string]host.Secret{"OPENAI_API_KEY": {Value: "sk-test"}},
		})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for _, m := range models {
		if _, taken := shared.handlers[m]; taken {
			t.Fatalf("model %s is served by another test", m)
		}
		shared.handlers[m] = handler
	}
	t.Cleanup(func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		for _, m := range models {
			delete(shared.handlers, m)
		}
	})
	return shared.reg
}

// exchange is one request the scripted server expects and its answer.
type exchange struct {
	check func(t *testing.T, r *http.Request, body map[string]any)
	reply func(w http.ResponseWriter)
}

// scripted returns the registry of the shared plugin with model served by exchanges
// played in order; every request must be a POST of JSON to /v1/chat/completions with
// the injected key, and every exchange must be played by the end of the test.
func scripted(t *testing.T, model string, exchanges ...exchange) *agent.Registry {
	t.Helper()
	var mu sync.Mutex
	next := 0
	r := sharedPlugin(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		if i >= len(exchanges) {
			t.Errorf("unexpected request %d: %s %s", i, r.Method, r.URL)
			http.Error(w, "no more exchanges", 500)
			return
		}
		body := checkRequest(t, r)
		if ex := exchanges[i]; ex.check != nil {
			ex.check(t, r, body)
		}
		exchanges[i].reply(w)
	}, model)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if next != len(exchanges) {
			t.Errorf("the server got %d requests, want %d", next, len(exchanges))
		}
	})
	return r
}

// checkRequest checks what every request must be and returns its body.
func checkRequest(t *testing.T, r *http.Request) map[string]any {
	t.Helper()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want the injected secret", got)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Errorf("request body: %v", err)
	}
	return body
}

// replyJSON answers with a status and a JSON body.
func replyJSON(status int, body string, headers ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// replySSE streams events, flushing each; a "pause" event sleeps 300 ms instead, and
// the time the stream resumes after it is stored in resumed, if given.
func replySSE(events ...string) func(http.ResponseWriter) {
	return replySSEResumed(nil, events...)
}

func replySSEResumed(resumed *atomic.Int64, events ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		for _, e := range events {
			if e == "pause" {
				time.Sleep(300 * time.Millisecond)
				if resumed != nil {
					resumed.Store(time.Now().UnixNano())
				}
				continue
			}
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}
}

// completionJSON is a whole response with one choice.
func completionJSON(message, finish string) string {
	return `{"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": "gpt-test-2025",
		"choices": [{"index": 0, "message": ` + message + `, "logprobs": null, "finish_reason": "` + finish + `"}],
		"usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16,
			"prompt_tokens_details": {"cached_tokens": 2}, "completion_tokens_details": {"reasoning_tokens": 1}}}`
}

// deltaJSON is a streamed chunk with one delta.
func deltaJSON(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

// field reads a value in decoded JSON by a path of keys and indexes.
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDescribeAndTransportErrors checks the models the config declares, and the
// errors of a server that cannot be reached and of a host the manifest does not grant.
func TestDescribeAndTransportErrors(t *testing.T) {
	r, p := loadPlugin(t, "http://127.0.0.1:1/v1", "gpt-test, meta-llama/llama-3.1-8b:free ,llama3.2:3b")
	if p.Name() != "openai" || !slices.Equal(p.Descriptor().Capabilities.HTTP, []string{"127.0.0.1:1"}) ||
		!slices.Equal(p.Descriptor().Capabilities.Secrets, []string{"OPENAI_API_KEY"}) {
		t.Errorf("descriptor = %+v", p.Descriptor())
	}
	want := []string{"/model/openai/gpt-test", "/model/openai/meta-llama/llama-3.1-8b:free", "/model/openai/llama3.2:3b"}
	if !slices.Equal(p.Keys(), want) {
		t.Errorf("keys = %v, want %v", p.Keys(), want)
	}
	m, err := r.LookupModel("openai/meta-llama/llama-3.1-8b:free")
	if err != nil {
		t.Fatal(err)
	}
	s := m.Info().Supports
	if !s.Multiturn || !s.Tools || !s.SystemRole || !s.Media || !s.ToolChoice || s.Constrained != abi.ConstrainedAll || !slices.Equal(s.Output, []string{"text", "json"}) {
		t.Errorf("supports = %+v", s)
	}
	// Nothing listens on port 1: unavailable, without a status, worth retrying.
	_, err = agent.Generate(context.Background(), r, agent.WithModelName("openai/gpt-test"), agent.WithPrompt("hi"))
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Code != abi.CodeUnavailable || ae.Status != 0 || !agent.Transient(err) {
		t.Errorf("unreachable: %v", err)
	}

	// Without config the defaults are declared, and api.openai.com is asked for and
	// used, which this manifest does not grant.
	r, p = loadPlugin(t, "", "", func(m *host.Manifest) { m.Config, m.HTTP = nil, []string{"127.0.0.1"} })
	if !slices.Equal(p.Keys(), []string{"/model/openai/gpt-4o", "/model/openai/gpt-4o-mini"}) ||
		!slices.Equal(p.Descriptor().Capabilities.HTTP, []string{"api.openai.com"}) {
		t.Errorf("default keys = %v, descriptor = %+v", p.Keys(), p.Descriptor())
	}
	_, err = agent.Generate(context.Background(), r, agent.WithModelName("openai/gpt-4o"), agent.WithPrompt("hi"))
	if !errors.As(err, &ae) || ae.Code != abi.CodePermissionDenied || !strings.Contains(ae.Message, "api.openai.com") {
		t.Errorf("host not granted: %v", err)
	}
}

func TestText(t *testing.T) {
	r := scripted(t, "meta-llama/llama-3.1-8b:free", exchange{
		check: func(t *testing.T, r *http.Request, body map[string]any) {
			if r.Header.Get("Accept") != "application/json" {
				t.Errorf("Accept = %q", r.Header.Get("Accept"))
			}
			if got := mustJSON(body); got != `{"messages":[{"content":"Say hi","role":"user"}],"model":"meta-llama/llama-3.1-8b:free"}` {
				t.Errorf("body = %s", got)
			}
		},
		reply: replyJSON(200, completionJSON(`{"role": "assistant", "content": "Hi there!", "refusal": null}`, "stop")),
	})
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("openai/meta-llama/llama-3.1-8b:free"), agent.WithPrompt("Say hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Hi there!" || resp.FinishReason != abi.FinishStop || resp.LatencyMs <= 0 {
		t.Errorf("response = %s", mustJSON(resp))
	}
	if u := resp.Usage; u.InputTokens != 12 || u.OutputTokens != 4 || u.TotalTokens != 16 || u.CachedContentTokens != 2 || u.ThoughtsTokens != 1 {
		t.Errorf("usage = %+v", u)
	}
	if field(resp.Custom, "id") != "chatcmpl-test" || field(resp.Custom, "model") != "gpt-test-2025" {
		t.Errorf("custom = %v", resp.Custom)
	}
}

func TestMultiTurnSystemAndConfig(t *testing.T) {
	r := scripted(t, "history", exchange{
		check: func(t *testing.T, r *http.Request, body map[string]any) {
			wantMsgs := `[{"content":"You are terse.","role":"system"},{"content":"My name is Ada.","role":"user"},` +
				`{"content":"Hello, Ada.","role":"assistant"},{"content":"What is my name?","role":"user"}]`
			if got := mustJSON(body["messages"]); got != wantMsgs {
				t.Errorf("messages = %s\nwant %s", got, wantMsgs)
			}
			for k, want := range map[string]any{"temperature": 0.1, "top_p": 0.5, "max_tokens": 50.0, "stop": []any{"\n\n"}, "seed": 42.0, "user": "ada-1", "model": "history"} {
				if mustJSON(body[k]) != mustJSON(want) {
					t.Errorf("%s = %v, want %v", k, body[k], want)
				}
			}
			for _, k := range []string{"topP", "maxOutputTokens", "stopSequences", "stream", "tools", "response_format"} {
				if _, ok := body[k]; ok {
					t.Errorf("body has %s", k)
				}
			}
		},
		reply: replyJSON(200, completionJSON(`{"role": "assistant", "content": "Ada."}`, "stop")),
	})
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("openai/history"),
		agent.WithSystem("You are terse."),
		agent.WithMessages(abi.NewUserTextMessage("My name is Ada."), abi.NewModelTextMessage("Hello, Ada.")),
		agent.WithPrompt("What is my name?"),
		agent.WithConfig(map[string]any{"temperature": 0.1, "topP": 0.5, "maxOutputTokens": 50, "stopSequences": []string{"\n\n"}, "seed": 42, "user": "ada-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Ada." {
		t.Errorf("text = %q", resp.Text())
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
		*calls = append(*calls, in)
		mu.Unlock()
		return in.A + in.B, nil
	})
}

func TestTools(t *testing.T) {
	r := scripted(t, "tools",
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				if field(body, "tools", 0, "type") != "function" || field(body, "tools", 0, "function", "name") != "math__add" ||
					field(body, "tools", 0, "function", "description") != "Adds two integers." ||
					field(body, "tools", 0, "function", "parameters", "properties", "a", "type") != "integer" {
					t.Errorf("tools = %s", mustJSON(body["tools"]))
				}
				if body["tool_choice"] != "auto" {
					t.Errorf("tool_choice = %v", body["tool_choice"])
				}
			},
			reply: replyJSON(200, completionJSON(`{"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_abc123", "type": "function", "function": {"name": "math__add", "arguments": "{\"a\": 2, \"b\": 3}"}}]}`, "tool_calls")),
		},
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				want := `[{"content":"What is 2+3?","role":"user"},` +
					`{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"a\":2,\"b\":3}","name":"math__add"},"id":"call_abc123","type":"function"}]},` +
					`{"content":"5","role":"tool","tool_call_id":"call_abc123"}]`
				if got := mustJSON(body["messages"]); got != want {
					t.Errorf("follow-up messages = %s\nwant %s", got, want)
				}
			},
			reply: replyJSON(200, completionJSON(`{"role": "assistant", "content": "2 + 3 = 5"}`, "stop")),
		})
	var calls []addInput
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("openai/tools"),
		agent.WithPrompt("What is 2+3?"), agent.WithTools(addTool(&calls)), agent.WithToolChoice(abi.ToolChoiceAuto))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "2 + 3 = 5" || len(calls) != 1 || calls[0] != (addInput{2, 3}) {
		t.Errorf("text %q, tool calls %v", resp.Text(), calls)
	}
	// The history holds the request under the tool's own name, with the API's call id.
	hist := resp.Request.Messages
	if tr := hist[1].ToolRequests(); len(tr) != 1 || tr[0].Name != "math/add" || tr[0].Ref != "call_abc123" {
		t.Errorf("history = %s", mustJSON(hist))
	}
}

type forecast struct {
	City  string  `json:"city"`
	TempC float64 `json:"tempC"`
}

func TestJSONOutput(t *testing.T) {
	r := scripted(t, "json",
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				rf := body["response_format"]
				if field(rf, "type") != "json_schema" || field(rf, "json_schema", "name") != "output" || field(rf, "json_schema", "strict") != false ||
					field(rf, "json_schema", "schema", "properties", "city", "type") != "string" {
					t.Errorf("response_format = %s", mustJSON(rf))
				}
				if got := field(body, "messages", 0, "content"); got != "Weather in Oslo?" {
					t.Errorf("constrained output still got instructions: %v", got)
				}
			},
			reply: replyJSON(200, completionJSON(`{"role": "assistant", "content": "{\"city\": \"Oslo\", \"tempC\": -3.5}"}`, "stop")),
		},
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				if mustJSON(body["response_format"]) != `{"type":"json_object"}` {
					t.Errorf("response_format = %s", mustJSON(body["response_format"]))
				}
				if parts := field(body, "messages", 0, "content"); !strings.Contains(mustJSON(parts), "JSON") {
					t.Errorf("unconstrained output lacks instructions: %s", mustJSON(parts))
				}
			},
			reply: replyJSON(200, completionJSON(`{"role": "assistant", "content": "Here:\n`+"```json"+`\n{\"city\": \"Bergen\", \"tempC\": 4}\n`+"```"+`"}`, "stop")),
		})
	out, _, err := agent.GenerateData[forecast](context.Background(), r, agent.WithModelName("openai/json"), agent.WithPrompt("Weather in Oslo?"))
	if err != nil {
		t.Fatal(err)
	}
	if *out != (forecast{"Oslo", -3.5}) {
		t.Errorf("output = %+v", out)
	}
	out, _, err = agent.GenerateData[forecast](context.Background(), r, agent.WithModelName("openai/json"), agent.WithPrompt("Weather in Bergen?"), agent.WithConstrained(false))
	if err != nil {
		t.Fatal(err)
	}
	if *out != (forecast{"Bergen", 4}) {
		t.Errorf("output = %+v", out)
	}
}

func TestStreaming(t *testing.T) {
	var resumed atomic.Int64 // unix nanos when the server went on after its pause
	r := scripted(t, "stream", exchange{
		check: func(t *testing.T, r *http.Request, body map[string]any) {
			if body["stream"] != true || mustJSON(body["stream_options"]) != `{"include_usage":true}` || r.Header.Get("Accept") != "text/event-stream" {
				t.Errorf("streaming request: %s, Accept %q", mustJSON(body), r.Header.Get("Accept"))
			}
		},
		reply: replySSEResumed(&resumed,
			deltaJSON(`{"role":"assistant","content":""}`, ""),
			deltaJSON(`{"reasoning":"The user greets."}`, ""),
			deltaJSON(`{"content":"Hel"}`, ""),
			"pause",
			deltaJSON(`{"content":"lo, "}`, ""),
			deltaJSON(`{"content":"world!"}`, ""),
			deltaJSON(`{}`, "stop"),
			`{"id":"chatcmpl-s","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`,
			`[DONE]`,
		),
	})
	var texts []string
	var firstText time.Time
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("openai/stream"), agent.WithPrompt("Hello")) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
			continue
		}
		if v.Chunk.Text() != "" && firstText.IsZero() {
			firstText = time.Now()
		}
		if v.Chunk.Reasoning() != "" {
			texts = append(texts, "reasoning:"+v.Chunk.Reasoning())
		} else {
			texts = append(texts, v.Chunk.Text())
		}
	}
	if want := []string{"reasoning:The user greets.", "Hel", "lo, ", "world!"}; !slices.Equal(texts, want) {
		t.Errorf("chunks = %q, want %q", texts, want)
	}
	// The first text reached the caller while the server was still pausing, before it
	// sent the rest of the response.
	if after := time.Unix(0, resumed.Load()); firstText.IsZero() || !firstText.Before(after) {
		t.Errorf("the first chunk arrived at %v, the server went on at %v: not streamed as it arrived", firstText, after)
	}
	if final.Text() != "Hello, world!" || final.Reasoning() != "The user greets." || final.Usage.TotalTokens != 8 || final.FinishReason != abi.FinishStop {
		t.Errorf("final = %s", mustJSON(final))
	}
}

func TestStreamingToolCall(t *testing.T) {
	args := func(index int, extra, args string) string {
		return deltaJSON(`{"tool_calls":[{"index":`+fmt.Sprint(index)+extra+`,"function":{`+args+`}}]}`, "")
	}
	r := scripted(t, "stream-tools",
		exchange{reply: replySSE(
			deltaJSON(`{"role":"assistant","content":null}`, ""),
			args(0, `,"id":"call_s1","type":"function"`, `"name":"math__add","arguments":""`),
			args(0, "", `"arguments":"{\"a\""`),
			args(0, "", `"arguments":": 2, "`),
			"pause",
			args(0, "", `"arguments":"\"b\": 3}"`),
			deltaJSON(`{}`, "tool_calls"),
			`[DONE]`,
		)},
		exchange{
			check: func(t *testing.T, r *http.Request, body map[string]any) {
				if field(body, "messages", 2, "tool_call_id") != "call_s1" || field(body, "messages", 2, "content") != "5" {
					t.Errorf("follow-up = %s", mustJSON(body["messages"]))
				}
			},
			reply: replySSE(deltaJSON(`{"content":"It is 5."}`, ""), deltaJSON(`{}`, "stop"), `[DONE]`),
		})
	var calls []addInput
	var partials []string
	var whole []*abi.ToolRequest
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("openai/stream-tools"),
		agent.WithPrompt("2+3?"), agent.WithTools(addTool(&calls))) {
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
				partials = append(partials, mustJSON(p.ToolRequest.Input))
			} else {
				whole = append(whole, p.ToolRequest)
			}
		}
	}
	if want := []string{"null", `{}`, `{"a":2}`, `{"a":2,"b":3}`}; !slices.Equal(partials, want) {
		t.Errorf("partial inputs = %q, want %q", partials, want)
	}
	if len(whole) != 1 || whole[0].Name != "math/add" || whole[0].Ref != "call_s1" || mustJSON(whole[0].Input) != `{"a":2,"b":3}` {
		t.Errorf("whole requests = %s", mustJSON(whole))
	}
	if len(calls) != 1 || calls[0] != (addInput{2, 3}) || final.Text() != "It is 5." {
		t.Errorf("tool calls %v, final %q", calls, final.Text())
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header []string
		body   string
		code   abi.ErrorCode
		retry  float64
		says   string
	}{
		{"401", 401, nil, `{"error": {"message": "Incorrect API key provided: sk-test.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}`,
			abi.CodePermissionDenied, 0, "Incorrect API key provided"},
		{"404 model", 404, nil, `{"error": {"message": "The model ` + "`MODEL`" + ` does not exist or you do not have access to it.", "type": "invalid_request_error", "param": null, "code": "model_not_found"}}`,
			abi.CodeNotFound, 0, `model "err-404" not found`},
		{"429", 429, []string{"Retry-After", "3"}, `{"error": {"message": "Rate limit reached for MODEL on requests per min (RPM): Limit 3, Used 3.", "type": "requests", "code": "rate_limit_exceeded"}}`,
			abi.CodeLimitExceeded, 3, "Rate limit reached"},
		{"400", 400, nil, `{"error": {"message": "Invalid type for 'temperature'", "type": "invalid_request_error", "param": "temperature", "code": "invalid_type"}}`,
			abi.CodeInvalidInput, 0, "Invalid type for 'temperature'"},
		{"500", 500, nil, `{"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}`,
			abi.CodeUnavailable, 0, "The server had an error"},
		{"503", 503, []string{"Retry-After", "1"}, `{"error": {"message": "The engine is currently overloaded, please try again later", "type": "server_error"}}`,
			abi.CodeUnavailable, 1, "overloaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := "err-" + fmt.Sprint(tc.status)
			r := scripted(t, model, exchange{reply: replyJSON(tc.status, strings.ReplaceAll(tc.body, "MODEL", model), tc.header...)})
			_, err := agent.Generate(context.Background(), r, agent.WithModelName("openai/"+model), agent.WithPrompt("hi"))
			var ce *host.CallError
			var ae *abi.Error
			if !errors.As(err, &ce) || ce.Plugin != "openai" || ce.Export != plugin.ExportGenerate || !errors.As(err, &ae) {
				t.Fatalf("err = %v", err)
			}
			if ae.Status != tc.status || ae.Code != tc.code || ae.RetryAfter != tc.retry || !strings.Contains(ae.Message, tc.says) {
				t.Errorf("error = %+v", ae)
			}
		})
	}
}

func TestRetryThenBackup(t *testing.T) {
	var primary, backup atomic.Int32
	r := sharedPlugin(t, func(w http.ResponseWriter, r *http.Request) {
		body := checkRequest(t, r)
		switch body["model"] {
		case "primary":
			switch primary.Add(1) {
			case 1:
				replyJSON(503, `{"error": {"message": "overloaded", "type": "server_error"}}`, "retry-after-ms", "20")(w)
			case 2:
				replyJSON(503, `{"error": {"message": "overloaded", "type": "server_error"}}`)(w)
			default:
				replyJSON(500, `{"error": {"message": "internal error", "type": "server_error"}}`)(w)
			}
		case "backup":
			backup.Add(1)
			replyJSON(200, completionJSON(`{"role": "assistant", "content": "from the backup"}`, "stop"))(w)
		}
	}, "primary", "backup")
	rel := agent.Reliability{Retries: 2, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Timeout: 10 * time.Second, Backups: []string{"openai/backup"}}
	start := time.Now()
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("openai/primary"), agent.WithPrompt("hi"),
		agent.WithMiddleware(agent.Reliable(r, rel)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "from the backup" || primary.Load() != 3 || backup.Load() != 1 {
		t.Errorf("text %q, primary attempts %d, backup attempts %d", resp.Text(), primary.Load(), backup.Load())
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("took %v: retry-after-ms not honoured", d)
	}
}

// TestTimeoutThenBackup: a server that never answers is abandoned at the attempt's
// timeout (the plugin's instance with it), retried, and the backup model answers.
func TestTimeoutThenBackup(t *testing.T) {
	var hung atomic.Int32
	r := sharedPlugin(t, func(w http.ResponseWriter, r *http.Request) {
		body := checkRequest(t, r)
		switch body["model"] {
		case "hangs":
			hung.Add(1)
			<-r.Context().Done() // until the client gives up
		case "answers":
			replyJSON(200, completionJSON(`{"role": "assistant", "content": "from the backup"}`, "stop"))(w)
		}
	}, "hangs", "answers")
	rel := agent.Reliability{Retries: 1, Backoff: time.Millisecond, Timeout: 300 * time.Millisecond, Backups: []string{"openai/answers"}}
	start := time.Now()
	resp, err := agent.Generate(context.Background(), r, agent.WithModelName("openai/hangs"), agent.WithPrompt("hi"),
		agent.WithMiddleware(agent.Reliable(r, rel)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "from the backup" || hung.Load() != 2 {
		t.Errorf("text %q after %d attempts on the hanging model", resp.Text(), hung.Load())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v: the attempts did not time out", d)
	}
}

func TestNoAPIKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := r.Header["Authorization"]; ok {
			t.Errorf("Authorization sent: %q", a)
		}
		replyJSON(200, completionJSON(`{"role": "assistant", "content": "local"}`, "stop"))(w)
	}))
	defer srv.Close()
	r, _ := loadPlugin(t, srv.URL+"/v1/", "llama3.2", func(m *host.Manifest) {
		m.Config["apiKeySecret"] = ""
		m.Secrets = nil
	})
	text, err := agent.GenerateText(context.Background(), r, agent.WithModelName("openai/llama3.2"), agent.WithPrompt("hi"))
	if err != nil || text != "local" {
		t.Errorf("text %q, err %v", text, err)
	}
}

// TestConformanceAgainstFake runs the conformance suite on the plugin talking to the
// fake server.
func TestConformanceAgainstFake(t *testing.T) {
	srv := newFakeOpenAI(t)
	conformancetest.Require(t, pluginWasm(t), conformance.Options{Manifest: host.Manifest{
		HTTP:    []string{provider.Host(srv.URL)},
		Config:  map[string]string{"baseURL": srv.URL + "/v1", "models": "fake-model"},
		Secrets: map[string]host.Secret{"OPENAI_API_KEY": {Value: "sk-test"}},
	}})
}
