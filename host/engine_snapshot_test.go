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
	s.keep(mem, nil)
	if kept := len(bytes.Join(s.pages, nil)); kept != 2*snapshotPage || s.own != kept {
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

// TestSnapshotRefersToModuleData: the pages still as the module's data has them are
// the module's, not copies, and restore puts them back when they change.
func TestSnapshotRefersToModuleData(t *testing.T) {
	data := bytes.Repeat([]byte("data"), snapshotPage/2) // two pages
	image := newDataImage(data, true)
	defer image.close()
	mem := make([]byte, 4*snapshotPage)
	if err := image.fill(mem); err != nil {
		t.Fatal(err)
	}
	mem[snapshotPage] = 'D' // the data's second page, changed before the snapshot
	mem[2*snapshotPage] = 1 // a page past the data
	want := bytes.Clone(mem)
	var s snapshot
	s.keep(mem, image)
	if s.own != 2*snapshotPage {
		t.Errorf("the snapshot keeps %d bytes, want the 2 pages neither zeros nor the module's", s.own)
	}
	mem[0], mem[snapshotPage+1], mem[2*snapshotPage+1], mem[4*snapshotPage-1] = 'x', 'y', 2, 3
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
