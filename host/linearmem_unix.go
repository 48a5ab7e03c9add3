//go:build linux || darwin

package host

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// arena holds the linear memories of one instance (its guest's and its kernel's) off
// the Go heap. Each memory reserves the plugin's whole memory limit as address space
// when it is made and makes pages readable and writable as the memory grows: growing
// moves and copies nothing (wazero's own memories are Go slices, copied whole by
// append when their capacity runs out, which a Go guest's heap does in steps over its
// first thousand calls), the collector neither counts nor scans them, and closing the
// instance gives them back to the system at once.
//
// Unmapping a memory that a guest or the host still reads faults the whole process,
// where a Go slice would merely outlive its module. wazero frees an instance's
// memories when the instance is closed, and closing the plugin closes its instances
// even while they run (the guest stops at its next yield, some instructions later).
// So the instance brackets whatever touches its memories with enter and leave, and a
// memory freed in between is unmapped by the leave.
type arena struct {
	mu      sync.Mutex
	using   int        // enters not yet left
	pending []*mapping // freed while in use, unmapped at the last leave
}

// newArena returns the arena of a new instance.
func newArena() *arena { return &arena{} }

// allocator returns what makes the arena's memories, for
// experimental.WithMemoryAllocator; nil if a is. The memories it makes start with
// data, if it is not nil.
func (a *arena) allocator(data *dataImage) experimental.MemoryAllocator {
	if a == nil {
		return nil
	}
	return experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		return a.allocate(data, max)
	})
}

// enter and leave bracket the use of the memories; a nil arena (memories on the Go
// heap) needs neither.
func (a *arena) enter() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.using++
	a.mu.Unlock()
}

func (a *arena) leave() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.using--; a.using == 0 {
		for _, m := range a.pending {
			m.unmap()
		}
		a.pending = nil
	}
}

// liveMappings counts the memories reserved and not yet unmapped, for the tests.
var liveMappings atomic.Int64

// allocate makes a memory starting with data (if not nil) that may grow to max bytes
// (the module's maximum or the plugin's limit, whichever is less). If the address
// space cannot be had, the memory is a Go slice as wazero would make it.
func (a *arena) allocate(data *dataImage, max uint64) experimental.LinearMemory {
	if max == 0 {
		return &heapMemory{data: data}
	}
	region, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return &heapMemory{max: max, data: data}
	}
	liveMappings.Add(1)
	m := &mapping{arena: a, region: region, data: data}
	if data != nil && mapData(region, data) {
		m.data = nil
	}
	return m
}

// mapData maps the file of data over the start of region, copy-on-write and
// inaccessible until Reallocate makes it readable, and reports whether it did.
func mapData(region []byte, data *dataImage) bool {
	if data.file == nil {
		return false
	}
	st, err := data.file.Stat()
	if err != nil || st.Size() > int64(len(region)) {
		return false
	}
	conn, err := data.file.SyscallConn()
	if err != nil {
		return false
	}
	// Control holds the file open: the module closing it cannot slip another file
	// under the descriptor.
	var mapErr error
	err = conn.Control(func(fd uintptr) {
		_, mapErr = unix.MmapPtr(int(fd), 0, unsafe.Pointer(&region[0]), uintptr(st.Size()), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	})
	return err == nil && mapErr == nil
}

// mapping is a linear memory in a region of address space reserved whole, readable
// and writable up to committed bytes.
type mapping struct {
	arena     *arena
	region    []byte
	committed int
	data      *dataImage // to copy in at the first Reallocate; nil if mapped, or none
}

// Reallocate implements experimental.LinearMemory: it returns the first size bytes
// of the region, or nil (the guest's memory.grow fails) past the region or if the
// system has no memory to back them.
func (m *mapping) Reallocate(size uint64) []byte {
	if size > uint64(len(m.region)) {
		return nil
	}
	if n := int(size); n > m.committed {
		// Sizes are whole WebAssembly pages (64 KiB), so whole system pages too.
		if err := unix.Mprotect(m.region[m.committed:n], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = n
	}
	if m.data != nil {
		if m.data.fill(m.region[:size]) != nil {
			return nil
		}
		m.data = nil
	}
	return m.region[:size:size]
}

// Free implements experimental.LinearMemory. wazero calls it when it closes the
// memory's module.
func (m *mapping) Free() {
	a := m.arena
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.using > 0 {
		a.pending = append(a.pending, m)
		return
	}
	m.unmap()
}

func (m *mapping) unmap() {
	// Munmap fails only for a slice it did not map; region is one it did.
	_ = unix.Munmap(m.region)
	m.region = nil
	liveMappings.Add(-1)
}

// heapMemory is a linear memory on the Go heap, the arena's fallback.
type heapMemory struct {
	buf  []byte
	max  uint64
	data *dataImage // to copy in at the first Reallocate, or nil
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if n := int(size); n > len(m.buf) {
		m.buf = append(m.buf, make([]byte, n-len(m.buf))...)
	}
	if m.data != nil {
		if m.data.fill(m.buf) != nil {
			return nil
		}
		m.data = nil
	}
	return m.buf[:size:size]
}

func (m *heapMemory) Free() { m.buf = nil }

// mapReadOnly maps the whole of f shared and read-only, unmapped once f is
// unreachable.
func mapReadOnly(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 || int64(int(st.Size())) != st.Size() {
		return nil, fmt.Errorf("%s: %d bytes, nothing to map", f.Name(), st.Size())
	}
	view, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", f.Name(), err)
	}
	runtime.AddCleanup(f, func(view []byte) { unix.Munmap(view) }, view)
	return view, nil
}
