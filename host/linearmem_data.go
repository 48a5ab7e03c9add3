package host

import (
	"fmt"
	"os"
)

// dataImage is the initial contents of a module's memory (instrument.Data), which the
// rewritten module's data segments no longer carry: every instance's memory must
// start with it. A Go module's is megabytes, read-only mostly (strings, type data,
// function tables). Where the system allows, it is a sealed file in memory that each
// instance's memory maps copy-on-write (linearmem_unix.go): the pages an instance only
// reads are the file's, resident once for every instance of the module. Elsewhere it
// is copied into each memory, as wazero would have copied the segments.
type dataImage struct {
	bytes []byte   // the contents, nil where file holds them
	file  *os.File // a memfd holding the contents, its length rounded up to whole pages
	size  int      // the length of the contents
}

// newDataImage returns the image of data, in a memory file if share and the system
// allows; nil if data is.
func newDataImage(data []byte, share bool) *dataImage {
	if data == nil {
		return nil
	}
	if share {
		if f, err := memfd(data); err == nil {
			return &dataImage{file: f, size: len(data)}
		}
	}
	return &dataImage{bytes: data, size: len(data)}
}

// fill copies the image to the start of mem.
func (d *dataImage) fill(mem []byte) error {
	if len(mem) < d.size {
		return fmt.Errorf("the module's data (%d bytes) exceeds its memory (%d bytes)", d.size, len(mem))
	}
	if d.file == nil {
		copy(mem, d.bytes)
		return nil
	}
	// ReadAt fails, rather than reading another file, once the module has closed it.
	if _, err := d.file.ReadAt(mem[:d.size], 0); err != nil {
		return fmt.Errorf("reading the module's data: %w", err)
	}
	return nil
}

// close releases the file; memories mapping it keep their pages.
func (d *dataImage) close() error {
	if d == nil || d.file == nil {
		return nil
	}
	return d.file.Close()
}
