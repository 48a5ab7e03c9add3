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
// The descriptor asks for the host of baseURL (api.openai.com by default), the secret
// apiKeySecret names (none when it is empty) and the three config keys.
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
// Errors keep the HTTP status and quote the provider's message: 401, 402 and 403 are
// permission_denied, 404 not_found, 413 and 429 limit_exceeded (a 429 for an exhausted
// quota, insufficient_quota, permission_denied: waiting does not help), 408, 409, 425
// and 5xx unavailable, other 4xx invalid_input; the Retry-After (or retry-after-ms)
// delay becomes retryAfter, and a server that cannot be reached is unavailable. The
// manifest's timeout (30 s by default) bounds the whole exchange, a streamed answer
// included: raise it for long answers.
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o openai.wasm .
package main

import (
	"context"
	"io"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// defaults are the plugin's settings when the manifest grants no config.
var defaults = provider.Settings{
	BaseURL:   "https://api.openai.com/v1",
	KeySecret: "OPENAI_API_KEY",
	Models:    []string{"gpt-4o", "gpt-4o-mini"},
}

func main() {
	s := provider.ReadSettings(defaults)
	provider.Serve(sdk.Info{
		Name:        "openai",
		Version:     "1.0.0",
		Description: "Models of any OpenAI-compatible Chat Completions API: OpenAI, OpenRouter, Ollama, vLLM, llama.cpp, LM Studio.",
	}, s, modelInfo, generate)
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
	provider.Settings
	model string
	url   string
}

// newCall checks the settings and returns where a call for the model goes.
func newCall(s provider.Settings, model string) (*callInfo, error) {
	if err := s.Validate("openai"); err != nil {
		return nil, err
	}
	return &callInfo{Settings: s, model: model, url: s.BaseURL + "/chat/completions"}, nil
}

// headers are the request's headers; the key is a placeholder the host fills in.
func (c *callInfo) headers(stream bool) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json"}
	if stream {
		h["Accept"] = "text/event-stream"
	}
	if key := c.KeyPlaceholder(); key != "" {
		h["Authorization"] = "Bearer " + key
	}
	return h
}

// generate answers one generate call: it sends the request and reads the response,
// streaming it when the caller listens.
func generate(ctx context.Context, s provider.Settings, model string, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
	c, err := newCall(s, model)
	if err != nil {
		return nil, err
	}
	stream := sdk.Streaming(ctx)
	body, names, err := buildRequest(model, req, stream)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := provider.Post("openai", c.url, c.headers(stream), body, func(status int, header map[string]string, b []byte) *abi.Error {
		return httpError(status, header, b, c)
	})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out *abi.GenerateResponse
	if provider.IsEventStream(resp.Header) {
		out, err = readStream(resp.Body, names, c, sdk.StreamChunk)
	} else {
		var b []byte
		if b, err = io.ReadAll(resp.Body); err != nil {
			return nil, provider.TransportError("openai", "reading the response from "+c.url, err)
		}
		out, err = parseResponse(b, names, c)
	}
	if err != nil {
		return nil, err
	}
	out.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
	return out, nil
}
