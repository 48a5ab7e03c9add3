package cachedir

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// entry makes a file (or a directory holding one file) of size bytes, last used at
// the given time.
func entry(t *testing.T, dir, name string, size int, used time.Time, isDir bool) string {
	t.Helper()
	path := filepath.Join(dir, name)
	file := path
	if isDir {
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		file = filepath.Join(path, "data")
	}
	if err := os.WriteFile(file, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, used, used); err != nil {
		t.Fatal(err)
	}
	return path
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestPruneEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	entry(t, dir, "old", 100, now.Add(-3*time.Hour), true)
	entry(t, dir, "middle", 100, now.Add(-2*time.Hour), true)
	kept := entry(t, dir, "kept", 100, now.Add(-4*time.Hour), true) // the oldest, but asked for
	entry(t, dir, "new", 100, now.Add(-time.Hour), true)
	entry(t, dir, "other.txt", 1000, now.Add(-5*time.Hour), false) // not the cache's

	isDir := func(e fs.DirEntry) bool { return e.IsDir() }
	if err := Prune(dir, 250, kept, isDir); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, dir), []string{"kept", "new", "other.txt"}; !slices.Equal(got, want) {
		t.Errorf("after pruning to 250 bytes: %v, want %v", got, want)
	}
}

func TestTouchSavesFromEviction(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	a := entry(t, dir, "a.wasm", 100, now.Add(-2*time.Hour), false)
	entry(t, dir, "b.wasm", 100, now.Add(-time.Hour), false)
	if err := Touch(a); err != nil {
		t.Fatal(err)
	}
	if err := Prune(dir, 150, "", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, dir), []string{"a.wasm"}; !slices.Equal(got, want) {
		t.Errorf("after touching a.wasm and pruning: %v, want %v", got, want)
	}
}

func TestPruneUnderTheLimitRemovesNothing(t *testing.T) {
	dir := t.TempDir()
	entry(t, dir, "a", 100, time.Now().Add(-time.Hour), true)
	entry(t, dir, "b", 100, time.Now(), false)
	if err := Prune(dir, 200, "", nil); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); len(got) != 2 {
		t.Errorf("pruning within the limit removed entries: %v left", got)
	}
}
