// Command broken is the conformance suite's test fixture: a plugin written straight on
// the Extism kernel that misbehaves in one way per mode, the "mode" config value. Each
// mode is a failure kind the suite must report.
package main

import (
	"encoding/binary"
	"encoding/json"
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

//go:wasmimport terrarium:host/v1 state_set
func stateSet(state uint64) uint64

func input() []byte {
	b := make([]byte, inputLength())
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

func output(v any) int32 {
	b, _ := json.Marshal(v)
	outputSet(block(b), uint64(len(b)))
	return 0
}

func fail(code, msg string) int32 {
	b, _ := json.Marshal(map[string]string{"code": code, "message": msg})
	errorSet(block(b))
	return 1
}

func mode() string {
	res := read(configGet(block([]byte("mode"))))
	if len(res) > 0 && res[0] == 0 {
		return string(res[1:])
	}
	return ""
}

var intInput = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"n": map[string]any{"type": "integer"}},
	"required":             []any{"n"},
	"additionalProperties": false,
}

//go:wasmexport terrarium_describe
func describe() int32 {
	m := mode()
	tool := map[string]any{"name": "t", "description": "a tool", "inputSchema": intInput, "outputSchema": map[string]any{"type": "integer"}}
	d := map[string]any{"abi": 1, "name": "broken", "version": "0.0.1", "tools": []any{tool}}
	switch m {
	case "abi":
		d["abi"] = 99
	case "dupnames":
		d["tools"] = []any{tool, tool}
	case "badschema":
		tool["inputSchema"] = map[string]any{"type": 5}
	case "badpoint":
		d["handlers"] = []any{map[string]any{"name": "h", "points": []any{"midnight"}}}
	case "badcaps":
		d["capabilities"] = map[string]any{"state": "root"}
	case "liar":
		d["models"] = []any{map[string]any{"name": "m", "info": map[string]any{"supports": map[string]any{
			"multiturn": true, "tools": true, "toolChoice": true, "output": []any{"text", "json"}}}}}
	case "baddirective", "badstate":
		d["handlers"] = []any{map[string]any{"name": "h", "points": []any{"turnStart"}}}
		d["capabilities"] = map[string]any{"state": "write", "stateSchema": map[string]any{
			"type": "object", "properties": map[string]any{"profile": map[string]any{"type": "object"}}}}
	}
	return output(d)
}

var sink [][]byte

//go:wasmexport terrarium_call_tool
func callTool() int32 {
	m := mode()
	raw := input()
	var in struct {
		Tool  string         `json:"tool"`
		Input map[string]any `json:"input"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		if m == "trap" {
			// Crash instead of answering: nothing recovers a panic in a goroutine.
			go func() { panic("broken: cannot parse my input") }()
			time.Sleep(time.Second)
		}
		return fail("invalid_input", err.Error())
	}
	if in.Tool != "t" {
		return fail("not_found", "no tool "+in.Tool)
	}
	switch m {
	case "acceptsinvalid":
		return output(map[string]any{"output": 1})
	case "badoutput":
		if _, ok := in.Input["n"].(float64); ok {
			return output(map[string]any{"output": "a string, though the schema says integer"})
		}
	case "slow":
		for {
			time.Sleep(time.Millisecond)
		}
	case "memhog":
		for {
			sink = append(sink, make([]byte, 8<<20))
		}
	}
	n, ok := in.Input["n"].(float64)
	if !ok || len(in.Input) != 1 || n != float64(int64(n)) {
		return fail("invalid_input", "want {\"n\": integer}")
	}
	return output(map[string]any{"output": int64(n) * 2})
}

//go:wasmexport terrarium_generate
func generate() int32 {
	if !strings.HasPrefix(string(input()), "{") {
		return fail("invalid_input", "not JSON")
	}
	// The liar claims tools and JSON output, and always just says no.
	return output(map[string]any{"message": map[string]any{"role": "model", "content": []any{map[string]any{"text": "no"}}}, "finishReason": "stop"})
}

//go:wasmexport terrarium_handle
func handle() int32 {
	if !strings.HasPrefix(string(input()), "{") {
		return fail("invalid_input", "not JSON")
	}
	switch mode() {
	case "baddirective":
		return output(map[string]any{"action": "explode"})
	case "badstate":
		stateSet(block([]byte(`{"profile": 42}`)))
	}
	return output(map[string]any{"action": "continue"})
}

func main() {}
