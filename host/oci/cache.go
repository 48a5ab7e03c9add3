package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"

	"github.com/terrarium-ai/terrarium/internal/cachedir"
)

// DefaultCacheLimit is the size the cache's blobs are kept under unless
// WithCacheLimit says otherwise.
const DefaultCacheLimit = 2 << 30

// ErrDigestMismatch is wrapped by the error of content whose digest is not the one
// it was fetched or kept under: a tampered blob, in the registry or in the cache.
var ErrDigestMismatch = errors.New("digest mismatch")

// cache is a content-addressed directory: each blob (manifest or module) is kept at
// blobs/sha256/<hex> and checked against its name whenever it is read, and the
// signatures found for a manifest at signatures/sha256/<hex>/. Processes and
// deployments sharing the directory share what they pulled.
type cache struct {
	dir   string
	limit int64
}

// defaultCacheDir is terrarium/oci under the user's cache directory.
func defaultCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("oci: no user cache directory (use WithCacheDir): %w", err)
	}
	return filepath.Join(base, "terrarium", "oci"), nil
}

// blobPath is where the blob of digest d is kept.
func (c *cache) blobPath(d digest.Digest) string {
	return filepath.Join(c.dir, "blobs", d.Algorithm().String(), d.Encoded())
}

// get returns the kept blob of digest d, or nil if there is none. A blob whose
// contents do not match its digest (tampered with, or cut short) is removed and
// reported as ErrDigestMismatch.
func (c *cache) get(d digest.Digest) ([]byte, error) {
	path := c.blobPath(d)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oci: the cache: %w", err)
	}
	if got := digest.FromBytes(b); got != d {
		os.Remove(path)
		return nil, fmt.Errorf("oci: the cache's %s holds content of digest %s: %w (removed)", d, got, ErrDigestMismatch)
	}
	cachedir.Touch(path) // used: the last to be evicted
	return b, nil
}

// put keeps b as the blob of digest d, which it must be, and returns its path. It
// writes a temporary file and renames it into place, so that a reader never sees half
// a blob, and then keeps the blobs under the limit, keep and the new one spared.
func (c *cache) put(d digest.Digest, b []byte) (string, error) {
	if got := digest.FromBytes(b); got != d {
		return "", fmt.Errorf("oci: content of digest %s given as %s: %w", got, d, ErrDigestMismatch)
	}
	path := c.blobPath(d)
	if err := writeAtomic(path, b); err != nil {
		return "", fmt.Errorf("oci: the cache: %w", err)
	}
	if c.limit > 0 {
		isBlob := func(e fs.DirEntry) bool { return !e.IsDir() && e.Name()[0] != '.' }
		if err := cachedir.Prune(filepath.Dir(path), c.limit, path, isBlob); err != nil {
			return "", fmt.Errorf("oci: pruning the cache: %w", err)
		}
	}
	return path, nil
}

// signatureDir is where the signatures found for the manifest of digest d are kept.
func (c *cache) signatureDir(d digest.Digest) string {
	return filepath.Join(c.dir, "signatures", d.Algorithm().String(), d.Encoded())
}

// signatures returns the kept signatures of the manifest of digest d.
func (c *cache) signatures(d digest.Digest) ([][]byte, error) {
	dir := c.signatureDir(d)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oci: the cache: %w", err)
	}
	var out [][]byte
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("oci: the cache: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// putSignature keeps a signature found for the manifest of digest d, named by its
// own digest so that finding it again adds nothing.
func (c *cache) putSignature(d digest.Digest, b []byte) error {
	path := filepath.Join(c.signatureDir(d), digest.FromBytes(b).Encoded()+".json")
	if err := writeAtomic(path, b); err != nil {
		return fmt.Errorf("oci: the cache: %w", err)
	}
	return nil
}

// writeAtomic writes b to path through a temporary file in its directory.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
