// Command openai is a Terrarium plugin for the OpenAI-compatible Chat Completions API
// (POST {baseURL}/chat/completions), so one plugin serves OpenAI, OpenRouter, Ollama,
// vLLM, llama.cpp's server, LM Studio and the other servers that speak it.
//
// # Configuration
//
// The operator's manifest grants the plugin its config, its secret and the host of its
// base URL. A config key that is not granted takes its default:
//
//   - baseURL: the API's base URL, default https://api.openai.com/v1 (Ollama:
//     http://localhost:11434/v1, OpenRouter: https://openrouter.ai/api/v1);
//   - models: the comma-separated model names to declare, default
//     "gpt-4o,gpt-4o-mini"; each is registered as /model/openai/<name> (names may hold
//     '/' and ':', as "meta-llama/llama-3.1-8b-instruct" or "llama3.2:3b" do);
//   - apiKeySecret: the name of the secret sent as "Authorization: Bearer <secret>",
//     default OPENAI_API_KEY; an empty value sends no Authorization header (local
//     servers). The plugin never sees the key: the host fills it in.
//
// The plugin asks for the host api.openai.com, the secret OPENAI_API_KEY and the three
// config keys; a manifest pointing baseURL elsewhere grants that URL's host instead.
//
// # Requests
//
// System messages are sent as messages with role system. A request's config is passed
// through: temperature, topP (top_p), topK (top_k), maxOutputTokens (max_tokens, or
// max_completion_tokens for OpenAI's o-series and gpt-5 models or when config
// maxTokensField says "max_completion_tokens"), stopSequences (stop) and version (the
// model name sent instead of the declared one) are mapped; config.tools (tools in the
// API's own format, e.g. a server-side tool) are added to the request's tools; every
// other key goes into the request body untouched (seed, response_format,
// parallel_tool_calls, reasoning_effort, provider...), except messages and stream.
//
// Tool names are sanitized to the API's ^[a-zA-Z0-9_-]{1,64}$ ("calculator/calc"
// becomes "calculator__calc") and mapped back in responses; a tool whose input is not
// an object is offered as {"input": <schema>} and unwrapped. Tool requests carry the
// API's call id as their ref, and tool responses are sent as role tool messages
// answering the call of the same ref. Images are sent as image_url parts (data URIs or
// URLs), audio data URIs as input_audio and other data URIs (PDFs) as file parts.
// Reasoning the server returns (reasoning or reasoning_content, as OpenRouter,
// DeepSeek, vLLM and Ollama name it) becomes reasoning parts; it is not sent back.
//
// JSON output with a schema to enforce (output.constrained) is asked for with
// response_format json_schema, other JSON output with json_object. When the caller
// listens for chunks the plugin streams (stream_options.include_usage on) and forwards
// every delta as it arrives: text, reasoning, and tool calls as partial tool requests
// holding the arguments received so far, then each call whole.
//
// Errors keep the HTTP status and quote the provider's message: 401 and 403 are
// permission_denied, 404 not_found, 429 limit_exceeded with the Retry-After (or
// retry-after-ms) delay, 400 and 422 invalid_input, 5xx unavailable, and a server
// that cannot be reached unavailable. The manifest's timeout (30 s by default) bounds
// the whole exchange, a streamed answer included: raise it for long answers.
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o openai.wasm .
package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
)

// The defaults of the plugin's config keys.
const (
	defaultBaseURL   = "https://api.openai.com/v1"
	defaultModels    = "gpt-4o,gpt-4o-mini"
	defaultKeySecret = "OPENAI_API_KEY"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

func main() {
	sdk.Plugin(sdk.Info{
		Name:        "openai",
		Version:     "1.0.0",
		Description: "Models of any OpenAI-compatible Chat Completions API: OpenAI, OpenRouter, Ollama, vLLM, llama.cpp, LM Studio.",
		Capabilities: abi.Capabilities{
			HTTP:    []string{"api.openai.com"},
			Secrets: []string{defaultKeySecret},
			Config:  []string{"baseURL", "models", "apiKeySecret"},
		},
	})
	for _, name := range modelNames(config("models", defaultModels)) {
		sdk.Model(name, modelInfo(name), func(ctx context.Context, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
			return generate(ctx, name, req)
		})
	}
}

// config returns a config value, or def when the key is not granted.
func config(key, def string) string {
	v, err := sdk.Config(key)
	if err != nil {
		return def
	}
	return v
}

// modelNames splits the models config: names separated by commas, blanks ignored.
func modelNames(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return modelNames(defaultModels)
	}
	return out
}

// modelInfo is what every model of the plugin supports.
func modelInfo(name string) *abi.ModelInfo {
	return &abi.ModelInfo{
		Label: "OpenAI-compatible " + name,
		Supports: &abi.ModelSupports{
			Multiturn:   true,
			Tools:       true,
			SystemRole:  true,
			Media:       true,
			ToolChoice:  true,
			Output:      []string{"text", "json"},
			Constrained: abi.ConstrainedAll,
		},
		ConfigSchema: configSchema,
	}
}

// configSchema documents the config keys the plugin maps; any other key is passed
// through to the API.
var configSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"temperature":     map[string]any{"type": "number", "description": "Sampling temperature (temperature)."},
		"topP":            map[string]any{"type": "number", "description": "Nucleus sampling (top_p)."},
		"topK":            map[string]any{"type": "integer", "description": "Top-k sampling (top_k; not OpenAI's own API)."},
		"maxOutputTokens": map[string]any{"type": "integer", "description": "Output token limit (max_tokens or max_completion_tokens)."},
		"maxTokensField":  map[string]any{"enum": []any{"max_tokens", "max_completion_tokens"}, "description": "Which field carries maxOutputTokens."},
		"stopSequences":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Stop sequences (stop)."},
		"version":         map[string]any{"type": "string", "description": "Model name to send instead of the declared one."},
		"tools":           map[string]any{"type": "array", "description": "Extra tools in the API's own format."},
	},
	"additionalProperties": true,
}

// callInfo is where a call goes, for requests and error messages.
type callInfo struct {
	model     string
	baseURL   string
	url       string
	keySecret string // empty: no Authorization header
}

// validSecretName reports whether name can be a {{secret:NAME}} placeholder's name.
func validSecretName(name string) bool {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return name != ""
}

// settings reads the plugin's config for one call.
func settings(model string) (*callInfo, error) {
	base := strings.TrimRight(strings.TrimSpace(config("baseURL", defaultBaseURL)), "/")
	if base == "" {
		base = defaultBaseURL
	}
	c := &callInfo{model: model, baseURL: base, url: base + "/chat/completions", keySecret: strings.TrimSpace(config("apiKeySecret", defaultKeySecret))}
	if c.keySecret != "" && !validSecretName(c.keySecret) {
		return nil, abi.Errorf(abi.CodeInvalidInput, "openai: config apiKeySecret %q is not a secret name ([A-Za-z0-9_.-]+)", c.keySecret)
	}
	return c, nil
}

// headers are the request's headers; the key is a placeholder the host fills in.
func (c *callInfo) headers(stream bool) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json"}
	if stream {
		h["Accept"] = "text/event-stream"
	}
	if c.keySecret != "" {
		h["Authorization"] = "Bearer {{secret:" + c.keySecret + "}}"
	}
	return h
}

// generate answers one generate call: it sends the request and reads the response,
// streaming it when the caller listens.
func generate(ctx context.Context, model string, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
	c, err := settings(model)
	if err != nil {
		return nil, err
	}
	stream := sdk.Streaming(ctx)
	body, names, err := buildRequest(model, req, stream)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInvalidInput, "openai: encoding the request: %v", err)
	}
	start := time.Now()
	resp, err := sdk.HTTP(&sdk.HTTPRequest{Method: "POST", URL: c.url, Headers: c.headers(stream)}, data)
	if err != nil {
		return nil, transportError(err, "POST "+c.url)
	}
	defer resp.Body.Close()
	if resp.Status < 200 || resp.Status > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, httpError(resp.Status, resp.Header, b, c, time.Now())
	}
	var out *abi.GenerateResponse
	if strings.Contains(strings.ToLower(resp.Header["content-type"]), "text/event-stream") {
		out, err = readStream(resp.Body, names, c, sdk.StreamChunk, time.Now)
	} else {
		var b []byte
		if b, err = io.ReadAll(resp.Body); err != nil {
			return nil, transportError(err, "reading the response from "+c.url)
		}
		out, err = parseResponse(b, names, c, time.Now())
	}
	if err != nil {
		return nil, err
	}
	out.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
	return out, nil
}
