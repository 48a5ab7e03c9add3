package badgerstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrarium-ai/terrarium/store"
)

// These tests damage a store's files the way a disk does, one flipped bit at a time,
// and require an error wrapping store.ErrCorrupt (from Open or from the read), never a
// panic, never data other than what was committed, never a silent rollback.

// corruptTurns is how many turns commitTurns commits.
const corruptTurns = 12

// turnData is turn i's record data, unique so a test can find it in the files.
func turnData(i int) []byte { return []byte(fmt.Sprintf("data of turn %02d.", i)) }

// commitTurns commits a session's turns, each a record continuing the last, with a
// small blob and, for the last turn, one large enough for the value log.
func commitTurns(t *testing.T, s *Store) {
	t.Helper()
	parent := ""
	for i := range corruptTurns {
		r := store.Record{ID: fmt.Sprintf("turn-%02d", i), Session: "s", Parent: parent, Turn: i, Data: turnData(i)}
		blobs := []store.Blob{{Key: fmt.Sprintf("blob-%02d", i), Data: []byte(fmt.Sprintf("blob of turn %02d", i))}}
		if i == corruptTurns-1 {
			blobs = append(blobs, store.Blob{Key: "large", Data: largeBlob()})
		}
		if err := s.Commit(t.Context(), "ns", r, blobs); err != nil {
			t.Fatal(err)
		}
		parent = r.ID
	}
}

func largeBlob() []byte {
	return bytes.Repeat([]byte("large blob."), 2*valueThreshold/11)
}

// readTurns reads back everything commitTurns committed. It returns an error if a read
// fails, and fails the test if a read returns something other than what was committed.
func readTurns(t *testing.T, s *Store) error {
	t.Helper()
	ctx := t.Context()
	recs, err := s.Records(ctx, "ns", "s")
	if err != nil {
		return err
	}
	if len(recs) != corruptTurns {
		t.Fatalf("Records returned %d of %d turns, without an error", len(recs), corruptTurns)
	}
	for i, r := range recs {
		if r.ID != fmt.Sprintf("turn-%02d", i) || !bytes.Equal(r.Data, turnData(i)) {
			t.Fatalf("Records[%d] = %s %q, want turn %d as committed", i, r.ID, r.Data, i)
		}
	}
	head, err := s.Head(ctx, "ns", "s")
	if err != nil {
		return err
	}
	if head.ID != recs[len(recs)-1].ID {
		t.Fatalf("Head = %s, want %s", head.ID, recs[len(recs)-1].ID)
	}
	for i := range corruptTurns {
		key := fmt.Sprintf("blob-%02d", i)
		b, err := s.Blob(ctx, "ns", key)
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("blob of turn %02d", i); string(b) != want {
			t.Fatalf("Blob(%s) = %q, want %q", key, b, want)
		}
	}
	b, err := s.Blob(ctx, "ns", "large")
	if err != nil {
		return err
	}
	if !bytes.Equal(b, largeBlob()) {
		t.Fatal("the large blob reads back different, without an error")
	}
	return nil
}

// checkDamageReported opens dir and reads it back: an error wrapping store.ErrCorrupt
// must come from Open or a read, unless everything reads back as committed. It
// returns which: "open", "read" or "none".
func checkDamageReported(t *testing.T, dir string) string {
	t.Helper()
	s, err := Open(dir, WithLogger(nil))
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Open of a damaged store: %v, want an error wrapping store.ErrCorrupt", err)
		}
		return "open"
	}
	defer s.Close()
	err = readTurns(t, s)
	if err == nil {
		return "none"
	}
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("reading a damaged store: %v, want an error wrapping store.ErrCorrupt", err)
	}
	return "read"
}

// onlyFile returns the one file in dir whose name ends in suffix.
func onlyFile(t *testing.T, dir, suffix string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil || len(matches) != 1 {
		t.Fatalf("%d files *%s in the store (%v), want 1", len(matches), suffix, err)
	}
	return matches[0]
}

// flip flips one bit of the file at off.
func flip(t *testing.T, path string, off int64, bit uint) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// offsetOf returns where data first occurs in the file.
func offsetOf(t *testing.T, path string, data []byte) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, data)
	if i < 0 {
		t.Fatalf("%q not found in %s", data, filepath.Base(path))
	}
	return int64(i)
}

// crashedStore returns the directory of a store whose process committed the turns
// and was killed: the commits are only in Badger's write-ahead log, the memtable's
// .mem file.
func crashedStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	runCrashChild(t, dir, "turns", "committed")
	return dir
}

// A damaged entry in the write-ahead log: Badger replays the log up to it and drops
// the rest, acknowledged commits included.
func TestCorruptWriteAheadLog(t *testing.T) {
	for _, turn := range []int{3, corruptTurns - 1} {
		t.Run(fmt.Sprintf("turn%d", turn), func(t *testing.T) {
			dir := crashedStore(t)
			wal := onlyFile(t, dir, ".mem")
			flip(t, wal, offsetOf(t, wal, turnData(turn))+3, 2)
			if got := checkDamageReported(t, dir); got != "open" {
				t.Fatalf("damage reported by %s, want by Open", got)
			}
		})
	}
}

// The witness raises no false alarm: a crash (the log's tail as Badger left it, even
// garbage past the last entry) opens with every acknowledged commit.
func TestCrashedStoreOpens(t *testing.T) {
	dir := crashedStore(t)
	wal := onlyFile(t, dir, ".mem")
	st, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	flip(t, wal, st.Size()-1, 0)
	s := openDir(t, dir)
	defer s.Close()
	if err := readTurns(t, s); err != nil {
		t.Fatal(err)
	}
}

// Deleting the witness is how an operator accepts what survived a damaged log.
func TestDeleteWitnessAcceptsLoss(t *testing.T) {
	dir := crashedStore(t)
	wal := onlyFile(t, dir, ".mem")
	flip(t, wal, offsetOf(t, wal, turnData(5)), 0)
	if err := os.Remove(filepath.Join(dir, WitnessFile)); err != nil {
		t.Fatal(err)
	}
	s := openDir(t, dir)
	defer s.Close()
	head, err := s.Head(t.Context(), "ns", "s")
	if err != nil || head.ID != "turn-04" {
		t.Fatalf("Head = %q, %v; want turn-04, the last whole commit", head.ID, err)
	}
	// New commits carry on, and the new witness guards them.
	if err := s.Commit(t.Context(), "ns", store.Record{ID: "after", Session: "s", Parent: "turn-04", Turn: 5}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptWitness(t *testing.T) {
	dir := crashedStore(t)
	flip(t, filepath.Join(dir, WitnessFile), 3, 1)
	if got := checkDamageReported(t, dir); got != "open" {
		t.Fatalf("damage reported by %s, want by Open", got)
	}
}

// closedStore commits the turns and closes the store, which writes them into a table
// (.sst) and the large blob into the value log (.vlog), and returns its directory.
func closedStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := openDir(t, dir)
	commitTurns(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every byte of a table, one bit flipped: its blocks (keys, values, entry offsets,
// entry count, checksum), its index and its footer. A block's checksum covers its
// uncompressed bytes, so a flip that decompresses to the same bytes harms nothing and
// goes unreported; any other is reported.
func TestCorruptTable(t *testing.T) {
	dir := closedStore(t)
	sst := onlyFile(t, dir, ".sst")
	orig, err := os.ReadFile(sst)
	if err != nil {
		t.Fatal(err)
	}
	stride := 1
	if testing.Short() {
		stride = 17
	}
	for off := 0; off < len(orig); off += stride {
		flip(t, sst, int64(off), uint(off%8))
		t.Run(fmt.Sprint("byte", off), func(t *testing.T) { checkDamageReported(t, dir) })
		if err := os.WriteFile(sst, orig, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A value in the value log fails its checksum.
func TestCorruptValueLog(t *testing.T) {
	dir := closedStore(t)
	vlog := onlyFile(t, dir, ".vlog")
	flip(t, vlog, offsetOf(t, vlog, largeBlob()[:64])+1000, 5)
	if got := checkDamageReported(t, dir); got != "read" {
		t.Fatalf("damage reported by %s, want by reading the value", got)
	}
}

// A value damaged in the value log while the store is open fails its checksum when
// read.
func TestCorruptValueLogWhileOpen(t *testing.T) {
	dir := closedStore(t)
	s := openDir(t, dir, WithLogger(nil))
	defer s.Close()
	vlog := filepath.Join(dir, "000001.vlog") // the one written before; Open starts another
	flip(t, vlog, offsetOf(t, vlog, largeBlob()[:64])+1000, 5)
	if _, err := s.Blob(t.Context(), "ns", "large"); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Blob of a value damaged in the value log: %v, want an error wrapping store.ErrCorrupt", err)
	}
}

// Damage that happens while the store is open, to a table it has mapped but not read
// yet. Badger checks each block's checksum as it first reads it, but reports a block
// that fails as if its keys were absent; that much cannot be told from absence (Open
// would find it). Damage to the table's index makes Badger panic. Neither may reach the
// caller as a panic or as data other than what was committed.
func TestCorruptTableWhileOpen(t *testing.T) {
	dir := closedStore(t)
	sst := onlyFile(t, dir, ".sst")
	orig, err := os.ReadFile(sst)
	if err != nil {
		t.Fatal(err)
	}
	// A table ends with its index, the index's length, a checksum and the checksum's
	// length. Every seventh byte of the index and footer, every 61st of the blocks.
	n := len(orig)
	sumLen := int(binary.BigEndian.Uint32(orig[n-4:]))
	indexStart := n - 8 - sumLen - int(binary.BigEndian.Uint32(orig[n-8-sumLen:]))
	var offsets []int
	for off := 0; off < indexStart; off += 61 {
		offsets = append(offsets, off)
	}
	for off := indexStart; off < n; off += 7 {
		offsets = append(offsets, off)
	}
	for _, off := range offsets {
		// A copy each time: the damage is done behind Badger's back, and the test
		// commits.
		dir := copyDir(t, dir)
		s := openDir(t, dir, WithLogger(nil))
		flip(t, filepath.Join(dir, filepath.Base(sst)), int64(off), uint(off%8))
		readWhatIsLeft(t, s)
		s.Close()
	}
}

// copyDir copies a closed store's directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// readWhatIsLeft reads back what commitTurns committed, failing the test only if a
// read returns data other than what was committed.
func readWhatIsLeft(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	recs, _ := s.Records(ctx, "ns", "s")
	for _, r := range recs {
		var i int
		if _, err := fmt.Sscanf(r.ID, "turn-%d", &i); err != nil || !bytes.Equal(r.Data, turnData(i)) {
			t.Fatalf("Records returned %s %q, which was never committed", r.ID, r.Data)
		}
	}
	if head, err := s.Head(ctx, "ns", "s"); err == nil && head.ID != fmt.Sprintf("turn-%02d", corruptTurns-1) {
		t.Fatalf("Head = %s, an older turn, without an error", head.ID)
	}
	for i := range corruptTurns {
		b, err := s.Blob(ctx, "ns", fmt.Sprintf("blob-%02d", i))
		if want := fmt.Sprintf("blob of turn %02d", i); err == nil && string(b) != want {
			t.Fatalf("Blob %d = %q, want %q", i, b, want)
		}
	}
	if b, err := s.Blob(ctx, "ns", "large"); err == nil && !bytes.Equal(b, largeBlob()) {
		t.Fatal("the large blob reads back different, without an error")
	}
	// A commit reads too.
	next := store.Record{ID: "next", Session: "s", Parent: fmt.Sprintf("turn-%02d", corruptTurns-1), Turn: corruptTurns}
	if err := s.Commit(ctx, "ns", next, nil); err != nil && !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Commit: %v", err)
	}
}
