package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/internal/wasmtest"
)

// bare returns a plugin named name at a version: its descriptor's only change.
func bare(name, version string) []byte {
	return wasmtest.Describer(`{"abi":1,"name":"`+name+`","version":"`+version+`"}`, wasmtest.MemoryExported)
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// watchBare loads version 1 of the bare plugin from a new directory, and watches the
// directory; it returns the host, the watch and the plugin's module file.
func watchBare(t *testing.T) (*host.Host, *host.DirWatch, string) {
	t.Helper()
	dir := t.TempDir()
	module := filepath.Join(dir, "bare.wasm")
	write(t, module, bare("bare", "1"))
	h, _ := newHost(t)
	if _, err := h.LoadDir(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	w, err := h.WatchDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h, w, module
}

// poll polls w and returns what it reloaded.
func poll(t *testing.T, w *host.DirWatch) []host.Reloaded {
	t.Helper()
	done, err := w.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return done
}

func TestDirWatchReloadsWhatChanged(t *testing.T) {
	h, w, module := watchBare(t)
	dir := filepath.Dir(module)
	version := func() string { return h.Plugin("bare").Descriptor().Version }
	if done := poll(t, w); len(done) != 0 {
		t.Fatalf("nothing changed, yet: %+v", done)
	}

	// A new version of the same size, written at once: what a modification time
	// might not tell apart.
	write(t, module, bare("bare", "2"))
	if done := poll(t, w); len(done) != 1 || done[0].Err != nil || done[0].File != module || done[0].Plugin.Descriptor().Version != "2" || version() != "2" {
		t.Fatalf("after a new module: %+v, loaded version %s", done, version())
	}
	if done := poll(t, w); len(done) != 0 {
		t.Errorf("reloaded twice: %+v", done)
	}

	// A broken module (half written, say) is reported; the loaded version stays.
	write(t, module, []byte("\x00asm"))
	if done := poll(t, w); len(done) != 1 || !errors.Is(done[0].Err, host.ErrLoad) || version() != "2" {
		t.Fatalf("after a broken module: %+v, loaded version %s", done, version())
	}

	// The manifest beside it counts, and so does a new plugin.
	write(t, module, bare("bare", "3"))
	write(t, filepath.Join(dir, "bare.json"), []byte(`{"timeout": "7s"}`))
	write(t, filepath.Join(dir, "other.wasm"), bare("other", "1"))
	done := poll(t, w)
	if len(done) != 2 || done[0].Err != nil || done[1].Err != nil || version() != "3" ||
		h.Plugin("bare").Manifest().Timeout.Duration != 7*time.Second || h.Plugin("other") == nil {
		t.Fatalf("after a new manifest and a new plugin: %+v", done)
	}

	// A removed file leaves its plugin loaded.
	if err := os.Remove(filepath.Join(dir, "other.wasm")); err != nil {
		t.Fatal(err)
	}
	if done := poll(t, w); len(done) != 0 || h.Plugin("other") == nil {
		t.Errorf("after a removal: %+v", done)
	}
}

// Run polls on its own, and tells report what it reloaded.
func TestDirWatchRun(t *testing.T) {
	_, w, module := watchBare(t)
	ctx, cancel := context.WithCancel(context.Background())
	reloads := make(chan host.Reloaded)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w.Run(ctx, time.Millisecond, func(r host.Reloaded) { reloads <- r })
	}()
	write(t, module, bare("bare", "2"))
	// A poll may catch the file half written, and fail; the next, once it is whole,
	// reloads it.
	r := <-reloads
	for r.Err != nil {
		r = <-reloads
	}
	if v := r.Plugin.Descriptor().Version; v != "2" {
		t.Errorf("reloaded version %s, want 2", v)
	}
	cancel()
	<-ended
}
