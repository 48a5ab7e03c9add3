// Package sdk is the Go SDK for writing Terrarium plugins: WebAssembly modules that give
// a Terrarium host models, tools and handlers (see abi/ABI.md for the protocol itself).
//
// # Writing a plugin
//
// A plugin is a Go main package. Its main function names the plugin and registers what it
// provides, and does nothing else:
//
//	package main
//
//	import (
//		"context"
//
//		"github.com/terrarium-ai/terrarium/sdk"
//	)
//
//	type Input struct {
//		City string `json:"city" jsonschema:"description=The city's name"`
//		Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
//	}
//
//	type Output struct {
//		Summary string `json:"summary"`
//	}
//
//	func main() {
//		sdk.Plugin(sdk.Info{Name: "weather", Version: "1.0.0", Description: "Weather lookups."})
//		sdk.Tool("forecast", "Forecast for a city.", func(ctx context.Context, in Input) (Output, error) {
//			return Output{Summary: "sunny in " + in.City}, nil
//		})
//	}
//
// Registrations may also be made from init functions. The SDK runs main itself, once,
// before it serves the first call, so main must return: do not block in it, start
// servers, or call os.Exit.
//
// A tool's input and output JSON Schemas are inferred from its Go types (see Tool);
// a model is registered with Model, a handler with Handler. Errors returned by a model,
// tool or handler reach the host as the protocol's errors: return an *abi.Error (for
// example abi.Errorf(abi.CodeInvalidInput, ...)) to choose the code; any other error is
// reported as internal. A panic is recovered and reported as an internal error naming
// the model, tool or handler, so a bug never traps the instance.
//
// Tools, handlers and models reach the session and the outside world only through the
// host functions this package wraps (State, SetState, Messages, HTTP, Config, Log...);
// the plugin asks for what it needs in Info.Capabilities and the operator grants it, or
// not. There is no filesystem, no environment and no network socket.
//
// # Building a plugin
//
// Plugins are built with the standard Go toolchain (no TinyGo) as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o weather.wasm .
//
// (Terrarium's host/pluginbuild package runs this build, with a cache, for tests and the
// CLI.) The module exports _initialize, which the host calls once per instance, and the
// four terrarium_* exports, whichever kinds the plugin registered; it imports every host
// function of terrarium:host/v1.
//
// The package compiles for other platforms too, so that code shared with a plugin can
// be tested natively; there the host functions fail with an internal error.
package sdk
