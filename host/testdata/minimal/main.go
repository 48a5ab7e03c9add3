// Command minimal is the smallest Go plugin the host loads: it describes itself, with
// no tools, through the kernel's imports alone, without the SDK or encoding/json. The
// cold-start benchmarks load it to show what Go's runtime costs by itself.
package main

//go:wasmimport extism:host/env alloc
func alloc(n uint64) uint64

//go:wasmimport extism:host/env store_u8
func storeU8(offset uint64, v uint32)

//go:wasmimport extism:host/env output_set
func outputSet(offset, n uint64)

//go:wasmexport terrarium_describe
func describe() int32 {
	out := `{"abi":1,"name":"minimal","version":"1.0.0"}`
	off := alloc(uint64(len(out)))
	for i := range len(out) {
		storeU8(off+uint64(i), uint32(out[i]))
	}
	outputSet(off, uint64(len(out)))
	return 0
}

func main() {}
