// Package agent is the runtime applications import: the registry of actions, models and
// tools (native Go, or served by plugins through the same interfaces), Generate with its
// tool loop, structured output and middleware, and tool interrupts.
//
// The wire types it works with (messages, parts, requests, responses) live in package
// abi, which applications import directly.
package agent
