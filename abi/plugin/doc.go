// Package plugin is the WebAssembly plugin protocol, version 1: the exports a plugin
// provides, the host functions it may import, the descriptor it answers with, and the
// JSON envelopes of each call. ../ABI.md describes it in full, for plugin authors in any
// language; this package gives its names and envelopes to the Go host and the Go SDK.
//
// The contracts of the actions themselves (what a model, a tool or a handler receives
// and answers) are package abi's; this package says how they travel into a sandbox.
// Like abi, it imports nothing outside the standard library, since every Go plugin
// compiles it.
package plugin
