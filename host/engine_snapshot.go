package host

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/terrarium-ai/terrarium/host/internal/engine"
)

// snapshot is a guest's state after its first call: its linear memory and its mutable
// globals (which package instrument exports). Restoring it forgets every call since,
// the sessions it served included, without the cost of a new instance (a Go guest's
// runtime starting again).
//
// What a snapshot cannot restore is a memory that grew: WebAssembly memories do not
// shrink, and a Go guest's allocator, put back to its earlier state, would grow the
// memory again past what it already has. Such an instance is not reset; its caller
// makes a new one.
type snapshot struct {
	memory  []byte
	globals []uint64
	handles []api.MutableGlobal
}

// take snapshots the guest. Globals of types without a uint64 form (vectors,
// references) make the instance not resettable; no Go or C guest has them.
func (i *nativeInstance) take() *snapshot {
	mem := i.guest.Memory()
	if mem == nil {
		return nil
	}
	s := &snapshot{memory: bytes.Clone(memoryOf(mem))}
	for _, name := range i.module.globals {
		g, ok := i.guest.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			return nil
		}
		switch g.Type() {
		case api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32, api.ValueTypeF64:
		default:
			return nil
		}
		s.handles = append(s.handles, g)
		s.globals = append(s.globals, g.Get())
	}
	return s
}

// Reset implements engine.Instance.
func (i *nativeInstance) Reset(ctx context.Context) error {
	s := i.snapshot
	if s == nil {
		return engine.ErrNoReset
	}
	i.memory.enter()
	defer i.memory.leave()
	mem := i.guest.Memory()
	if size := mem.Size(); size != uint32(len(s.memory)) {
		return fmt.Errorf("%w: its memory grew from %d to %d bytes since its first call", engine.ErrNoReset, len(s.memory), size)
	}
	copy(memoryOf(mem), s.memory)
	for j, g := range s.handles {
		g.Set(s.globals[j])
	}
	i.kernel.scrub()
	return nil
}
