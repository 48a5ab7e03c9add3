package pluginbuild

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// writeModule writes a standalone plugin module (no dependencies) into a temp dir.
func writeModule(t *testing.T, mainGo string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module example.com/tiny\n\ngo 1.26\n",
		"main.go": mainGo,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// builds returns how many times this process ran go build for dir.
func builds(dir string) int64 {
	abs, _ := filepath.Abs(dir)
	if n, ok := goBuilds.Load(abs); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// forget drops this process's memory of builds of dir, as a new process would start.
func forget(dir string) {
	abs, _ := filepath.Abs(dir)
	memo.Range(func(k, _ any) bool {
		if k.(memoKey).dir == abs {
			memo.Delete(k)
		}
		return true
	})
}

const tinyMain = `package main

//go:wasmexport answer
func answer() int32 { return 42 }

func main() {}
`

func TestBuildCaches(t *testing.T) {
	dir := writeModule(t, tinyMain)
	cache := t.TempDir()
	ctx := t.Context()

	path, err := Build(ctx, dir, WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	if got := builds(dir); got != 1 {
		t.Fatalf("first build ran go build %d times, want 1", got)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(b), "\x00asm") {
		t.Fatalf("%s is not a wasm module (%v)", path, err)
	}
	if filepath.Dir(path) != cache {
		t.Errorf("built into %s, want the cache dir %s", path, cache)
	}

	// The same process: remembered.
	if p, err := Build(ctx, dir, WithCacheDir(cache)); err != nil || p != path {
		t.Errorf("second build = %s, %v", p, err)
	}
	// A new process (memory forgotten): a disk cache hit, no go build.
	forget(dir)
	if p, err := Build(ctx, dir, WithCacheDir(cache)); err != nil || p != path {
		t.Errorf("cached build = %s, %v", p, err)
	}
	if got := builds(dir); got != 1 {
		t.Errorf("cache hits ran go build: %d builds in all, want 1", got)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		t.Errorf("cache dir holds %d entries, want 1 (temp files left?)", len(entries))
	}

	// A changed source is a different build.
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(strings.Replace(tinyMain, "42", "43", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	forget(dir)
	p, err := Build(ctx, dir, WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	if p == path || builds(dir) != 2 {
		t.Errorf("changed source: path %s (was %s), %d builds", p, path, builds(dir))
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name, main, want string
	}{
		{"type error", "package main\n\nfunc main() { var x int = \"s\"; _ = x }\n", `cannot use "s"`},
		{"syntax error", "package main\n\nfunc main() {\n", "syntax error"},
		{"not a main package", "package tiny\n", "main package"},
	} {
		dir := writeModule(t, tc.main)
		_, err := Build(t.Context(), dir, WithCacheDir(t.TempDir()))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := Build(t.Context(), filepath.Join(t.TempDir(), "missing"), WithCacheDir(t.TempDir())); err == nil {
		t.Error("building a missing directory succeeded")
	}
}

// TestCacheStaysUnderItsLimit: old builds are evicted, least recently used first, so a
// cache shared by test runs does not grow without bound.
func TestCacheStaysUnderItsLimit(t *testing.T) {
	cache := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for i, name := range []string{"stale-a.wasm", "used-b.wasm", "stale-c.wasm"} {
		p := filepath.Join(cache, name)
		if err := os.WriteFile(p, make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, old.Add(time.Duration(i)*time.Minute), old.Add(time.Duration(i)*time.Minute))
	}
	// used-b was used most recently of the three.
	os.Chtimes(filepath.Join(cache, "used-b.wasm"), time.Now(), time.Now())
	dir := writeModule(t, tinyMain)
	built, err := Build(t.Context(), dir, WithCacheDir(cache), WithCacheLimit(2500))
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(built)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wasm") {
			left = append(left, e.Name())
		}
	}
	// The new module is far over 2500 bytes: everything else goes but it.
	if info.Size() > 2500 && (len(left) != 1 || left[0] != filepath.Base(built)) {
		t.Errorf("left in the cache: %v", left)
	}
	// With room for the new module and one more, the most recently used stays.
	forget(dir)
	for _, name := range []string{"stale-a.wasm", "used-b.wasm"} {
		os.WriteFile(filepath.Join(cache, name), make([]byte, 1000), 0o644)
	}
	os.Chtimes(filepath.Join(cache, "stale-a.wasm"), old, old)
	os.Remove(built)
	if _, err := Build(t.Context(), dir, WithCacheDir(cache), WithCacheLimit(info.Size()+1500)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cache, "used-b.wasm")); err != nil {
		t.Errorf("the recently used module was evicted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "stale-a.wasm")); err == nil {
		t.Error("the stale module was kept over the limit")
	}
}
