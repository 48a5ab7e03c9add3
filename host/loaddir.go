package host

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ReadManifest reads a manifest file: a Manifest in JSON. A field the Manifest does
// not have is an error, so that a misspelt grant is not silently ignored.
func ReadManifest(path string) (Manifest, error) {
	var m Manifest
	data, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("manifest %s: %w", path, err)
	}
	return m, nil
}

// LoadDir loads every plugin of a directory: each <name>.wasm, with the manifest
// <name>.json beside it when there is one (none grants nothing beyond the defaults),
// in the order of their names, compiling several at once (LoadAll). It stops at the
// first plugin that fails to load, leaving those loaded before it.
func (h *Host) LoadDir(ctx context.Context, dir string) ([]*Plugin, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if err != nil {
		return nil, fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	if len(files) == 0 {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("host: %w: %w", ErrLoad, err)
		}
	}
	srcs := make([]Source, 0, len(files))
	for _, file := range files {
		src, err := readDirSource(file)
		if err != nil {
			// Those before it load, as they would have one by one.
			loaded, lerr := h.LoadAll(ctx, srcs)
			return loaded, cmp.Or(lerr, err)
		}
		srcs = append(srcs, src)
	}
	return h.LoadAll(ctx, srcs)
}

// readDirSource reads a .wasm file of LoadDir's, with the manifest beside it if any.
func readDirSource(file string) (Source, error) {
	m, err := ReadManifest(manifestFile(file))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Source{}, fmt.Errorf("host: %w: %w", ErrLoad, err)
	}
	return ReadSource(file, m)
}
