package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/terrarium-ai/terrarium/store"
)

// WitnessFile is the file, beside Badger's own in the store's directory, that holds the
// Badger version of the newest acknowledged commit.
//
// Badger replays its write-ahead log at open up to the first entry whose checksum
// fails and drops the rest, taking a damaged entry for the torn tail of a crash: one
// flipped byte would silently roll the store back, losing commits it had acknowledged.
// The witness is written and synced after every commit and before Commit returns, so
// Open can tell: if Badger's newest version is older than the witness, acknowledged
// commits are gone, and Open fails rather than serve an older history. Deleting the
// file accepts the loss: Open then starts a new witness from what survived.
const WitnessFile = "TERRARIUM-WITNESS"

// witnessSize is the file's size: an 8-byte big-endian version, then the CRC-32C of
// those 8 bytes.
const witnessSize = 12

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// witness keeps WitnessFile. Commits that finish together share one write and sync:
// each raises want, and whoever holds mu writes the highest version wanted so far.
type witness struct {
	f    *os.File
	want atomic.Uint64
	mu   sync.Mutex
	// synced is the version on disk.
	synced uint64
}

// openWitness opens dir's witness and checks it against newest, Badger's newest
// version. A store without one (new, or from before the witness) gets one at newest.
func openWitness(dir string, newest uint64) (*witness, error) {
	path := filepath.Join(dir, WitnessFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createWitness(dir, newest); err != nil {
			return nil, err
		}
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if len(b) != witnessSize || crc32.Checksum(b[:8], castagnoli) != binary.BigEndian.Uint32(b[8:]) {
		return nil, fmt.Errorf("%w: %s does not decode", store.ErrCorrupt, path)
	}
	acked := binary.BigEndian.Uint64(b)
	if newest < acked {
		return nil, fmt.Errorf("%w: the write-ahead log lost acknowledged commits: the newest has version %d, the database's newest is %d (a damaged log is cut at the damage; delete %s to open what survived)",
			store.ErrCorrupt, acked, newest, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	w := &witness{f: f, synced: acked}
	w.want.Store(acked)
	return w, nil
}

// createWitness writes the witness through a temporary file and a rename, so that
// a crash leaves either no witness or a whole one.
func createWitness(dir string, version uint64) error {
	tmp, err := os.CreateTemp(dir, WitnessFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(encodeWitness(version))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, WitnessFile)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func encodeWitness(version uint64) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, witnessSize), version)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// advance records that the commit of version v is durable in Badger. It returns once
// the witness on disk is at v or later.
func (w *witness) advance(v uint64) error {
	for {
		cur := w.want.Load()
		if cur >= v || w.want.CompareAndSwap(cur, v) {
			break
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.synced >= v {
		return nil
	}
	// Every version up to want belongs to a commit Badger has synced (want only
	// grows through advance), so writing the highest covers them all at once. The
	// 12 bytes are rewritten in place, within one sector: never torn.
	target := w.want.Load()
	if _, err := w.f.WriteAt(encodeWitness(target), 0); err != nil {
		return fmt.Errorf("writing %s: %w", WitnessFile, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", WitnessFile, err)
	}
	w.synced = target
	return nil
}

func (w *witness) close() error {
	return w.f.Close()
}
