// Package abi is the contract of Terrarium's actions, shared with everything that
// speaks to them: the model action types of Genkit's model specification (messages,
// parts, generate requests, responses and stream chunks, tool definitions, model info),
// the handler contract (hook points, handler input, directives) and the error envelope
// every side uses (Error, with a code, an HTTP status and Retry-After).
//
// How these travel into a WebAssembly sandbox is the plugin protocol, package
// abi/plugin, described for authors in any language by ABI.md in this directory.
//
// The package imports nothing outside the standard library because it is compiled into
// every plugin (GOOS=wasip1). Its JSON is Genkit's JSON: a value marshalled here validates
// against Genkit's schema, and anything Genkit produces decodes here.
//
// Applications import abi directly for these types; package agent does not re-export
// them. One name per concept keeps godoc, error messages and plugin code in agreement.
package abi
