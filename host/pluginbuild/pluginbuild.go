// Package pluginbuild compiles a Go plugin (a main package using package sdk) to a
// WebAssembly module, for tests and the CLI. Builds are cached on disk, keyed by
// everything that goes into them, so that building an unchanged plugin again costs one
// `go list` and no compilation.
package pluginbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/terrarium-ai/terrarium/internal/cachedir"
)

// buildFlags are the flags of every build; they are part of the cache key.
var buildFlags = []string{"-buildmode=c-shared", "-trimpath", "-ldflags=-s -w"}

// goEnvKeys are the go settings (environment or `go env -w`) that change what
// `go build` produces; their values are part of the cache key.
var goEnvKeys = []string{"GOVERSION", "GOFLAGS", "GOEXPERIMENT", "GOWASM", "GOWORK", "GOROOT"}

// Option changes how Build works.
type Option interface {
	apply(*options)
}

type options struct {
	cacheDir   string
	cacheLimit int64
	goCmd      string
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// DefaultCacheLimit is the size the cache directory is kept under unless WithCacheLimit
// says otherwise: about two hundred Go plugins.
const DefaultCacheLimit = 1 << 30

// WithCacheDir puts built modules in dir instead of os.UserCacheDir()/terrarium/plugins.
func WithCacheDir(dir string) Option { return optionFunc(func(o *options) { o.cacheDir = dir }) }

// WithCacheLimit keeps the cache directory under n bytes, evicting the modules used
// least recently after each build.
func WithCacheLimit(n int64) Option { return optionFunc(func(o *options) { o.cacheLimit = n }) }

// WithGo runs the given go command instead of the one on PATH (or in GOROOT).
func WithGo(path string) Option { return optionFunc(func(o *options) { o.goCmd = path }) }

// goBuilds counts the `go build` runs of this process per plugin directory, for tests.
var goBuilds sync.Map // string -> *atomic.Int64

// memo remembers the builds of this process: one build per plugin directory and
// options, however often it is asked for.
var memo sync.Map // memoKey -> *memoEntry

type memoKey struct{ dir, cacheDir, goCmd string }

type memoEntry struct {
	once sync.Once
	path string
	err  error
}

// Build compiles the Go main package in dir with GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared into the cache directory and returns the path of the .wasm file.
//
// The cache key is the SHA-256 of the Go version and settings (GOFLAGS, GOEXPERIMENT,
// ...), the build flags, the go.mod and go.sum (and go.work) files involved, and the
// contents of every Go source, assembly and embedded file of every non-standard package
// in the build, as `go list -deps` finds them for wasip1/wasm (modules from the module
// cache count by path and version). A cache hit returns without running `go build`; a
// miss builds into a temporary directory and renames the result into place, so
// concurrent builds of the same plugin (several test binaries) are safe. Compilation
// itself is cached by the Go build cache. The directory is kept under a size limit
// (DefaultCacheLimit, or WithCacheLimit): after each build the modules used least
// recently are removed, so outdated versions do not pile up. It can be deleted at any
// time.
//
// Within one process the result for a directory is remembered: a second call returns
// the first result without looking at the sources again. A failed build's error holds
// the compiler's output.
func Build(ctx context.Context, dir string, opts ...Option) (string, error) {
	o := options{cacheLimit: DefaultCacheLimit}
	for _, opt := range opts {
		opt.apply(&o)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("pluginbuild: %w", err)
	}
	if o.cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("pluginbuild: no cache directory (use WithCacheDir): %w", err)
		}
		o.cacheDir = filepath.Join(base, "terrarium", "plugins")
	}
	if o.goCmd == "" {
		o.goCmd = GoCommand()
	}
	v, _ := memo.LoadOrStore(memoKey{abs, o.cacheDir, o.goCmd}, &memoEntry{})
	e := v.(*memoEntry)
	e.once.Do(func() { e.path, e.err = build(ctx, abs, o) })
	if e.err != nil && ctx.Err() != nil {
		// A cancelled build is not a result worth remembering.
		memo.CompareAndDelete(memoKey{abs, o.cacheDir, o.goCmd}, e)
	}
	return e.path, e.err
}

// GoCommand finds the go command: on PATH, else in $GOROOT/bin.
func GoCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

func build(ctx context.Context, dir string, o options) (string, error) {
	key, err := cacheKey(ctx, dir, o.goCmd)
	if err != nil {
		return "", err
	}
	out := filepath.Join(o.cacheDir, filepath.Base(dir)+"-"+key[:32]+".wasm")
	if _, err := os.Stat(out); err == nil {
		cachedir.Touch(out) // used: the last to be evicted
		return out, nil
	}
	if err := os.MkdirAll(o.cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("pluginbuild: %w", err)
	}
	tmp, err := os.MkdirTemp(o.cacheDir, ".build-")
	if err != nil {
		return "", fmt.Errorf("pluginbuild: %w", err)
	}
	defer os.RemoveAll(tmp)
	tmpOut := filepath.Join(tmp, "plugin.wasm")
	args := append([]string{"build"}, buildFlags...)
	args = append(args, "-o", tmpOut, ".")
	cmd := exec.CommandContext(ctx, o.goCmd, args...)
	cmd.Dir = dir
	cmd.Env = wasmEnv()
	n, _ := goBuilds.LoadOrStore(dir, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pluginbuild: building %s: %v\n%s", dir, err, bytes.TrimSpace(output))
	}
	if err := os.Rename(tmpOut, out); err != nil {
		return "", fmt.Errorf("pluginbuild: %w", err)
	}
	isModule := func(e fs.DirEntry) bool { return !e.IsDir() && strings.HasSuffix(e.Name(), ".wasm") }
	if err := cachedir.Prune(o.cacheDir, o.cacheLimit, out, isModule); err != nil {
		return "", fmt.Errorf("pluginbuild: pruning the cache: %w", err)
	}
	return out, nil
}

// wasmEnv is the environment of the go commands: this process's, for wasip1/wasm.
func wasmEnv() []string {
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "GOOS" || k == "GOARCH" || k == "CGO_ENABLED" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
}

// listedPackage is what cacheKey needs from `go list -json`.
type listedPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	SFiles     []string
	EmbedFiles []string
	Module     *struct {
		Path    string
		Version string
		Main    bool
		GoMod   string
		Replace *struct{ Path, Version string }
	}
	Error *struct{ Err string }
}

// cacheKey hashes everything that determines the build of the package in dir.
func cacheKey(ctx context.Context, dir, goCmd string) (string, error) {
	h := sha256.New()
	w := func(parts ...string) {
		for _, p := range parts {
			// Length-prefixed, so that no two sequences of parts hash alike.
			fmt.Fprintf(h, "%d:%s;", len(p), p)
		}
	}
	env, err := runGo(ctx, dir, goCmd, append([]string{"env"}, goEnvKeys...)...)
	if err != nil {
		return "", err
	}
	w("terrarium-pluginbuild-v1", string(env))
	w(buildFlags...)
	var mods []string // go.mod, go.sum, go.work and go.work.sum files in the build
	vals := strings.Split(string(env), "\n")
	for i, k := range goEnvKeys {
		if k == "GOWORK" && i < len(vals) && vals[i] != "" && vals[i] != "off" {
			mods = append(mods, vals[i], vals[i]+".sum")
		}
	}
	listing, err := runGo(ctx, dir, goCmd, "list", "-deps", "-json=ImportPath,Dir,Standard,GoFiles,SFiles,EmbedFiles,Module,Error", ".")
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(listing))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return "", fmt.Errorf("pluginbuild: reading go list: %w", err)
		}
		if p.Error != nil {
			return "", fmt.Errorf("pluginbuild: %s: %s", p.ImportPath, p.Error.Err)
		}
		if p.Standard {
			continue
		}
		w("package", p.ImportPath)
		if m := p.Module; m != nil && m.Version != "" && m.Replace == nil {
			// Module cache contents are immutable: the version names them.
			w("module", m.Path, m.Version)
			continue
		}
		if m := p.Module; m != nil && m.GoMod != "" {
			mods = append(mods, m.GoMod, strings.TrimSuffix(m.GoMod, ".mod")+".sum")
		}
		files := append(append(append([]string{}, p.GoFiles...), p.SFiles...), p.EmbedFiles...)
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				return "", fmt.Errorf("pluginbuild: %w", err)
			}
			w("file", f, string(b))
		}
	}
	sort.Strings(mods)
	for i, f := range mods {
		if i > 0 && f == mods[i-1] {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("pluginbuild: %w", err)
		}
		w("modfile", f, string(b))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// runGo runs a go command in dir for wasip1/wasm and returns its standard output; its
// error holds the standard error.
func runGo(ctx context.Context, dir, goCmd string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir
	cmd.Env = wasmEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("pluginbuild: go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}
