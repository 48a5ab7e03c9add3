// Command noexport is a test plugin that declares a tool but does not export
// terrarium_call_tool.
package main

//go:wasmimport extism:host/env alloc
func alloc(n uint64) uint64

//go:wasmimport extism:host/env store_u8
func storeU8(offset uint64, v uint32)

//go:wasmimport extism:host/env output_set
func outputSet(offset, n uint64)

//go:wasmexport terrarium_describe
func describe() int32 {
	out := []byte(`{"abi":1,"name":"noexport","tools":[{"name":"t","description":"declared, not exported"}]}`)
	off := alloc(uint64(len(out)))
	for i, c := range out {
		storeU8(off+uint64(i), uint32(c))
	}
	outputSet(off, uint64(len(out)))
	return 0
}

func main() {}
