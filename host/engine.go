package host

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/tetratelabs/wazero"

	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/internal/cachedir"
)

// Engine runs plugins' WebAssembly. The default is the host's own engine on wazero
// (NativeEngine); Extism's go-sdk (package host/extismengine) is an option, and the
// reference the native engine is tested against. Both run the same plugins, with the
// same results, faults and limits; the native engine is 2-4 times faster per call, and
// a host that does not select Extism's links none of the go-sdk's dependencies
// (BENCHMARKS.md, docs/architecture.md).
type Engine = engine.Engine

// WithEngine sets the engine that runs plugins (default NativeEngine()).
func WithEngine(e Engine) Option { return optionFunc(func(c *hostConfig) { c.engine = e }) }

// NativeEngine returns the host's own engine, the default: the Extism kernel ABI
// implemented on wazero directly, with guests stopped at their deadline by a check
// compiled into every loop and function (engine_native.go).
func NativeEngine() Engine { return nativeEngine{} }

// The host sees an engine only through these: module and instance are the engine's.
type (
	module   = engine.Module
	instance = engine.Instance
	hostCall = engine.HostCall
)

// pluginError is an error a plugin reported through error_set.
type pluginError = engine.PluginError

// DefaultCompilationCacheLimit is the size the compilation cache is kept under unless
// WithCompilationCacheLimit says otherwise: about forty Go plugins.
const DefaultCompilationCacheLimit = 1 << 30

// compileCache keeps compiled plugins on disk, shared by every process using the
// same directory: a directory per module and engine (the module's SHA-256 and the
// engine's name), holding wazero's compilation cache for that module (under wazero's
// version, which wazero keys its files by) and what the engine derives from the
// module. Each load renews its directory's time; the directories used least recently
// are removed when the whole exceeds the limit.
type compileCache struct {
	dir   string
	limit int64

	mu   sync.Mutex
	open map[string]wazero.CompilationCache // by directory
}

func newCompileCache(dir string, limit int64) *compileCache {
	return &compileCache{dir: dir, limit: limit, open: map[string]wazero.CompilationCache{}}
}

// forModule returns the cache of one module compiled by one engine, and its directory.
func (c *compileCache) forModule(engineName, sha string) (wazero.CompilationCache, string, error) {
	dir := filepath.Join(c.dir, engineName+"-"+sha[:32])
	c.mu.Lock()
	defer c.mu.Unlock()
	cache := c.open[dir]
	if cache == nil {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(dir); err != nil {
			return nil, "", fmt.Errorf("compilation cache in %s: %w", dir, err)
		}
		c.open[dir] = cache
	}
	if err := cachedir.Touch(dir); err != nil {
		return nil, "", fmt.Errorf("compilation cache: %w", err)
	}
	isModule := func(e fs.DirEntry) bool { return e.IsDir() }
	if err := cachedir.Prune(c.dir, c.limit, dir, isModule); err != nil {
		return nil, "", fmt.Errorf("compilation cache: pruning %s: %w", c.dir, err)
	}
	return cache, dir, nil
}

// close closes the caches opened.
func (c *compileCache) close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for dir, cache := range c.open {
		if cerr := cache.Close(ctx); cerr != nil && err == nil {
			err = cerr
		}
		delete(c.open, dir)
	}
	return err
}

// defaultCacheDir is terrarium/compiled under the user's cache directory. (Hosts before
// this layout kept one unbounded wazero cache in terrarium/wazero, which nothing uses
// any more.)
func defaultCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory for the compilation cache (use WithCompilationCache): %w", err)
	}
	return filepath.Join(base, "terrarium", "compiled"), nil
}
