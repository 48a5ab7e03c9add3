package main

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
	"reflect"
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

// testKey is the API key the tests' manifests grant.
const testKey = "test-key-123"

// loadGemini builds the plugin (once per test binary), loads it into a fresh host whose
// manifest grants 127.0.0.1, the API key and baseURL = base + "/v1beta", plus the
// given config, and returns the registry.
func loadGemini(t *testing.T, base string, config map[string]string) *agent.Registry {
	t.Helper()
	r := agent.NewRegistry()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := host.New(r, host.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	cfg := map[string]string{"baseURL": base + "/v1beta"}
	for k, v := range config {
		cfg[k] = v
	}
	_, err = h.LoadFile(t.Context(), pluginbuild.ForTest(t, "."), host.Manifest{
		HTTP:    []string{provider.Host(base)},
		Config:  cfg,
		Secrets: map[string]host.Secret{"GEMINI_API_KEY": {Value: testKey, Header: "x-goog-api-key"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// served is one request a test server received.
type served struct {
	Method, Path, Query, Key, ContentType string
	Body                                  map[string]any
}

// readRequest decodes what a test server received.
func readRequest(t *testing.T, r *http.Request) served {
	var body map[string]any
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Errorf("request body: %v: %s", err, b)
	}
	return served{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("x-goog-api-key"), r.Header.Get("Content-Type"), body}
}

// at walks a decoded JSON value: string steps index objects, int steps arrays.
func at(v any, path ...any) any {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[s]
		case int:
			a, _ := v.([]any)
			if s >= len(a) {
				return nil
			}
			v = a[s]
		}
	}
	return v
}

// wantJSON checks that v (a decoded value) equals the JSON text want.
func wantJSON(t *testing.T, what string, v any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	got, _ := json.Marshal(v)
	var g any
	json.Unmarshal(got, &g)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s\nwant %s", what, got, want)
	}
}

// checkHead checks the method, path, query and key of a request.
func checkHead(t *testing.T, s served, path, query string) {
	t.Helper()
	if s.Method != "POST" || s.Path != path || s.Query != query || s.Key != testKey || !strings.HasPrefix(s.ContentType, "application/json") {
		t.Errorf("request head = %s %s?%s key %q type %q, want POST %s?%s key %q", s.Method, s.Path, s.Query, s.Key, s.ContentType, path, query, testKey)
	}
}

// reply writes a JSON answer.
func reply(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	io.WriteString(w, body)
}

func TestDescribeModelsFromConfig(t *testing.T) {
	t.Parallel()
	r := loadGemini(t, "http://127.0.0.1:1", map[string]string{"models": "gemini-3-pro-preview, models/gemini-2.0-flash"})
	var keys []string
	for _, d := range r.Actions() {
		keys = append(keys, d.Key)
	}
	if want := []string{"/model/gemini/gemini-2.0-flash", "/model/gemini/gemini-3-pro-preview"}; !slices.Equal(keys, want) {
		t.Errorf("models = %v, want %v", keys, want)
	}
	m, err := r.LookupModel("gemini/gemini-3-pro-preview")
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "supports", m.Info().Supports,
		`{"multiturn":true,"media":true,"tools":true,"systemRole":true,"output":["text","json"],"constrained":"no-tools","toolChoice":true}`)

	// Without the models key granted, the defaults.
	r = loadGemini(t, "http://127.0.0.1:1", nil)
	keys = nil
	for _, d := range r.Actions() {
		keys = append(keys, d.Key)
	}
	if want := []string{"/model/gemini/gemini-2.5-flash", "/model/gemini/gemini-2.5-pro"}; !slices.Equal(keys, want) {
		t.Errorf("default models = %v, want %v", keys, want)
	}
}

func TestGenerateText(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := readRequest(t, r)
		checkHead(t, s, "/v1beta/models/gemini-2.5-flash:generateContent", "")
		wantJSON(t, "systemInstruction", s.Body["systemInstruction"], `{"parts":[{"text":"Answer in one word."}]}`)
		wantJSON(t, "contents", s.Body["contents"], `[{"role":"user","parts":[{"text":"Capital of France?"}]}]`)
		wantJSON(t, "generationConfig", s.Body["generationConfig"],
			`{"temperature":0.5,"maxOutputTokens":100,"topK":3,"topP":0.9,"candidateCount":1,"stopSequences":["END"],"thinkingConfig":{"thinkingBudget":0}}`)
		wantJSON(t, "safetySettings", s.Body["safetySettings"], `[{"category":"HARM_CATEGORY_HATE_SPEECH","threshold":"BLOCK_ONLY_HIGH"}]`)
		wantJSON(t, "cachedContent", s.Body["cachedContent"], `"cachedContents/abc"`)
		wantJSON(t, "tools", s.Body["tools"], `[{"googleSearch":{}}]`)
		if _, ok := s.Body["googleSearch"]; ok {
			t.Error("googleSearch was passed as a top-level key")
		}
		reply(w, `{
		  "candidates": [{
		    "content": {"parts": [{"text": "Paris."}], "role": "model"},
		    "finishReason": "STOP",
		    "index": 0,
		    "groundingMetadata": {"webSearchQueries": ["capital of France"], "groundingChunks": [{"web": {"uri": "https://example.com", "title": "example.com"}}]}
		  }],
		  "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 2, "totalTokenCount": 11, "cachedContentTokenCount": 4},
		  "modelVersion": "gemini-2.5-flash",
		  "responseId": "abc123"
		}`)
	}))
	defer srv.Close()
	r := loadGemini(t, srv.URL, nil)
	resp, err := agent.Generate(t.Context(), r,
		agent.WithModelName("gemini/gemini-2.5-flash"),
		agent.WithSystem("Answer in one word."),
		agent.WithPrompt("Capital of France?"),
		agent.WithConfig(map[string]any{
			"temperature": 0.5, "maxOutputTokens": 100, "topK": 3, "topP": 0.9, "candidateCount": 1, "stopSequences": []string{"END"},
			"thinkingConfig": map[string]any{"thinkingBudget": 0},
			"safetySettings": []any{map[string]any{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_ONLY_HIGH"}},
			"cachedContent":  "cachedContents/abc",
			"googleSearch":   map[string]any{},
		}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Paris." || resp.FinishReason != abi.FinishStop || resp.LatencyMs <= 0 {
		t.Errorf("response = %q %s latency %v", resp.Text(), resp.FinishReason, resp.LatencyMs)
	}
	wantJSON(t, "usage", resp.Usage, `{"inputTokens":9,"outputTokens":2,"totalTokens":11,"cachedContentTokens":4}`)
	wantJSON(t, "grounding", at(resp.Custom, "groundingMetadata", "webSearchQueries"), `["capital of France"]`)
	if at(resp.Custom, "modelVersion") != "gemini-2.5-flash" || at(resp.Custom, "responseId") != "abc123" {
		t.Errorf("custom = %v", resp.Custom)
	}
}

func TestGenerateMultiTurnWithMedia(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := readRequest(t, r)
		checkHead(t, s, "/v1beta/models/gemini-2.5-pro:generateContent", "")
		wantJSON(t, "systemInstruction", s.Body["systemInstruction"], `{"parts":[{"text":"You are terse."},{"text":"Never lie."}]}`)
		wantJSON(t, "contents", s.Body["contents"], `[
		  {"role":"user","parts":[{"text":"My name is Ada. Here is my cat:"},
		    {"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
		    {"fileData":{"fileUri":"https://example.com/cat.mp4","mimeType":"video/mp4"},"videoMetadata":{"startOffset":"1s"}}]},
		  {"role":"model","parts":[{"text":"Noting the name.","thought":true,"thoughtSignature":"c2ln"},{"text":"Hello Ada, nice cat."}]},
		  {"role":"user","parts":[{"text":"What is my name?"}]}]`)
		reply(w, `{"candidates":[{"content":{"parts":[{"text":"Ada."}],"role":"model"},"finishReason":"STOP","index":0}]}`)
	}))
	defer srv.Close()
	r := loadGemini(t, srv.URL, nil)
	video := abi.NewMediaPart("video/mp4", "https://example.com/cat.mp4")
	video.Metadata = map[string]any{"videoMetadata": map[string]any{"startOffset": "1s"}}
	thought := abi.NewReasoningPart("Noting the name.")
	thought.Metadata = map[string]any{"thoughtSignature": "c2ln"}
	resp, err := agent.Generate(t.Context(), r,
		agent.WithModelName("gemini/gemini-2.5-pro"),
		agent.WithSystem("You are terse."),
		agent.WithMessages(
			abi.NewUserMessage(abi.NewTextPart("My name is Ada. Here is my cat:"), abi.NewMediaPart("image/png", "data:image/png;base64,iVBORw0KGgo="), video),
			abi.NewModelMessage(thought, abi.NewTextPart("Hello Ada, nice cat.")),
			abi.NewSystemTextMessage("Never lie."),
		),
		agent.WithPrompt("What is my name?"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Ada." {
		t.Errorf("text = %q", resp.Text())
	}
}

// WeatherIn is the input of the weather tool of the tests.
type WeatherIn struct {
	City string `json:"city"`
	Days int    `json:"days,omitempty"`
}

func TestGenerateWithTools(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := readRequest(t, r)
		checkHead(t, s, "/v1beta/models/gemini-2.5-flash:generateContent", "")
		decl := at(s.Body, "tools", 0, "functionDeclarations", 0)
		if at(decl, "name") != "weather__now" || at(decl, "description") != "Current weather in a city." ||
			at(decl, "parametersJsonSchema", "properties", "city", "type") != "string" {
			t.Errorf("declaration = %v", decl)
		}
		wantJSON(t, "toolConfig", s.Body["toolConfig"], `{"functionCallingConfig":{"mode":"AUTO"}}`)
		switch calls.Add(1) {
		case 1:
			wantJSON(t, "contents", s.Body["contents"], `[{"role":"user","parts":[{"text":"Weather in Paris?"}]}]`)
			reply(w, `{"candidates":[{"content":{"parts":[
			  {"text":"Let me check."},
			  {"functionCall":{"name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2lnLTE="}],"role":"model"},
			  "finishReason":"STOP","index":0}]}`)
		case 2:
			// The call goes back with its signature and without a made-up id; the
			// response answers it by name.
			wantJSON(t, "contents", s.Body["contents"], `[
			  {"role":"user","parts":[{"text":"Weather in Paris?"}]},
			  {"role":"model","parts":[{"text":"Let me check."},{"functionCall":{"name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2lnLTE="}]},
			  {"role":"user","parts":[{"functionResponse":{"name":"weather__now","response":{"celsius":21,"sky":"sunny"}}}]}]`)
			reply(w, `{"candidates":[{"content":{"parts":[{"text":"21°C and sunny."}],"role":"model"},"finishReason":"STOP","index":0}]}`)
		default:
			t.Error("too many requests")
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	r := loadGemini(t, srv.URL, nil)
	var got []WeatherIn
	weather := agent.NewTool("weather/now", "Current weather in a city.", func(_ context.Context, in WeatherIn) (map[string]any, error) {
		got = append(got, in)
		return map[string]any{"celsius": 21, "sky": "sunny"}, nil
	})
	resp, err := agent.Generate(t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"),
		agent.WithPrompt("Weather in Paris?"), agent.WithTools(weather), agent.WithToolChoice(abi.ToolChoiceAuto))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "21°C and sunny." || !slices.Equal(got, []WeatherIn{{City: "Paris"}}) {
		t.Errorf("text %q, tool inputs %v", resp.Text(), got)
	}
	tr := resp.Request.Messages[1].ToolRequests()
	if len(tr) != 1 || tr[0].Name != "weather/now" || tr[0].Ref != "weather/now-0" {
		t.Errorf("tool request = %+v", tr)
	}
}

func TestGenerateWithParallelToolCallsWithIDs(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := readRequest(t, r)
		if calls.Add(1) == 1 {
			wantJSON(t, "toolConfig", s.Body["toolConfig"], `{"functionCallingConfig":{"mode":"ANY"}}`)
			reply(w, `{"candidates":[{"content":{"parts":[
			  {"functionCall":{"id":"fc-1","name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},
			  {"functionCall":{"id":"fc-2","name":"clock.utc","args":{}}}],"role":"model"},"finishReason":"STOP","index":0}]}`)
			return
		}
		wantJSON(t, "contents[1:]", at(s.Body, "contents").([]any)[1:], `[
		  {"role":"model","parts":[{"functionCall":{"id":"fc-1","name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},
		    {"functionCall":{"id":"fc-2","name":"clock.utc","args":{}}}]},
		  {"role":"user","parts":[{"functionResponse":{"id":"fc-1","name":"weather__now","response":{"output":"sunny"}}},
		    {"functionResponse":{"id":"fc-2","name":"clock.utc","response":{"output":"12:00"}}}]}]`)
		reply(w, `{"candidates":[{"content":{"parts":[{"text":"Sunny at noon."}],"role":"model"},"finishReason":"STOP","index":0}]}`)
	}))
	defer srv.Close()
	r := loadGemini(t, srv.URL, nil)
	weather := agent.NewTool("weather/now", "Weather.", func(_ context.Context, in WeatherIn) (string, error) { return "sunny", nil })
	clock := agent.NewTool("clock.utc", "Time.", func(context.Context, struct{}) (string, error) { return "12:00", nil })
	// Forcing a tool (ANY) on every turn would loop with a real model; one turn of tools
	// is what this test replays.
	resp, err := agent.Generate(t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"),
		agent.WithPrompt("Weather and time?"), agent.WithTools(weather, clock), agent.WithToolChoice(abi.ToolChoiceRequired))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Sunny at noon." || calls.Load() != 2 {
		t.Errorf("text %q after %d requests", resp.Text(), calls.Load())
	}
}

// Weather is the structured output of the JSON test.
type Weather struct {
	City    string  `json:"city"`
	Celsius float64 `json:"celsius"`
}

func TestGenerateJSONOutput(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := readRequest(t, r)
		gen := s.Body["generationConfig"]
		if at(gen, "responseMimeType") != "application/json" || at(gen, "responseJsonSchema", "type") != "object" ||
			at(gen, "responseJsonSchema", "properties", "celsius", "type") != "number" {
			t.Errorf("generationConfig = %v", gen)
		}
		// Constrained natively: no format instructions in the prompt.
		wantJSON(t, "contents", s.Body["contents"], `[{"role":"user","parts":[{"text":"Weather in Oslo?"}]}]`)
		reply(w, `{"candidates":[{"content":{"parts":[{"text":"{\"city\": \"Oslo\", \"celsius\": -3.5}"}],"role":"model"},"finishReason":"STOP","index":0}]}`)
	}))
	defer srv.Close()
	r := loadGemini(t, srv.URL, nil)
	out, _, err := agent.GenerateData[Weather](t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"), agent.WithPrompt("Weather in Oslo?"))
	if err != nil {
		t.Fatal(err)
	}
	if *out != (Weather{City: "Oslo", Celsius: -3.5}) {
		t.Errorf("output = %+v", *out)
	}
}

// writeEvent writes one server-sent event in Gemini's framing and flushes it.
func writeEvent(w http.ResponseWriter, data string) {
	fmt.Fprintf(w, "data: %s\r\n\r\n", strings.Join(strings.Fields(data), " "))
	w.(http.Flusher).Flush()
}

func TestGenerateStreamArrivesAsItComes(t *testing.T) {
	t.Parallel()
	// The server pauses mid-stream until the caller has the first chunk (at most 5 s):
	// a plugin that buffered the stream would deliver nothing before the pause ends.
	const maxPause = 5 * time.Second
	firstSeen := make(chan struct{})
	var mu sync.Mutex
	var resumed time.Time // when the server went on after its pause
	var waited bool       // whether the pause ended by the first chunk's arrival
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := readRequest(t, r)
		checkHead(t, s, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse")
		wantJSON(t, "contents", s.Body["contents"], `[{"role":"user","parts":[{"text":"Say hello"}]}]`)
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvent(w, `{"candidates":[{"content":{"parts":[{"text":"The user wants a greeting.","thought":true}],"role":"model"},"index":0}]}`)
		writeEvent(w, `{"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}]}`)
		pause := time.NewTimer(maxPause)
		defer pause.Stop()
		select {
		case <-firstSeen:
			time.Sleep(50 * time.Millisecond) // and a little more, for the end to lag
			mu.Lock()
			waited = true
			mu.Unlock()
		case <-pause.C:
		}
		mu.Lock()
		resumed = time.Now()
		mu.Unlock()
		writeEvent(w, `{"candidates":[{"content":{"parts":[{"text":", world"}],"role":"model"},"index":0}]}`)
		writeEvent(w, `{"candidates":[{"content":{"parts":[{"text":"!","thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP","index":0}],
		  "usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4,"totalTokenCount":17,"thoughtsTokenCount":10},"modelVersion":"gemini-2.5-flash"}`)
	}))
	defer srv.Close()
	r := loadGemini(t, srv.URL, nil)
	var firstAt time.Time
	var chunks []string
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"), agent.WithPrompt("Say hello")) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
			continue
		}
		if firstAt.IsZero() {
			firstAt = time.Now()
			close(firstSeen)
		}
		b, _ := json.Marshal(v.Chunk.Content)
		chunks = append(chunks, string(b))
	}
	mu.Lock()
	defer mu.Unlock()
	if !waited || firstAt.IsZero() || !firstAt.Before(resumed) {
		t.Errorf("the first chunk arrived at %v, not during the server's pause (which ended at %v)", firstAt, resumed)
	}
	want := []string{
		`[{"reasoning":"The user wants a greeting."}]`,
		`[{"text":"Hello"}]`,
		`[{"text":", world"}]`,
		`[{"text":"!","metadata":{"thoughtSignature":"c2ln"}}]`,
	}
	if !slices.Equal(chunks, want) {
		t.Errorf("chunks =\n%s\nwant\n%s", strings.Join(chunks, "\n"), strings.Join(want, "\n"))
	}
	if final == nil || final.Text() != "Hello, world!" || final.Reasoning() != "The user wants a greeting." || final.FinishReason != abi.FinishStop {
		t.Fatalf("final = %+v", final)
	}
	wantJSON(t, "usage", final.Usage, `{"inputTokens":3,"outputTokens":4,"totalTokens":17,"thoughtsTokens":10}`)
}

func TestGenerateStreamPartialToolCall(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := readRequest(t, r)
		checkHead(t, s, "/v1beta/models/gemini-3-pro-preview:streamGenerateContent", "alt=sse")
		wantJSON(t, "toolConfig", s.Body["toolConfig"], `{"functionCallingConfig":{"mode":"AUTO","streamFunctionCallArguments":true}}`)
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvent(w, `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"weather__now","willContinue":true},"thoughtSignature":"c2ln"}],"role":"model"},"index":0}]}`)
		writeEvent(w, `{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.city","stringValue":"Par","willContinue":true}],"willContinue":true}}],"role":"model"},"index":0}]}`)
		writeEvent(w, `{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.city","stringValue":"is"},{"jsonPath":"$.days","numberValue":3}],"willContinue":true}}],"role":"model"},"index":0}]}`)
		writeEvent(w, `{"candidates":[{"content":{"parts":[{"functionCall":{}}],"role":"model"},"finishReason":"STOP","index":0}]}`)
	}))
	defer srv.Close()
	r := loadGemini(t, srv.URL, map[string]string{"models": "gemini-3-pro-preview"})
	weather := agent.NewTool("weather/now", "Weather.", func(_ context.Context, in WeatherIn) (string, error) { return "sunny", nil })
	var inputs []string
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(t.Context(), r, agent.WithModelName("gemini/gemini-3-pro-preview"),
		agent.WithPrompt("Weather in Paris for 3 days?"), agent.WithTools(weather), agent.WithToolChoice(abi.ToolChoiceAuto),
		agent.WithConfig(map[string]any{"functionCallingConfig": map[string]any{"streamFunctionCallArguments": true}}),
		agent.WithReturnToolRequests(true)) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
			continue
		}
		for _, p := range v.Chunk.Content {
			b, _ := json.Marshal(p.ToolRequest)
			inputs = append(inputs, string(b))
		}
	}
	want := []string{
		`{"ref":"weather/now-0","name":"weather/now","input":{},"partial":true}`,
		`{"ref":"weather/now-0","name":"weather/now","input":{"city":"Par"},"partial":true}`,
		`{"ref":"weather/now-0","name":"weather/now","input":{"city":"Paris","days":3},"partial":true}`,
		`{"ref":"weather/now-0","name":"weather/now","input":{"city":"Paris","days":3}}`,
	}
	if !slices.Equal(inputs, want) {
		t.Errorf("streamed tool requests =\n%s\nwant\n%s", strings.Join(inputs, "\n"), strings.Join(want, "\n"))
	}
	if final == nil {
		t.Fatal("no final response")
	}
	wantJSON(t, "final", final.Message, `{"role":"model","content":[{"toolRequest":{"ref":"weather/now-0","name":"weather/now","input":{"city":"Paris","days":3}},
	  "metadata":{"syntheticRef":true,"thoughtSignature":"c2ln"}}]}`)
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	type answer struct {
		status int
		header map[string]string
		body   string
	}
	answers := map[string]answer{
		"bad-request":  {400, nil, `{"error":{"code":400,"message":"Invalid value at 'generation_config.temperature'","status":"INVALID_ARGUMENT"}}`},
		"unauthorized": {401, nil, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`},
		"forbidden":    {403, nil, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}`},
		"gemini-9":     {404, nil, `{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}`},
		"quota": {429, nil, `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[
		  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},
		  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"15s"}]}}`},
		"quota-header": {429, map[string]string{"Retry-After": "7"}, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`},
		"internal":     {500, nil, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`},
		"overloaded":   {503, nil, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		model, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":")
		if model == "midstream" {
			w.Header().Set("Content-Type", "text/event-stream")
			writeEvent(w, `{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}]}`)
			writeEvent(w, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`)
			return
		}
		a := answers[model]
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	defer srv.Close()
	models := []string{"midstream"}
	for m := range answers {
		models = append(models, m)
	}
	r := loadGemini(t, srv.URL, map[string]string{"models": strings.Join(models, ",")})

	check := func(t *testing.T, err error, want abi.Error) {
		t.Helper()
		var ce *host.CallError
		var ae *abi.Error
		if !errors.As(err, &ce) || ce.Plugin != "gemini" || ce.Export != plugin.ExportGenerate || !errors.As(err, &ae) {
			t.Fatalf("error = %v (%T)", err, err)
		}
		if *ae != want {
			t.Errorf("error = %+v, want %+v", *ae, want)
		}
	}
	for _, tc := range []struct {
		model string
		want  abi.Error
	}{
		{"bad-request", abi.Error{Code: abi.CodeInvalidInput, Status: 400, Message: "gemini: Invalid value at 'generation_config.temperature'"}},
		{"unauthorized", abi.Error{Code: abi.CodePermissionDenied, Status: 401, Message: "gemini: Request had invalid authentication credentials."}},
		{"forbidden", abi.Error{Code: abi.CodePermissionDenied, Status: 403, Message: "gemini: Method doesn't allow unregistered callers."}},
		{"gemini-9", abi.Error{Code: abi.CodeNotFound, Status: 404, Message: "gemini: models/gemini-9 is not found for API version v1beta, or is not supported for generateContent."}},
		{"quota", abi.Error{Code: abi.CodeLimitExceeded, Status: 429, Message: "gemini: You exceeded your current quota.", RetryAfter: 15}},
		{"quota-header", abi.Error{Code: abi.CodeLimitExceeded, Status: 429, Message: "gemini: Resource has been exhausted (e.g. check quota).", RetryAfter: 7}},
		{"internal", abi.Error{Code: abi.CodeUnavailable, Status: 500, Message: "gemini: An internal error has occurred."}},
		{"overloaded", abi.Error{Code: abi.CodeUnavailable, Status: 503, Message: "gemini: The model is overloaded. Please try again later."}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			_, err := agent.Generate(t.Context(), r, agent.WithModelName("gemini/"+tc.model), agent.WithPrompt("hi"))
			check(t, err, tc.want)
			// Streaming requests fail the same way, before any chunk.
			for v, err := range agent.GenerateStream(t.Context(), r, agent.WithModelName("gemini/"+tc.model), agent.WithPrompt("hi")) {
				if err == nil {
					t.Fatalf("streamed %+v", v)
				}
				check(t, err, tc.want)
			}
		})
	}
	t.Run("error event mid-stream", func(t *testing.T) {
		var got []string
		var last error
		for v, err := range agent.GenerateStream(t.Context(), r, agent.WithModelName("gemini/midstream"), agent.WithPrompt("hi")) {
			if err != nil {
				last = err
				continue
			}
			got = append(got, v.Chunk.Text())
		}
		if !slices.Equal(got, []string{"Hel"}) {
			t.Errorf("chunks = %q", got)
		}
		check(t, last, abi.Error{Code: abi.CodeUnavailable, Status: 503, Message: "gemini: The model is overloaded."})
	})
	t.Run("unreachable", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		r := loadGemini(t, dead.URL, nil)
		_, err := agent.Generate(t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"), agent.WithPrompt("hi"))
		var ae *abi.Error
		if !errors.As(err, &ae) || ae.Code != abi.CodeUnavailable || ae.Status != 0 || !agent.Transient(err) {
			t.Errorf("error = %v", err)
		}
	})
}

func TestReliableRetriesThenFallsBack(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		model, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":")
		mu.Lock()
		hits[model]++
		n := hits[model]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		switch {
		case model == "gemini-2.5-pro":
			w.WriteHeader(503)
			io.WriteString(w, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`)
		case model == "gemini-2.0-flash" && n == 1:
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.2s"}]}}`)
		default:
			io.WriteString(w, `{"candidates":[{"content":{"parts":[{"text":"from `+model+`"}],"role":"model"},"finishReason":"STOP","index":0}]}`)
		}
	}))
	defer srv.Close()
	r := loadGemini(t, srv.URL, map[string]string{"models": "gemini-2.5-pro,gemini-2.5-flash,gemini-2.0-flash"})

	rel := agent.Reliability{Retries: 2, Backoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Backups: []string{"gemini/gemini-2.5-flash"}}
	resp, err := agent.Generate(t.Context(), r, agent.WithModelName("gemini/gemini-2.5-pro"), agent.WithPrompt("hi"),
		agent.WithMiddleware(agent.Reliable(r, rel)))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if resp.Text() != "from gemini-2.5-flash" || hits["gemini-2.5-pro"] != 3 || hits["gemini-2.5-flash"] != 1 {
		t.Errorf("text %q, hits %v", resp.Text(), hits)
	}
	mu.Unlock()

	// A 429's retryDelay is honoured on the same model.
	start := time.Now()
	resp, err = agent.Generate(t.Context(), r, agent.WithModelName("gemini/gemini-2.0-flash"), agent.WithPrompt("hi"),
		agent.WithMiddleware(agent.Reliable(r, rel)))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); resp.Text() != "from gemini-2.0-flash" || took < 200*time.Millisecond {
		t.Errorf("text %q after %v", resp.Text(), took)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["gemini-2.0-flash"] != 2 || hits["gemini-2.5-flash"] != 1 {
		t.Errorf("hits = %v", hits)
	}
}

func TestAPIKeySecretFromConfig(t *testing.T) {
	t.Parallel()
	var key atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key.Store(strings.Join(r.Header.Values("x-goog-api-key"), ","))
		reply(w, `{"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP","index":0}]}`)
	}))
	defer srv.Close()
	// The secret apiKeySecret names is asked for and sent; an empty apiKeySecret sends
	// no key and asks for no secret.
	for _, tc := range []struct{ secret, key, capabilities string }{
		{"TEAM_GEMINI_KEY", "team-key", `{"http":["` + provider.Host(srv.URL) + `"],"config":["baseURL","models","apiKeySecret"],"secrets":["TEAM_GEMINI_KEY"]}`},
		{"", "", `{"http":["` + provider.Host(srv.URL) + `"],"config":["baseURL","models","apiKeySecret"]}`},
	} {
		r := agent.NewRegistry()
		h, err := host.New(r, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(context.Background())
		p, err := h.LoadFile(t.Context(), pluginbuild.ForTest(t, "."), host.Manifest{
			HTTP:    []string{provider.Host(srv.URL)},
			Config:  map[string]string{"baseURL": srv.URL + "/v1beta", "apiKeySecret": tc.secret},
			Secrets: map[string]host.Secret{"TEAM_GEMINI_KEY": {Value: "team-key", Header: "x-goog-api-key"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		wantJSON(t, "capabilities", p.Descriptor().Capabilities, tc.capabilities)
		if _, err := agent.Generate(t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"), agent.WithPrompt("hi")); err != nil {
			t.Fatal(err)
		}
		if got, _ := key.Load().(string); got != tc.key {
			t.Errorf("apiKeySecret %q: key = %q, want %q", tc.secret, got, tc.key)
		}
	}
}

func TestFakeGemini(t *testing.T) {
	t.Parallel()
	srv := newFakeGemini(t)
	r := loadGemini(t, srv.URL, nil)
	ctx := t.Context()
	model := agent.WithModelName("gemini/gemini-2.5-flash")

	text, err := agent.GenerateText(ctx, r, model, agent.WithSystem("Be nice."), agent.WithPrompt("hello fake world"))
	if err != nil || text != "echo: hello fake world" {
		t.Errorf("echo = %q, %v", text, err)
	}

	var got []WeatherIn
	weather := agent.NewTool("weather/now", "Weather.", func(_ context.Context, in WeatherIn) (map[string]any, error) {
		got = append(got, in)
		return map[string]any{"sky": "sunny"}, nil
	})
	resp, err := agent.Generate(ctx, r, model, agent.WithPrompt(`please use weather/now {"city":"Lima"}`), agent.WithTools(weather))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != `Tool results: weather__now returned {"sky":"sunny"}` || !slices.Equal(got, []WeatherIn{{City: "Lima"}}) {
		t.Errorf("tools: %q, inputs %v", resp.Text(), got)
	}
	// Without arguments in the text, the args are an instance of the schema.
	got = nil
	if _, err := agent.Generate(ctx, r, model, agent.WithPrompt("use weather__now"), agent.WithTools(weather)); err != nil || len(got) != 1 || got[0].City == "" {
		t.Errorf("schema args: %v, %v", got, err)
	}

	out, _, err := agent.GenerateData[Weather](ctx, r, model, agent.WithPrompt("Oslo"))
	if err != nil || out.City != "Oslo" || out.Celsius != 1 {
		t.Errorf("json = %+v, %v", out, err)
	}

	var chunks []string
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(ctx, r, model, agent.WithPrompt("one two three"),
		agent.WithConfig(map[string]any{"thinkingConfig": map[string]any{"includeThoughts": true}})) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
		} else {
			chunks = append(chunks, v.Chunk.Text()+v.Chunk.Reasoning())
		}
	}
	if want := []string{"Thinking about: one two three", "echo: ", "one ", "two ", "three"}; !slices.Equal(chunks, want) {
		t.Errorf("chunks = %q, want %q", chunks, want)
	}
	if final.Text() != "echo: one two three" || final.Reasoning() != "Thinking about: one two three" || final.Usage.OutputTokens != 4 || final.FinishReason != abi.FinishStop {
		t.Errorf("final = %+v", final)
	}

	resp, err = agent.Generate(ctx, r, model, agent.WithPrompt("a b c d e"), agent.WithConfig(map[string]any{"maxOutputTokens": 2}))
	if err != nil || resp.Text() != "echo: a " || resp.FinishReason != abi.FinishLength {
		t.Errorf("max tokens: %q %s %v", resp.Text(), resp.FinishReason, err)
	}

	// Without the key the fake refuses, as Gemini does.
	req, _ := http.NewRequest("POST", srv.URL+"/v1beta/models/gemini-2.5-flash:generateContent", strings.NewReader(`{"contents":[]}`))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Errorf("without a key: %d", res.StatusCode)
	}
}

// TestConformanceAgainstFake runs the plugin conformance suite on the plugin talking to
// the fake server: every model check its supports claims must pass.
func TestConformanceAgainstFake(t *testing.T) {
	t.Parallel()
	srv := newFakeGemini(t)
	wasm, err := os.ReadFile(pluginbuild.ForTest(t, "."))
	if err != nil {
		t.Fatal(err)
	}
	conformancetest.Require(t, wasm, conformance.Options{Manifest: host.Manifest{
		HTTP:    []string{provider.Host(srv.URL)},
		Config:  map[string]string{"baseURL": srv.URL + "/v1beta", "models": "gemini-2.5-flash"},
		Secrets: map[string]host.Secret{"GEMINI_API_KEY": {Value: testKey, Header: "x-goog-api-key"}},
	}})
}
