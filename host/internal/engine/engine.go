// Package engine is the boundary between the plugin host and what runs WebAssembly:
// the interfaces an engine implements, and the pieces every engine on wazero shares
// (a sleep that ends with the call, the close notifier, the tail of a guest's stderr).
// The host sees nothing else of an engine, so that one can be swapped for another
// without touching the pool, the host functions or the agent adapters.
package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero"
)

// Engine compiles modules.
type Engine interface {
	// Name names the engine in logs and in the compilation cache's keys.
	Name() string
	// Compile compiles a module. It fails with a clear error for a module the engine
	// cannot run (not WebAssembly, an import it does not provide).
	Compile(ctx context.Context, wasm []byte, cfg ModuleConfig) (Module, error)
}

// ModuleConfig is what a compiled module needs to know about its plugin.
type ModuleConfig struct {
	// MemoryPages bounds every memory of an instance, in pages of 64 KiB.
	MemoryPages uint32
	// HostFuncs are the functions of the host module (terrarium:host/v1).
	HostFuncs []HostFunc
	// Cache keeps compiled code across processes; nil compiles every time. It serves
	// this module only (the host keys it by the module's hash and the engine).
	Cache wazero.CompilationCache
	// CacheDir is the directory of Cache, where an engine may keep what it derives
	// from the module (empty: nowhere).
	CacheDir string
	// Resettable asks for instances that can be reset (Instance.Reset): each keeps a
	// snapshot of its state after its first call (the host's describe, which holds no
	// session's data), which costs memory.
	Resettable bool
	// Env is the guest's WASI environment, "KEY=value" pairs sorted by key (a Go
	// guest's runtime reads GOGC and GOMEMLIMIT from it as it starts).
	Env []string
}

// HostModule is the import module of the host functions.
const HostModule = "terrarium:host/v1"

// HostFunc is one function of the host module: its name, its number of i64
// parameters, and its body, which returns the contents of the result block to hand
// back (ABI.md, section 3).
type HostFunc struct {
	Name   string
	Params int
	Fn     func(ctx context.Context, call HostCall, args []uint64) []byte
}

// HostCall gives a host function access to the calling instance's memory blocks.
type HostCall interface {
	// Read returns a copy of the block at offset.
	Read(offset uint64) ([]byte, error)
}

// Module is a compiled plugin: instances of it can be made concurrently.
type Module interface {
	// Instantiate makes an instance; it ends with ctx, even inside the module's start
	// function.
	Instantiate(ctx context.Context) (Instance, error)
	HasExport(name string) bool
	// Close closes the module and every instance of it, ending those still running.
	Close(ctx context.Context) error
}

// Instance is one instantiated plugin. It is not safe for concurrent use.
type Instance interface {
	// Call runs an export. A *PluginError is an error the plugin reported (the
	// instance is fine); any other error means the instance is no longer usable,
	// whatever the cause: a trap, an exit (even with code 0), the end of ctx. The call
	// ends with ctx, even while the guest sleeps or waits in a WASI function. Call
	// keeps nothing of input once it returns: the host reuses the buffer.
	Call(ctx context.Context, export string, input []byte) ([]byte, error)
	// Reset returns the instance to its state after its first call (its memory and
	// globals as they were then), forgetting every call since. It fails with
	// ErrNoReset if the module was not compiled Resettable or the engine cannot; the
	// caller then makes a new instance instead.
	Reset(ctx context.Context) error
	Close(ctx context.Context) error
}

// ErrNoReset is returned by Reset when the instance cannot be reset. It wraps
// errors.ErrUnsupported.
var ErrNoReset = fmt.Errorf("this instance cannot be reset: %w", errors.ErrUnsupported)

// PluginError is an error a plugin reported through error_set.
type PluginError struct{ Msg string }

// Error returns the plugin's message as it reported it.
func (e *PluginError) Error() string { return e.Msg }

// ReturnedWithoutError is the error of a call whose export returned rc, not 0, without
// setting an error (ABI.md, section 2, Errors): the plugin failed without saying why,
// and its output, if it set one, is not to be trusted. An empty error counts as none,
// as Extism's kernels cannot tell the two apart. Both engines report it in these words.
func ReturnedWithoutError(export string, rc uint32) error {
	return fmt.Errorf("%s returned %d without setting an error", export, int32(rc))
}

// WithEnv returns mc with the environment env, "KEY=value" pairs.
func WithEnv(mc wazero.ModuleConfig, env []string) wazero.ModuleConfig {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		mc = mc.WithEnv(k, v)
	}
	return mc
}
