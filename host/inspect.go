package host

import (
	"context"
	"fmt"
	"slices"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host/internal/instrument"
)

// Inspection is what a plugin is, without loading it: its size and hash, the functions
// it imports and exports, and its descriptor as it gave it (unchecked).
type Inspection struct {
	SHA256  string
	Size    int
	Imports []string // functions, as "module.name"
	Exports []string
	// Descriptor is nil when the plugin could not describe itself; DescribeErr says
	// why.
	Descriptor  *plugin.Descriptor
	DescribeErr error
	// Manifest is the manifest the plugin was described under, defaults filled in.
	Manifest Manifest
}

// Inspect compiles a plugin and asks it to describe itself, checking nothing: what
// `terrarium plugin inspect` prints and the conformance suite starts from. An error
// means the module could not even be compiled.
func (h *Host) Inspect(ctx context.Context, wasm []byte, m Manifest) (*Inspection, error) {
	in := &Inspection{Size: len(wasm)}
	imports, exports, err := instrument.Interface(wasm)
	if err != nil {
		return nil, fmt.Errorf("host: not a WebAssembly module: %w", err)
	}
	for _, imp := range imports {
		if imp.Kind == instrument.KindFunc {
			in.Imports = append(in.Imports, imp.String())
		}
	}
	in.Exports = exports
	slices.Sort(in.Imports)
	slices.Sort(in.Exports)

	p, err := h.prepare(ctx, wasm, m)
	if err != nil {
		in.SHA256 = sha256Hex(wasm)
		in.DescribeErr = err
		return in, nil
	}
	defer p.close(context.Background())
	in.SHA256, in.Manifest = p.sha256, p.manifest
	desc := p.desc
	in.Descriptor = &desc
	return in, nil
}
