// Package cachedir keeps a cache directory under a size limit, evicting what was used
// least recently: the plugin builds of host/pluginbuild and the compiled modules of
// the host's compilation cache.
package cachedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Touch marks an entry of a cache directory used now: the last to be evicted.
func Touch(path string) error {
	now := time.Now()
	return os.Chtimes(path, now, now)
}

// Prune removes the entries of dir used least recently (by modification time, which
// Touch renews) until the rest fit in limit bytes. An entry is a file, or a directory
// counted with everything in it. match selects the entries that are the cache's (nil:
// all of them); keep, a path, stays whatever its age. Entries another process removes
// meanwhile are skipped.
func Prune(dir string, limit int64, keep string, match func(fs.DirEntry) bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	type entry struct {
		path string
		size int64
		used time.Time
	}
	var list []entry
	var total int64
	for _, e := range entries {
		if match != nil && !match(e) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		size := info.Size()
		if e.IsDir() {
			size = sizeOf(path)
		}
		list = append(list, entry{path, size, info.ModTime()})
		total += size
	}
	sort.Slice(list, func(i, j int) bool { return list[i].used.Before(list[j].used) })
	for _, e := range list {
		if total <= limit {
			break
		}
		if e.path == keep {
			continue
		}
		if err := os.RemoveAll(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		total -= e.size
	}
	return nil
}

// sizeOf is the size of the files under dir.
func sizeOf(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
