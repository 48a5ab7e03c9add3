// Command anthropic is a Terrarium plugin serving Anthropic's Claude models through the
// Messages API (POST {baseURL}/messages). Each model named in the "models" config is
// registered as /model/anthropic/<name>.
//
// # Configuration
//
// Config keys (a key the manifest does not grant, and an empty baseURL or models,
// takes its default):
//
//   - baseURL: the API's base URL, default https://api.anthropic.com/v1;
//   - models: the model names to serve, comma-separated (duplicates ignored), default
//     "claude-sonnet-4-5,claude-opus-4-1,claude-haiku-4-5";
//   - apiKeySecret: the secret holding the API key, default ANTHROPIC_API_KEY; empty,
//     no key is sent (a gateway that adds it). The plugin never reads it: the host
//     injects it into the x-api-key header.
//
// The descriptor asks for the host of baseURL and the secret named by apiKeySecret
// (api.anthropic.com and ANTHROPIC_API_KEY by default), and for the three config keys.
//
// # Requests
//
// System messages go to the top-level "system" field; model messages become assistant
// messages and tool messages user messages of tool_result blocks (tool_use_id is the
// tool response's ref; the content is the output, as text, then the response's content
// parts; is_error is set when the part's metadata has "isError" or "error"). Consecutive
// messages of the same role are merged, as the API wants roles to alternate, and
// tool_result blocks come first in a user message. Media become "image" blocks (PDF and
// plain text "document" blocks): data: URIs as base64 sources, other URLs as url
// sources. Reasoning parts carrying metadata.signature are sent back as "thinking"
// blocks (others are dropped: the API rejects unsigned thinking); custom parts of the
// form {"anthropic": <block>} are sent back as that block. A part's metadata
// "cache_control" is copied onto its block.
//
// Config: temperature, topP, topK, maxOutputTokens (default 4096, the API requires
// it) and stopSequences become temperature, top_p, top_k, max_tokens and
// stop_sequences; version, when a string, replaces the model name; apiKey is dropped
// (keys go through secrets). Every other key, "thinking" included, is passed through
// untouched; a snake_case key given directly (max_tokens, tool_choice) is kept over the
// plugin's default, while model, messages and stream are always the plugin's, and
// system messages replace a config "system". config.tools (server tools such as web search) are sent
// after the request's tools. Tool names are sanitized to ^[a-zA-Z0-9_-]{1,64}$
// ("calculator/calc" becomes "calculator__calc") and mapped back in responses.
// toolChoice auto, required and none become tool_choice auto, any and none.
//
// The models support multiturn, tools, system messages, media and tool choice, with
// text and JSON output; JSON output is not constrained natively, so the host adds
// format instructions to the prompt.
//
// # Responses
//
// text blocks become text parts (citations in metadata.citations), tool_use blocks tool
// requests (ref = id), thinking blocks reasoning parts with metadata.signature, and any
// other block (redacted_thinking, server_tool_use, web_search_tool_result, ...) a
// custom part {"anthropic": <block>}. Finish reasons: end_turn, stop_sequence and
// tool_use are stop, max_tokens and model_context_window_exceeded length, refusal
// blocked, pause_turn other. Usage: input_tokens, output_tokens and
// cache_read_input_tokens (as cachedContentTokens); cache_creation_input_tokens goes to
// usage.custom. The response's custom holds the message's id and model.
//
// When the caller listens for chunks (sdk.Streaming), the plugin asks for an SSE stream
// and forwards each delta as a chunk the moment it arrives: text, reasoning, and for a
// tool_use block a tool request with partial set when it starts (name and ref), one per
// input_json_delta whose input is the arguments accumulated so far (the JSON text
// streamed so far, closed), and the complete request when it ends. Signatures and
// citations arrive in the final response only, which is built from the chunks with an
// abi.Accumulator per content block. Otherwise it asks for one JSON response.
//
// # Errors
//
// HTTP errors carry the API's message and the status: 401, 402 and 403 are
// permission_denied, 404 not_found, 413 and 429 limit_exceeded, 408, 409, 425 and 5xx
// (529 overloaded included) unavailable, other 4xx invalid_input; retry-after (seconds
// or an HTTP date) becomes retryAfter. A failed connection, and an error event in the
// middle of a stream, are unavailable.
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o anthropic.wasm .
package main

import (
	"context"
	"io"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// apiVersion is the anthropic-version header the plugin speaks.
const apiVersion = "2023-06-01"

// defaults are the plugin's settings when the manifest grants no config.
var defaults = provider.Settings{
	BaseURL:   "https://api.anthropic.com/v1",
	KeySecret: "ANTHROPIC_API_KEY",
	Models:    []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"},
}

// modelInfo is what every model of the plugin supports.
func modelInfo(name string) *abi.ModelInfo {
	return &abi.ModelInfo{
		Label: "Anthropic " + name,
		Supports: &abi.ModelSupports{
			Multiturn:   true,
			Tools:       true,
			SystemRole:  true,
			Media:       true,
			ToolChoice:  true,
			Output:      []string{"text", "json"},
			Constrained: abi.ConstrainedNone,
		},
		ConfigSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"temperature":     map[string]any{"type": "number", "minimum": 0, "maximum": 1},
				"topP":            map[string]any{"type": "number", "minimum": 0, "maximum": 1},
				"topK":            map[string]any{"type": "integer", "minimum": 0},
				"maxOutputTokens": map[string]any{"type": "integer", "minimum": 1},
				"stopSequences":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				"version":         map[string]any{"type": "string"},
				"thinking":        map[string]any{"type": "object"},
				"tools":           map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
			},
			"additionalProperties": true,
		},
		Stage: abi.StageStable,
	}
}

func main() {
	s := provider.ReadSettings(defaults)
	provider.Serve(sdk.Info{
		Name:        "anthropic",
		Version:     "1.0.0",
		Description: "Anthropic's Claude models through the Messages API.",
	}, s, modelInfo, generate)
}

// generate calls the Messages API for one request.
func generate(ctx context.Context, s provider.Settings, model string, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
	if err := s.Validate("anthropic"); err != nil {
		return nil, err
	}
	stream := sdk.Streaming(ctx)
	body, names, err := buildRequest(model, req, stream)
	if err != nil {
		return nil, err
	}
	headers := map[string]string{
		"anthropic-version": apiVersion,
		"content-type":      "application/json",
		"accept":            "application/json",
	}
	if stream {
		headers["accept"] = "text/event-stream"
	}
	if key := s.KeyPlaceholder(); key != "" {
		headers["x-api-key"] = key
	}
	start := time.Now()
	resp, err := provider.Post("anthropic", s.BaseURL+"/messages", headers, body, apiError)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out *abi.GenerateResponse
	if stream && provider.IsEventStream(resp.Header) {
		out, err = readStream(resp.Body, names, sdk.StreamChunk)
	} else {
		var b []byte
		if b, err = io.ReadAll(resp.Body); err != nil {
			return nil, provider.TransportError("anthropic", "reading the response", err)
		}
		out, err = parseResponse(b, names)
	}
	if err != nil {
		return nil, err
	}
	out.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
	return out, nil
}
