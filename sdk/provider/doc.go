// Package provider holds the helpers shared by plugins that serve a remote model API
// (plugins/openai, plugins/anthropic, plugins/gemini): reading the plugin's settings
// and declaring the capabilities they need, a request's config as a JSON object, tool
// names sanitized to an API's rule and mapped back, half-streamed JSON made whole,
// data: URIs, and HTTP calls whose failures become the protocol's errors.
//
// What differs between APIs stays in each plugin: the wire format, the provider's error
// body, finish reasons, usage. This package imports only the standard library, abi
// and sdk, so it compiles into GOOS=wasip1 plugins.
//
// A plugin's main reads its settings once and declares the plugin, the capabilities
// the settings need and a model for each name they list:
//
//	func main() {
//		s := provider.ReadSettings(provider.Settings{
//			BaseURL:   "https://api.example.com/v1",
//			KeySecret: "EXAMPLE_API_KEY",
//			Models:    []string{"model-a", "model-b"},
//		})
//		provider.Serve(sdk.Info{Name: "example", Version: "1.0.0"}, s, modelInfo, generate)
//	}
//
// and each call checks the settings (Settings.Validate), sends its request with Post
// and turns an error response into the protocol's error with HTTPError, after reading
// the provider's message out of its body.
package provider
