// Package abi is the wire contract Terrarium shares with everything that speaks to it:
// the model action types of Genkit's model specification (messages, parts, generate
// requests, responses and stream chunks, tool definitions, model info) and the plugin
// protocol that WebAssembly plugins implement (see ABI.md in this directory).
//
// The package imports nothing outside the standard library because it is compiled into
// every plugin (GOOS=wasip1). Its JSON is Genkit's JSON: a value marshalled here validates
// against Genkit's schema, and anything Genkit produces decodes here.
//
// Applications import abi directly for these types; package agent does not re-export
// them. One name per concept keeps godoc, error messages and plugin code in agreement.
package abi
