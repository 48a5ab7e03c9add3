//go:build !(linux || darwin)

package host

import (
	"errors"
	"os"

	"github.com/tetratelabs/wazero/experimental"
)

// arena is, off linux and darwin, nothing: linear memories are wazero's own, on the
// Go heap (linearmem_unix.go has the arena reserving them as address space).
type arena struct{}

func newArena() *arena { return nil }

func (*arena) allocator(*dataImage) experimental.MemoryAllocator { return nil }

func (*arena) enter() {}

func (*arena) leave() {}

// mapReadOnly fails: files are read rather than mapped here, and a module's data is
// copied into each memory.
func mapReadOnly(*os.File) ([]byte, error) {
	return nil, errors.New("no mapped module data on this system")
}
