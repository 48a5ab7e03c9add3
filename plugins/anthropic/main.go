// Command anthropic is a Terrarium plugin serving Anthropic's Claude models through the
// Messages API (POST {baseURL}/messages). Each model named in the "models" config is
// registered as /model/anthropic/<name>.
//
// # Configuration
//
// Config keys (a key the manifest does not grant, or grants empty, takes its default):
//
//   - baseURL: the API's base URL, default https://api.anthropic.com/v1;
//   - models: the model names to serve, comma-separated (duplicates ignored), default
//     "claude-sonnet-4-5,claude-opus-4-1,claude-haiku-4-5";
//   - apiKeySecret: the secret holding the API key, default ANTHROPIC_API_KEY. The plugin
//     never reads it: the host injects it into the x-api-key header.
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
// HTTP errors carry the API's message and the status: 400 and 422 are invalid_input,
// 401 and 403 permission_denied, 404 not_found, 413 and 429 limit_exceeded, 5xx
// (529 overloaded included) unavailable; retry-after (seconds or an HTTP date) becomes
// retryAfter. A failed connection, and an error event in the middle of a stream, are
// unavailable.
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o anthropic.wasm .
package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
)

// The defaults of the config keys.
const (
	defaultBaseURL      = "https://api.anthropic.com/v1"
	defaultModels       = "claude-sonnet-4-5,claude-opus-4-1,claude-haiku-4-5"
	defaultAPIKeySecret = "ANTHROPIC_API_KEY"
	apiVersion          = "2023-06-01"
)

// settings is the plugin's configuration.
type settings struct {
	baseURL      string
	models       []string
	apiKeySecret string
}

// loadSettings reads the config keys; a key not granted (or empty) takes its default.
func loadSettings(get func(string) (string, error)) settings {
	val := func(key, def string) string {
		v, err := get(key)
		if v = strings.TrimSpace(v); err != nil || v == "" {
			return def
		}
		return v
	}
	s := settings{
		baseURL:      strings.TrimRight(val("baseURL", defaultBaseURL), "/"),
		apiKeySecret: val("apiKeySecret", defaultAPIKeySecret),
	}
	for _, m := range strings.Split(val("models", defaultModels), ",") {
		if m = strings.TrimSpace(m); m != "" && !slices.Contains(s.models, m) {
			s.models = append(s.models, m)
		}
	}
	return s
}

// urlHost returns the host name of an absolute URL, without port or user info.
func urlHost(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		u = u[:i]
	}
	if i := strings.LastIndexByte(u, '@'); i >= 0 {
		u = u[i+1:]
	}
	if strings.HasPrefix(u, "[") { // an IPv6 literal
		if i := strings.IndexByte(u, ']'); i >= 0 {
			return u[1:i]
		}
	}
	if i := strings.LastIndexByte(u, ':'); i >= 0 {
		u = u[:i]
	}
	return strings.ToLower(u)
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
	s := loadSettings(sdk.Config)
	sdk.Plugin(sdk.Info{
		Name:        "anthropic",
		Version:     "1.0.0",
		Description: "Anthropic's Claude models through the Messages API.",
		Capabilities: abi.Capabilities{
			HTTP:    []string{urlHost(s.baseURL)},
			Secrets: []string{s.apiKeySecret},
			Config:  []string{"baseURL", "models", "apiKeySecret"},
		},
	})
	for _, name := range s.models {
		sdk.Model(name, modelInfo(name), func(ctx context.Context, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
			return s.generate(ctx, name, req)
		})
	}
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// generate calls the Messages API for one request.
func (s settings) generate(ctx context.Context, model string, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
	stream := sdk.Streaming(ctx)
	body, names, err := buildRequest(model, req, stream)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: encoding the request: %v", err)
	}
	start := time.Now()
	resp, err := sdk.HTTP(&sdk.HTTPRequest{
		Method: "POST",
		URL:    s.baseURL + "/messages",
		Headers: map[string]string{
			"x-api-key":         "{{secret:" + s.apiKeySecret + "}}",
			"anthropic-version": apiVersion,
			"content-type":      "application/json",
			"accept":            map[bool]string{true: "text/event-stream", false: "application/json"}[stream],
		},
	}, data)
	if err != nil {
		return nil, transportError("sending the request", err)
	}
	defer resp.Body.Close()
	if resp.Status < 200 || resp.Status > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, apiError(resp.Status, resp.Header, b, time.Now())
	}
	var out *abi.GenerateResponse
	if stream && strings.HasPrefix(resp.Header["content-type"], "text/event-stream") {
		out, err = readStream(resp.Body, names, sdk.StreamChunk)
	} else {
		var b []byte
		if b, err = io.ReadAll(resp.Body); err != nil {
			return nil, transportError("reading the response", err)
		}
		out, err = parseResponse(b, names)
	}
	if err != nil {
		return nil, err
	}
	out.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
	return out, nil
}

// transportError reports a failure to reach the API or read its answer: the host's
// error code is kept (limit_exceeded when the call's time ran out, permission_denied
// when the host is not granted); anything else is unavailable.
func transportError(doing string, err error) error {
	var e *abi.Error
	if errors.As(err, &e) {
		c := *e
		c.Message = "anthropic: " + doing + ": " + e.Message
		if c.Code == "" || c.Code == abi.CodeInternal {
			c.Code = abi.CodeUnavailable
		}
		return &c
	}
	return abi.Errorf(abi.CodeUnavailable, "anthropic: %s: %v", doing, err)
}
