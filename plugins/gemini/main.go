// Command gemini is a Terrarium plugin serving Google's Gemini models through the
// Gemini API's generateContent method (https://ai.google.dev/api/generate-content):
//
//	POST {baseURL}/models/{model}:generateContent
//	POST {baseURL}/models/{model}:streamGenerateContent?alt=sse  (when the caller streams)
//
// with the header x-goog-api-key: {{secret:GEMINI_API_KEY}}, which the host fills in:
// the plugin never sees the key.
//
// # Config
//
// Read with config_get; a key the manifest does not grant, and an empty baseURL or
// models, takes its default:
//
//   - baseURL: the API's base URL (default https://generativelanguage.googleapis.com/v1beta);
//   - models: the models to serve, comma-separated (default
//     "gemini-2.5-flash,gemini-2.5-pro"), each registered as /model/gemini/<name> (a
//     "models/" prefix, the API's resource name, dropped);
//   - apiKeySecret: the secret holding the API key (default GEMINI_API_KEY); empty, no
//     key is sent (a gateway that adds it).
//
// The descriptor asks for the host of baseURL, the secret apiKeySecret names and the
// three config keys.
//
// # Requests
//
// System messages become systemInstruction; user and model messages the contents of
// roles user and model; tool messages user contents of functionResponse parts (a tool's
// media content in the function response's parts, its text content beside its output
// in the response object: {"output", "content"}). Tools become functionDeclarations
// (parametersJsonSchema: the input schema), their names sanitized for Gemini ("/"
// becomes "__", other characters Gemini refuses "_", at most 64 bytes) and mapped back
// in the answer. toolChoice becomes
// toolConfig.functionCallingConfig.mode (AUTO, ANY, NONE). JSON output without tools
// sets responseMimeType application/json, and responseJsonSchema when constrained.
//
// The request's config is passed through: generation keys (temperature, topP, topK,
// maxOutputTokens, stopSequences, candidateCount, thinkingConfig, seed, ...) go into
// generationConfig, with config.generationConfig merged over them; server-side tools
// (googleSearch, codeExecution, urlContext, googleMaps, ...) become entries of tools,
// as do the entries of config.tools; config.functionCallingConfig goes into toolConfig;
// config.version replaces the model name in the URL; every other key (safetySettings,
// cachedContent, toolConfig, labels, ...) goes to the top level of the request as is.
//
// # Responses
//
// Text parts become text parts, thought parts reasoning parts, functionCall parts tool
// requests (ref: the call's id; when Gemini gives none, "<name>-<index>", marked
// "syntheticRef" in the part's metadata and not sent back to Gemini as an id),
// inlineData and fileData media parts, executableCode and codeExecutionResult (and any
// part the plugin does not know) custom parts. A part's thoughtSignature is kept in the
// part's metadata ("thoughtSignature") and sent back with it. Finish reasons, usage
// (prompt, candidates, total, thoughts and cached tokens) and a blocked prompt
// (promptFeedback.blockReason) are mapped; groundingMetadata, urlContextMetadata,
// citationMetadata, safetyRatings, promptFeedback, Gemini's own finishReason,
// modelVersion and responseId go into the response's custom field. Only the first
// candidate is the answer.
//
// When the caller streams, every server-sent event is forwarded as a chunk the moment
// it arrives; function calls whose arguments are streamed (partialArgs and
// willContinue) are streamed as partial tool requests.
//
// HTTP errors become protocol errors carrying the status and the API's message: 401,
// 402 and 403 permission_denied, 404 not_found, 413 and 429 limit_exceeded (with
// retryAfter from the Retry-After header or the RetryInfo's retryDelay), 408, 409, 425
// and 5xx unavailable, other 4xx invalid_input; a service that cannot be reached is
// unavailable.
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o gemini.wasm .
package main

import (
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// defaults are the plugin's settings when the manifest grants no config.
var defaults = provider.Settings{
	BaseURL:   "https://generativelanguage.googleapis.com/v1beta",
	KeySecret: "GEMINI_API_KEY",
	Models:    []string{"gemini-2.5-flash", "gemini-2.5-pro"},
}

func main() {
	s := provider.ReadSettings(defaults)
	s.Models = modelNames(s.Models)
	provider.Serve(sdk.Info{
		Name:        "gemini",
		Version:     "1.0.0",
		Description: "Google Gemini models through the Gemini API (generateContent).",
	}, s, modelInfo, generate)
}

// modelNames drops the "models/" prefix (the API's resource name) of the models'
// names, keeping each name once.
func modelNames(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.TrimPrefix(n, "models/"); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// modelInfo describes a Gemini model.
func modelInfo(name string) *abi.ModelInfo {
	return &abi.ModelInfo{
		Label: "Google AI - " + name,
		Supports: &abi.ModelSupports{
			Multiturn:   true,
			Tools:       true,
			SystemRole:  true,
			Media:       true,
			ToolChoice:  true,
			Output:      []string{"text", "json"},
			Constrained: abi.ConstrainedNoTools,
		},
		Stage: abi.StageStable,
	}
}
