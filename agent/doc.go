// Package agent is the core every Terrarium application uses: the registry of actions,
// models and tools (native Go, or served by plugins through the same interfaces),
// Generate with its tool loop, structured output, interrupts and middleware, the
// reliability middleware (retries, timeouts, backup models), turn handlers, and the
// session interface tools and plugins see.
//
// What builds on it lives beside it: package agent/prompt (Dotprompt templates and
// .prompt files) and package agent/session (bidirectional streaming, SessionFlow with
// snapshots, DefineAgent). The wire types it works with (messages, parts, requests,
// responses) are package abi's, which applications import directly.
//
// # Options
//
// Options are typed by where they apply, so that the compiler refuses one given where
// it does not (see options.go): CommonOption (generate calls, prompts and agents),
// PromptingOption (generate calls and prompts), GenerateOption (generate calls only).
// A setting that holds one value can be given once: a second is an error wrapping
// ErrInvalidOption that names both options.
//
// The package exports more than eighty names because each setting of a generate call
// is an option constructor of its own (about thirty of them); the rest are the
// registry, the model, tool and handler contracts, and the errors callers branch on.
package agent
