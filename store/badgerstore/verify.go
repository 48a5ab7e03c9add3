package badgerstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/terrarium-ai/terrarium/store"
)

// verifyTables checks every block of every table the manifest lists against its
// checksum, before Badger opens them.
//
// Badger cannot be left to find damage itself. It opens tables in goroutines of its
// own, where a damaged block (an entry count pointing outside the block) panics and
// kills the process; and once open, a block that fails its checksum reads as if its
// keys were absent, so a damaged record would read as no record. Here a panic is
// recovered and every failure is an error wrapping store.ErrCorrupt. The cost is
// reading every table once per Open.
func verifyTables(dir string, opt badger.Options) error {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new store
	}
	if err != nil {
		return err
	}
	manifest, _, err := badger.ReplayManifestFile(f, opt.ExternalMagicVersion, opt)
	f.Close()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", store.ErrCorrupt, badger.ManifestFilename, err)
	}
	for id, tm := range manifest.Tables {
		if err := verifyTable(table.NewFilename(id, dir), id, tm, opt); err != nil {
			return fmt.Errorf("%w: table %s: %w", store.ErrCorrupt, filepath.Base(table.NewFilename(id, dir)), err)
		}
	}
	return nil
}

// verifyTable maps the table and hands Badger only its bytes, as an in-memory table,
// so that the mapping is this function's alone to unmap, once. Given the file
// (table.OpenTable), Badger unmaps and closes it on some failures (a checksum that
// fails) and not on others (a damaged index, a panic), and the caller cannot tell
// which: unmapping again after it has, once the range is mapped anew by another
// component, takes that component's memory away.
func verifyTable(path string, id uint64, tm badger.TableManifest, opt badger.Options) (err error) {
	if tm.KeyID != 0 {
		return errors.New("encrypted, which this store does not use")
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("badger panicked reading it: %v", r)
		}
		if cerr := mf.Close(-1); err == nil {
			err = cerr
		}
	}()
	t, err := table.OpenInMemoryTable(mf.Data, id, &table.Options{
		Compression:        tm.Compression,
		BlockSize:          opt.BlockSize,
		BloomFalsePositive: opt.BloomFalsePositive,
	})
	if err != nil {
		return err
	}
	return t.VerifyChecksum()
}
