// Package host is the WebAssembly plugin host: it loads plugins (modules speaking the
// protocol of abi/ABI.md), runs them sandboxed with Extism's go-sdk on wazero, and
// registers their models, tools and handlers in an agent registry, where they work
// exactly as native ones do.
//
// Each plugin is compiled once (with an on-disk compilation cache) and served by a
// bounded pool of warm instances. Its manifest grants what it may do, and nothing else
// is allowed: memory, time per call, concurrent instances, HTTP hosts and ports
// (checked again on every redirect), config values, secrets (each injected into one
// header of requests to its hosts, never shown to the plugin unless granted readable),
// and access to the session (none, read, write). Host functions act on the session
// bound to the current call only, so one pool serves every session and tenant.
//
// Every fault is bounded: a call ends at its timeout whatever the guest does (loop,
// sleep, wait on HTTP or on a caller that stopped reading its stream), waiting for an
// instance has its own bound, and making one is bounded like a call. An instance that
// trapped, exited or timed out is discarded; one whose caller gave up is kept if it
// returns within a second.
package host
