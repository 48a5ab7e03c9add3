package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DirWatch keeps the plugins of a directory, as LoadDir loads them, in step with their
// files: each Poll reloads the plugins whose module, manifest or signature changed.
type DirWatch struct {
	h    *Host
	dir  string
	seen map[string]pluginFiles // by .wasm path
}

// pluginFiles is what Poll compares of a plugin's files: the SHA-256 of its module,
// its manifest and its signature, one after the other (a missing file hashes as a
// mark of its own). Contents, not modification times: two writes within the clock's
// granularity (milliseconds) leave one time, and a copy may keep the old one. Hashing
// a Go plugin's few MB costs a few milliseconds a poll.
type pluginFiles [sha256.Size]byte

// Reloaded is what a Poll did about one changed plugin file: the plugin it reloaded,
// or why it could not (the version loaded before then stays).
type Reloaded struct {
	File   string
	Plugin *Plugin
	Err    error
}

// WatchDir starts watching dir: the files there now are taken as loaded (LoadDir
// them first), and only changes from now on are reloaded.
func (h *Host) WatchDir(dir string) (*DirWatch, error) {
	w := &DirWatch{h: h, dir: dir, seen: map[string]pluginFiles{}}
	files, err := w.look()
	if err != nil {
		return nil, err
	}
	w.seen = files
	return w, nil
}

// Poll looks at the directory once and Reloads each plugin whose files changed since
// the last look, or that is new, and returns what it did, in the order of the files'
// names. A plugin whose file is removed stays loaded. A module being written when
// Poll reads it fails to reload, and is tried again once it changes again.
func (w *DirWatch) Poll(ctx context.Context) ([]Reloaded, error) {
	files, err := w.look()
	if err != nil {
		return nil, err
	}
	var done []Reloaded
	for _, path := range slices.Sorted(maps.Keys(files)) {
		state := files[path]
		if prev, ok := w.seen[path]; ok && prev == state {
			continue
		}
		w.seen[path] = state
		p, err := w.reload(ctx, path)
		done = append(done, Reloaded{File: path, Plugin: p, Err: err})
	}
	return done, nil
}

// Run polls the directory every interval until ctx ends, telling report (if not nil)
// what each poll did.
func (w *DirWatch) Run(ctx context.Context, every time.Duration, report func(Reloaded)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		done, err := w.Poll(ctx)
		if err != nil {
			w.h.log.Warn("watching plugins", "dir", w.dir, "error", err)
		}
		for _, r := range done {
			if r.Err != nil {
				w.h.log.Warn("plugin not reloaded: the loaded version stays", "file", r.File, "error", r.Err)
			} else {
				w.h.log.Info("plugin reloaded", "file", r.File, "plugin", r.Plugin.Name(), "version", r.Plugin.Descriptor().Version, "sha256", r.Plugin.SHA256())
			}
			if report != nil {
				report(r)
			}
		}
	}
}

// look hashes every plugin's files.
func (w *DirWatch) look() (map[string]pluginFiles, error) {
	modules, err := filepath.Glob(filepath.Join(w.dir, "*.wasm"))
	if err != nil {
		return nil, fmt.Errorf("host: watching %s: %w", w.dir, err)
	}
	if _, err := os.Stat(w.dir); err != nil {
		return nil, fmt.Errorf("host: watching %s: %w", w.dir, err)
	}
	files := map[string]pluginFiles{}
	for _, path := range modules {
		h := sha256.New()
		for _, f := range []string{path, manifestFile(path), SignatureFile(path)} {
			data, err := os.ReadFile(f)
			switch {
			case err == nil:
				fmt.Fprintf(h, "%d:", len(data))
				h.Write(data)
			case errors.Is(err, fs.ErrNotExist):
				h.Write([]byte("-"))
			default:
				return nil, fmt.Errorf("host: watching %s: %w", w.dir, err)
			}
		}
		files[path] = pluginFiles(h.Sum(nil))
	}
	return files, nil
}

// reload reloads the plugin of a .wasm file with its manifest, as LoadDir loads it.
func (w *DirWatch) reload(ctx context.Context, path string) (*Plugin, error) {
	src, err := readDirSource(path)
	if err != nil {
		return nil, err
	}
	p, err := w.h.Reload(ctx, src.Wasm, src.Manifest)
	if err != nil {
		return nil, fmt.Errorf("%w (from %s)", err, path)
	}
	return p, nil
}

// manifestFile is the manifest beside a plugin's module: <name>.json for <name>.wasm.
func manifestFile(wasm string) string { return strings.TrimSuffix(wasm, ".wasm") + ".json" }
