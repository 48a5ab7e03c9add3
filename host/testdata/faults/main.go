// Command faults is a test plugin written without the SDK, straight on the Extism
// kernel, that misbehaves on purpose: each tool is one kind of fault the host must
// survive. Its descriptor's ABI version is the "abi" config value when granted.
package main

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

//go:wasmimport extism:host/env input_length
func inputLength() uint64

//go:wasmimport extism:host/env input_load_u8
func inputLoadU8(offset uint64) uint32

//go:wasmimport extism:host/env alloc
func alloc(n uint64) uint64

//go:wasmimport extism:host/env store_u8
func storeU8(offset uint64, v uint32)

//go:wasmimport extism:host/env store_u64
func storeU64(offset uint64, v uint64)

//go:wasmimport extism:host/env load_u8
func loadU8(offset uint64) uint32

//go:wasmimport extism:host/env length
func length(offset uint64) uint64

//go:wasmimport extism:host/env output_set
func outputSet(offset, n uint64)

//go:wasmimport extism:host/env error_set
func errorSet(offset uint64)

//go:wasmimport terrarium:host/v1 config_get
func configGet(key uint64) uint64

func input() []byte {
	n := inputLength()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(inputLoadU8(uint64(i)))
	}
	return b
}

func block(b []byte) uint64 {
	off := alloc(uint64(len(b)))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		storeU64(off+uint64(i), binary.LittleEndian.Uint64(b[i:]))
	}
	for ; i < len(b); i++ {
		storeU8(off+uint64(i), uint32(b[i]))
	}
	return off
}

func read(off uint64) []byte {
	b := make([]byte, length(off))
	for i := range b {
		b[i] = byte(loadU8(off + uint64(i)))
	}
	return b
}

func output(b []byte) int32 {
	outputSet(block(b), uint64(len(b)))
	return 0
}

func fail(msg string) int32 {
	errorSet(block([]byte(msg)))
	return 1
}

var tools = []string{"ok", "panic", "loop", "oom", "badjson", "huge", "error"}

//go:wasmexport terrarium_describe
func describe() int32 {
	version := 1
	if res := read(configGet(block([]byte("abi")))); len(res) > 0 && res[0] == 0 {
		version, _ = strconv.Atoi(string(res[1:]))
	}
	var defs []map[string]any
	for _, t := range tools {
		defs = append(defs, map[string]any{"name": t, "description": "fault: " + t, "inputSchema": map[string]any{"type": "object"}})
	}
	out, _ := json.Marshal(map[string]any{"abi": version, "name": "faults", "version": "0.0.1", "tools": defs})
	return output(out)
}

var sink [][]byte

//go:wasmexport terrarium_call_tool
func callTool() int32 {
	var in struct {
		Tool string `json:"tool"`
	}
	if err := json.Unmarshal(input(), &in); err != nil {
		return fail(`{"code":"invalid_input","message":"` + err.Error() + `"}`)
	}
	switch in.Tool {
	case "ok":
		return output([]byte(`{"output":"fine"}`))
	case "panic":
		// A panic nothing recovers: the Go runtime crashes and the instance with it.
		go func() { panic("faults: deliberate panic") }()
		time.Sleep(time.Second)
	case "loop":
		for {
		}
	case "oom":
		for {
			sink = append(sink, make([]byte, 16<<20))
		}
	case "badjson":
		return output([]byte(`{"output": not json`))
	case "huge":
		return output([]byte(`{"output":"` + strings.Repeat("x", 100<<20) + `"}`))
	case "error":
		return fail("plain text, not JSON")
	}
	return fail(`{"code":"not_found","message":"no tool ` + in.Tool + `"}`)
}

func main() {}
