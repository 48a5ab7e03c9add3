package host

import (
	"bytes"
	"testing"
)

// TestSnapshotRestoresEveryPage: restore puts back what a snapshot kept, in pages it
// kept and in pages of zeros it did not, whatever changed and wherever.
func TestSnapshotRestoresEveryPage(t *testing.T) {
	mem := make([]byte, 4*snapshotPage)
	copy(mem[snapshotPage:], "a page with data")
	mem[3*snapshotPage-1] = 9 // the last byte of the third page
	want := bytes.Clone(mem)
	var s snapshot
	s.keep(mem)
	if kept := len(bytes.Join(s.pages, nil)); kept != 2*snapshotPage {
		t.Errorf("the snapshot keeps %d bytes, want the 2 pages that are not zeros", kept)
	}
	for _, off := range []int{0, snapshotPage + 3, 3*snapshotPage - 1, 4*snapshotPage - 1} {
		mem[off]++
	}
	s.restore(mem)
	if !bytes.Equal(mem, want) {
		t.Error("the memory differs from its snapshot after restore")
	}
}

// TestZeroPagesZeroesEveryByte: zeroPages leaves no byte set, in any page.
func TestZeroPagesZeroesEveryByte(t *testing.T) {
	mem := make([]byte, 3*snapshotPage)
	mem[0], mem[snapshotPage+7], mem[len(mem)-1] = 1, 2, 3
	zeroPages(mem)
	if n := bytes.Count(mem, []byte{0}); n != len(mem) {
		t.Errorf("%d bytes are still set", len(mem)-n)
	}
}
