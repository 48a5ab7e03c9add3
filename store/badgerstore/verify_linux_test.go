package badgerstore

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
	"golang.org/x/sys/unix"
)

// A damaged table's mapping is unmapped exactly once: never a second time, when its
// range may already be another component's (which took that component's memory away
// and crashed about 3 of 1,000 opens of a damaged store), and never not at all.
//
// The other component here is a goroutine that maps, again and again, a range the
// size of the table, where the kernel puts it whenever the table's range is free,
// and checks that its mapping is still there before letting it go. A second unmap of
// the table's range takes one of them within a few hundred verifications.
func TestDamagedTableUnmappedOnce(t *testing.T) {
	dir := closedStore(t)
	sst := onlyFile(t, dir, ".sst")
	orig, err := os.ReadFile(sst)
	if err != nil {
		t.Fatal(err)
	}
	id, ok := table.ParseFileID(sst)
	if !ok {
		t.Fatalf("%s is not a table's name", sst)
	}
	opt := badger.DefaultOptions(dir)
	tm := badger.TableManifest{Compression: opt.Compression}

	n := len(orig)
	sumLen := int(binary.BigEndian.Uint32(orig[n-4:]))
	damage := map[string]int{
		"block": 40,                 // fails its checksum: Badger's OpenTable unmaps it
		"index": n - 8 - sumLen - 3, // Badger panics or fails: OpenTable does not
	}
	for name, off := range damage {
		t.Run(name, func(t *testing.T) {
			flip(t, sst, int64(off), 2)
			defer func() {
				if err := os.WriteFile(sst, orig, 0o600); err != nil {
					t.Fatal(err)
				}
			}()

			var stop atomic.Bool
			var lost atomic.Int64
			var wg sync.WaitGroup
			wg.Go(func() {
				for !stop.Load() {
					b, err := unix.Mmap(-1, 0, n, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
					if err != nil {
						t.Error(err)
						return
					}
					for range 50 {
						// msync of a range no longer mapped fails with ENOMEM.
						if err := unix.Msync(b, unix.MS_ASYNC); errors.Is(err, unix.ENOMEM) {
							lost.Add(1)
							return // not ours to unmap any more
						}
					}
					unix.Munmap(b)
				}
			})
			for range 2000 {
				if lost.Load() != 0 {
					break
				}
				if err := verifyTable(sst, id, tm, opt); err == nil {
					t.Fatal("verifyTable of a damaged table: no error")
				}
			}
			stop.Store(true)
			wg.Wait()
			if lost.Load() != 0 {
				t.Fatal("verifying a damaged table unmapped another component's memory")
			}
			maps, err := os.ReadFile("/proc/self/maps")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(maps), filepath.Base(sst)) {
				t.Fatalf("%s is still mapped after its verification", filepath.Base(sst))
			}
		})
	}
}
