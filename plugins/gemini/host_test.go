package main

// Host-level tests: the plugin is built to WebAssembly, loaded into a host and driven
// through the agent against loopback servers: providertest's fake server for the cases
// every provider shares, servers replaying the Gemini API's wire format for the rest.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/sdk/provider/providertest"
)

var gemini = &providertest.Provider{
	Name:          "gemini",
	Dir:           ".",
	BasePath:      "/v1beta",
	KeySecret:     "GEMINI_API_KEY",
	KeyHeader:     "x-goog-api-key",
	DefaultModels: defaults.Models,
	DefaultHost:   "generativelanguage.googleapis.com",
	Supports: abi.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, Media: true, ToolChoice: true,
		Output: []string{"text", "json"}, Constrained: abi.ConstrainedNoTools},
	Reasoning: map[string]any{"thinkingConfig": map[string]any{"includeThoughts": true}},
	Codec:     codec{},
	// The tool's output and text in the function's response, the image in its parts
	// (Gemini 3's multimodal function responses).
	ToolContent: func(t *testing.T, body map[string]any) {
		contents, _ := body["contents"].([]any)
		_, data, _ := strings.Cut(providertest.TinyPNG, ",")
		providertest.JSONEq(t, "the content after the call", contents[len(contents)-1], `{"role":"user","parts":[
			{"functionResponse":{"name":"picture","response":{"output":"drawn","content":"A red square."},
				"parts":[{"inlineData":{"mimeType":"image/png","data":"`+data+`"}}]}}]}`)
	},
}

func TestProvider(t *testing.T) { providertest.Run(t, gemini) }

// TestModelResourceNames checks that a model named by its resource name ("models/...")
// is served under its short name.
func TestModelResourceNames(t *testing.T) {
	t.Parallel()
	_, pl := gemini.Load(t, "http://127.0.0.1:1", map[string]string{"models": "gemini-3-pro-preview, models/gemini-2.0-flash"})
	if got, want := pl.Keys(), []string{"/model/gemini/gemini-2.0-flash", "/model/gemini/gemini-3-pro-preview"}; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("models = %v, want %v", got, want)
	}
}

// checkPath checks that a request calls the API's method on model.
func checkPath(t *testing.T, r *http.Request, model, method string) {
	t.Helper()
	if want := "/v1beta/models/" + model + ":" + method; r.URL.Path != want {
		t.Errorf("request to %s, want %s", r.URL.Path, want)
	}
}

// events frames the JSON of GenerateContentResponses as Gemini's server-sent events.
func events(data ...string) func(http.ResponseWriter) {
	for i, d := range data {
		data[i] = "data: " + strings.Join(strings.Fields(d), " ") + "\r\n\r\n"
	}
	return providertest.ReplyEvents(data...)
}

func TestGenerateText(t *testing.T) {
	t.Parallel()
	srv := gemini.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			checkPath(t, r, "gemini-2.5-flash", "generateContent")
			providertest.JSONEq(t, "systemInstruction", body["systemInstruction"], `{"parts":[{"text":"Answer in one word."}]}`)
			providertest.JSONEq(t, "contents", body["contents"], `[{"role":"user","parts":[{"text":"Capital of France?"}]}]`)
			providertest.JSONEq(t, "generationConfig", body["generationConfig"],
				`{"temperature":0.5,"maxOutputTokens":100,"topK":3,"topP":0.9,"candidateCount":1,"stopSequences":["END"],"thinkingConfig":{"thinkingBudget":0}}`)
			providertest.JSONEq(t, "safetySettings", body["safetySettings"], `[{"category":"HARM_CATEGORY_HATE_SPEECH","threshold":"BLOCK_ONLY_HIGH"}]`)
			providertest.JSONEq(t, "cachedContent", body["cachedContent"], `"cachedContents/abc"`)
			providertest.JSONEq(t, "tools", body["tools"], `[{"googleSearch":{}}]`)
			if _, ok := body["googleSearch"]; ok {
				t.Error("googleSearch was passed as a top-level key")
			}
		},
		Reply: providertest.ReplyJSON(200, `{
		  "candidates": [{
		    "content": {"parts": [{"text": "Paris."}], "role": "model"},
		    "finishReason": "STOP",
		    "index": 0,
		    "groundingMetadata": {"webSearchQueries": ["capital of France"], "groundingChunks": [{"web": {"uri": "https://example.com", "title": "example.com"}}]}
		  }],
		  "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 2, "totalTokenCount": 11, "cachedContentTokenCount": 4},
		  "modelVersion": "gemini-2.5-flash",
		  "responseId": "abc123"
		}`),
	})
	r, _ := gemini.Load(t, srv.URL, nil)
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
	providertest.JSONEq(t, "usage", resp.Usage, `{"inputTokens":9,"outputTokens":2,"totalTokens":11,"cachedContentTokens":4}`)
	providertest.JSONEq(t, "grounding", providertest.Field(resp.Custom, "groundingMetadata", "webSearchQueries"), `["capital of France"]`)
	if providertest.Field(resp.Custom, "modelVersion") != "gemini-2.5-flash" || providertest.Field(resp.Custom, "responseId") != "abc123" {
		t.Errorf("custom = %v", resp.Custom)
	}
}

func TestGenerateMultiTurnWithMedia(t *testing.T) {
	t.Parallel()
	srv := gemini.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			checkPath(t, r, "gemini-2.5-pro", "generateContent")
			providertest.JSONEq(t, "systemInstruction", body["systemInstruction"], `{"parts":[{"text":"You are terse."},{"text":"Never lie."}]}`)
			providertest.JSONEq(t, "contents", body["contents"], `[
			  {"role":"user","parts":[{"text":"My name is Ada. Here is my cat:"},
			    {"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
			    {"fileData":{"fileUri":"https://example.com/cat.mp4","mimeType":"video/mp4"},"videoMetadata":{"startOffset":"1s"}}]},
			  {"role":"model","parts":[{"text":"Noting the name.","thought":true,"thoughtSignature":"c2ln"},{"text":"Hello Ada, nice cat."}]},
			  {"role":"user","parts":[{"text":"What is my name?"}]}]`)
		},
		Reply: providertest.ReplyJSON(200, `{"candidates":[{"content":{"parts":[{"text":"Ada."}],"role":"model"},"finishReason":"STOP","index":0}]}`),
	})
	r, _ := gemini.Load(t, srv.URL, nil)
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
	checkTools := func(t *testing.T, r *http.Request, body map[string]any) {
		t.Helper()
		checkPath(t, r, "gemini-2.5-flash", "generateContent")
		decl := providertest.Field(body, "tools", 0, "functionDeclarations", 0)
		if providertest.Field(decl, "name") != "weather__now" || providertest.Field(decl, "description") != "Current weather in a city." ||
			providertest.Field(decl, "parametersJsonSchema", "properties", "city", "type") != "string" {
			t.Errorf("declaration = %v", decl)
		}
		providertest.JSONEq(t, "toolConfig", body["toolConfig"], `{"functionCallingConfig":{"mode":"AUTO"}}`)
	}
	srv := gemini.Script(t,
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				checkTools(t, r, body)
				providertest.JSONEq(t, "contents", body["contents"], `[{"role":"user","parts":[{"text":"Weather in Paris?"}]}]`)
			},
			Reply: providertest.ReplyJSON(200, `{"candidates":[{"content":{"parts":[
			  {"text":"Let me check."},
			  {"functionCall":{"name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2lnLTE="}],"role":"model"},
			  "finishReason":"STOP","index":0}]}`),
		},
		providertest.Exchange{
			// The call goes back with its signature and without a made-up id; the
			// response answers it by name.
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				checkTools(t, r, body)
				providertest.JSONEq(t, "contents", body["contents"], `[
				  {"role":"user","parts":[{"text":"Weather in Paris?"}]},
				  {"role":"model","parts":[{"text":"Let me check."},{"functionCall":{"name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2lnLTE="}]},
				  {"role":"user","parts":[{"functionResponse":{"name":"weather__now","response":{"celsius":21,"sky":"sunny"}}}]}]`)
			},
			Reply: providertest.ReplyJSON(200, `{"candidates":[{"content":{"parts":[{"text":"21°C and sunny."}],"role":"model"},"finishReason":"STOP","index":0}]}`),
		})
	r, _ := gemini.Load(t, srv.URL, nil)
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
	srv := gemini.Script(t,
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				providertest.JSONEq(t, "toolConfig", body["toolConfig"], `{"functionCallingConfig":{"mode":"ANY"}}`)
			},
			Reply: providertest.ReplyJSON(200, `{"candidates":[{"content":{"parts":[
			  {"functionCall":{"id":"fc-1","name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},
			  {"functionCall":{"id":"fc-2","name":"clock.utc","args":{}}}],"role":"model"},"finishReason":"STOP","index":0}]}`),
		},
		providertest.Exchange{
			Check: func(t *testing.T, r *http.Request, body map[string]any) {
				contents, _ := body["contents"].([]any)
				providertest.JSONEq(t, "contents[1:]", contents[1:], `[
				  {"role":"model","parts":[{"functionCall":{"id":"fc-1","name":"weather__now","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},
				    {"functionCall":{"id":"fc-2","name":"clock.utc","args":{}}}]},
				  {"role":"user","parts":[{"functionResponse":{"id":"fc-1","name":"weather__now","response":{"output":"sunny"}}},
				    {"functionResponse":{"id":"fc-2","name":"clock.utc","response":{"output":"12:00"}}}]}]`)
			},
			Reply: providertest.ReplyJSON(200, `{"candidates":[{"content":{"parts":[{"text":"Sunny at noon."}],"role":"model"},"finishReason":"STOP","index":0}]}`),
		})
	r, _ := gemini.Load(t, srv.URL, nil)
	weather := agent.NewTool("weather/now", "Weather.", func(_ context.Context, in WeatherIn) (string, error) { return "sunny", nil })
	clock := agent.NewTool("clock.utc", "Time.", func(context.Context, struct{}) (string, error) { return "12:00", nil })
	// Forcing a tool (ANY) on every turn would loop with a real model; one turn of tools
	// is what this test replays.
	resp, err := agent.Generate(t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"),
		agent.WithPrompt("Weather and time?"), agent.WithTools(weather, clock), agent.WithToolChoice(abi.ToolChoiceRequired))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Sunny at noon." {
		t.Errorf("text %q", resp.Text())
	}
}

// Weather is the structured output of the JSON test.
type Weather struct {
	City    string  `json:"city"`
	Celsius float64 `json:"celsius"`
}

func TestGenerateJSONOutput(t *testing.T) {
	t.Parallel()
	srv := gemini.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			gen := body["generationConfig"]
			if providertest.Field(gen, "responseMimeType") != "application/json" || providertest.Field(gen, "responseJsonSchema", "type") != "object" ||
				providertest.Field(gen, "responseJsonSchema", "properties", "celsius", "type") != "number" {
				t.Errorf("generationConfig = %v", gen)
			}
			// Constrained natively: no format instructions in the prompt.
			providertest.JSONEq(t, "contents", body["contents"], `[{"role":"user","parts":[{"text":"Weather in Oslo?"}]}]`)
		},
		Reply: providertest.ReplyJSON(200, `{"candidates":[{"content":{"parts":[{"text":"{\"city\": \"Oslo\", \"celsius\": -3.5}"}],"role":"model"},"finishReason":"STOP","index":0}]}`),
	})
	r, _ := gemini.Load(t, srv.URL, nil)
	out, _, err := agent.GenerateData[Weather](t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"), agent.WithPrompt("Weather in Oslo?"))
	if err != nil {
		t.Fatal(err)
	}
	if *out != (Weather{City: "Oslo", Celsius: -3.5}) {
		t.Errorf("output = %+v", *out)
	}
}

// TestGenerateStream checks a streamed answer's chunks: a thought, text with a
// thoughtSignature, and the usage of the last event.
func TestGenerateStream(t *testing.T) {
	t.Parallel()
	srv := gemini.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			checkPath(t, r, "gemini-2.5-flash", "streamGenerateContent")
			providertest.JSONEq(t, "contents", body["contents"], `[{"role":"user","parts":[{"text":"Say hello"}]}]`)
		},
		Reply: events(
			`{"candidates":[{"content":{"parts":[{"text":"The user wants a greeting.","thought":true}],"role":"model"},"index":0}]}`,
			`{"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}]}`,
			`{"candidates":[{"content":{"parts":[{"text":", world"}],"role":"model"},"index":0}]}`,
			`{"candidates":[{"content":{"parts":[{"text":"!","thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP","index":0}],
		  "usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4,"totalTokenCount":17,"thoughtsTokenCount":10},"modelVersion":"gemini-2.5-flash"}`,
		),
	})
	r, _ := gemini.Load(t, srv.URL, nil)
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
		chunks = append(chunks, providertest.JSON(v.Chunk.Content))
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
	providertest.JSONEq(t, "usage", final.Usage, `{"inputTokens":3,"outputTokens":4,"totalTokens":17,"thoughtsTokens":10}`)
}

func TestGenerateStreamPartialToolCall(t *testing.T) {
	t.Parallel()
	srv := gemini.Script(t, providertest.Exchange{
		Check: func(t *testing.T, r *http.Request, body map[string]any) {
			checkPath(t, r, "gemini-3-pro-preview", "streamGenerateContent")
			providertest.JSONEq(t, "toolConfig", body["toolConfig"], `{"functionCallingConfig":{"mode":"AUTO","streamFunctionCallArguments":true}}`)
		},
		Reply: events(
			`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"weather__now","willContinue":true},"thoughtSignature":"c2ln"}],"role":"model"},"index":0}]}`,
			`{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.city","stringValue":"Par","willContinue":true}],"willContinue":true}}],"role":"model"},"index":0}]}`,
			`{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.city","stringValue":"is"},{"jsonPath":"$.days","numberValue":3}],"willContinue":true}}],"role":"model"},"index":0}]}`,
			`{"candidates":[{"content":{"parts":[{"functionCall":{}}],"role":"model"},"finishReason":"STOP","index":0}]}`,
		),
	})
	r, _ := gemini.Load(t, srv.URL, map[string]string{"models": "gemini-3-pro-preview"})
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
	providertest.JSONEq(t, "final", final.Message, `{"role":"model","content":[{"toolRequest":{"ref":"weather/now-0","name":"weather/now","input":{"city":"Paris","days":3}},
	  "metadata":{"syntheticRef":true,"thoughtSignature":"c2ln"}}]}`)
}

// TestGenerateErrors checks what the shared cases do not: Gemini's own messages, the
// delay of a RetryInfo detail, and a Retry-After header winning over it.
func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	srv := gemini.Script(t,
		providertest.Exchange{Reply: providertest.ReplyJSON(400,
			`{"error":{"code":400,"message":"Invalid value at 'generation_config.temperature'","status":"INVALID_ARGUMENT"}}`)},
		providertest.Exchange{Reply: providertest.ReplyJSON(429, `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[
		  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},
		  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"15s"}]}}`)},
		providertest.Exchange{Reply: providertest.ReplyJSON(429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED",
		  "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"15s"}]}}`, "Retry-After", "7")},
	)
	r, _ := gemini.Load(t, srv.URL, nil)
	for _, want := range []abi.Error{
		{Code: abi.CodeInvalidInput, Status: 400, Message: "gemini: Invalid value at 'generation_config.temperature'"},
		{Code: abi.CodeLimitExceeded, Status: 429, Message: "gemini: You exceeded your current quota.", RetryAfter: 15},
		{Code: abi.CodeLimitExceeded, Status: 429, Message: "gemini: Resource has been exhausted (e.g. check quota).", RetryAfter: 7},
	} {
		_, err := agent.Generate(t.Context(), r, agent.WithModelName("gemini/gemini-2.5-flash"), agent.WithPrompt("hi"))
		var ce *host.CallError
		var ae *abi.Error
		if !errors.As(err, &ce) || ce.Plugin != "gemini" || ce.Export != plugin.ExportGenerate || !errors.As(err, &ae) {
			t.Fatalf("error = %v (%T)", err, err)
		}
		if *ae != want {
			t.Errorf("error = %+v, want %+v", *ae, want)
		}
	}
}
