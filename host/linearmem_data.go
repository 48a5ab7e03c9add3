package host

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// dataImage is the initial contents of a module's memory (instrument.Data), which the
// rewritten module's data segments no longer carry: every instance's memory must
// start with it. A Go module's is megabytes, read-only mostly (strings, type data,
// function tables). Where the system allows, it is a sealed file in memory that each
// instance's memory maps copy-on-write (linearmem_unix.go): the pages an instance only
// reads are the file's, resident once for every instance of the module. Elsewhere it
// is copied into each memory, as wazero would have copied the segments.
type dataImage struct {
	file *os.File // a memfd holding the contents, or nil
	// view is the contents followed by zeros to a whole number of pages: the file
	// mapped shared and read-only (the same pages as the instances'), or a Go slice.
	// Snapshots refer to its pages rather than copy them.
	view []byte
	size int // the length of the contents
}

// newDataImage returns the image of data, in a memory file if share and the system
// allows; nil if data is.
func newDataImage(data []byte, share bool) *dataImage {
	if data == nil {
		return nil
	}
	if share {
		if f, view, err := memfd(data); err == nil {
			return &dataImage{file: f, view: view, size: len(data)}
		}
	}
	page := os.Getpagesize()
	view := make([]byte, (len(data)+page-1)/page*page)
	copy(view, data)
	return &dataImage{view: view, size: len(data)}
}

// openDataImage returns the image kept in f (the cache's dataFile, a whole number of
// pages), which it takes over: mapped if share and the system allows rather than read,
// its pages the page cache's, with nothing to copy or allocate.
func openDataImage(f *os.File, share bool) (*dataImage, error) {
	if share {
		if view, err := mapReadOnly(f); err == nil {
			return &dataImage{file: f, view: view, size: len(view)}, nil
		}
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("the module's data: %w", err)
	}
	return newDataImage(data, share), nil
}

// mapOrRead returns the contents of the file at path, mapped if the system allows,
// and the file they are a mapping of (nil if they were read): they last until it is
// closed and unreachable.
func mapOrRead(path string) ([]byte, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if b, err := mapReadOnly(f); err == nil {
		return b, f, nil
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return b, nil, err
}

// fill copies the image to the start of mem.
func (d *dataImage) fill(mem []byte) error {
	if len(mem) < d.size {
		return fmt.Errorf("the module's data (%d bytes) exceeds its memory (%d bytes)", d.size, len(mem))
	}
	copy(mem, d.view[:d.size])
	runtime.KeepAlive(d) // its cleanup unmaps view
	return nil
}

// pages returns the view, or nil if d is.
func (d *dataImage) pages() []byte {
	if d == nil {
		return nil
	}
	return d.view
}

// close releases the file; the memories mapping it keep their pages, and the view
// lasts as long as d.
func (d *dataImage) close() error {
	if d == nil || d.file == nil {
		return nil
	}
	return d.file.Close()
}
