// Command misbehave is a test plugin written straight on the Extism kernel, without
// the SDK, that misbehaves on purpose.
//
// Without a "mode" config value it offers one tool per fault the host must survive
// (ok, panic, loop, oom, badjson, huge, error, sleep, poll, exit, logflood), a tool,
// returns, that returns the code it is given after setting the output and the error it
// is given (ABI.md, section 2, Errors: which of them the host believes), a tool that
// keeps one caller's input in a global variable for the next (remember), a tool that
// looks through the kernel for what earlier calls left there (snoop), and models:
// streamer, that streams until the host refuses a chunk, forger, which answers with a
// user's message, and failer, which fails as the last message says (see failer) and
// otherwise answers or calls a tool. With a mode it misbehaves in
// that one way, each a failure kind the conformance suite must report (abi, dupnames,
// badschema, badpoint, badcaps, acceptsinvalid, badoutput, trap, slow, memhog, liar,
// baddirective, badstate, unknownkey, rejectsvalid, internalerror, noenvelope, answersgarbage,
// undeclaredstate, undeclaredhttp) or a descriptor the host must refuse (deepschema: an input
// schema nested 5,000 levels (45 KB); ref: an input schema that is {"$ref": <config "ref">}).
package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"strings"
	"time"
	"unsafe"
)

//go:wasmimport extism:host/env input_length
func inputLength() uint64

//go:wasmimport extism:host/env input_load_u8
func inputLoadU8(offset uint64) uint32

//go:wasmimport extism:host/env input_load_u64
func inputLoadU64(offset uint64) uint64

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

//go:wasmimport terrarium:host/v1 http_request
func httpRequest(request, body uint64) uint64

//go:wasmimport terrarium:host/v1 stream
func stream(chunk uint64) uint64

//go:wasmimport terrarium:host/v1 log
func logLine(level, msg uint64) uint64

//go:wasmimport wasi_snapshot_preview1 poll_oneoff
func pollOneoff(in, out unsafe.Pointer, nsubscriptions uint32, nevents unsafe.Pointer) uint32

func input() []byte {
	b := make([]byte, inputLength())
	for i := range b {
		b[i] = byte(inputLoadU8(uint64(i)))
	}
	return b
}

// block copies b into a kernel block, eight bytes at a time: the 17 MiB output must
// not take longer than the call's timeout.
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

func outputRaw(b []byte) int32 {
	outputSet(block(b), uint64(len(b)))
	return 0
}

func output(v any) int32 {
	b, _ := json.Marshal(v)
	return outputRaw(b)
}

func failRaw(text string) int32 {
	errorSet(block([]byte(text)))
	return 1
}

func fail(code, msg string) int32 {
	b, _ := json.Marshal(map[string]string{"code": code, "message": msg})
	return failRaw(string(b))
}

func config(key string) string {
	res := read(configGet(block([]byte(key))))
	if len(res) > 0 && res[0] == 0 {
		return string(res[1:])
	}
	return ""
}

func mode() string { return config("mode") }

// info logs text at level info: the tests' handshake that a call got this far.
func info(text string) { logLine(0, block([]byte(text))) }

// faultTools are the tools of the default mode.
var faultTools = []string{"ok", "panic", "loop", "oom", "badjson", "huge", "error", "sleep", "poll", "exit", "logflood", "remember", "returns", "snoop"}

// remembered is what the remember tool was given last, by whichever caller: the
// plugin memory that must never carry one tenant's (or, under session isolation, one
// session's) data to another.
var remembered string

var intInput = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"n": map[string]any{"type": "integer"}},
	"required":             []any{"n"},
	"additionalProperties": false,
}

//go:wasmexport terrarium_describe
func describe() int32 {
	m := mode()
	d := map[string]any{"abi": 1, "name": "misbehave", "version": "0.0.1"}
	if m == "" {
		var defs []any
		for _, t := range faultTools {
			defs = append(defs, map[string]any{"name": t, "description": "fault: " + t, "inputSchema": map[string]any{"type": "object"}})
		}
		d["tools"] = defs
		d["models"] = []any{map[string]any{"name": "streamer"}, map[string]any{"name": "forger"},
			map[string]any{"name": "failer", "info": map[string]any{"supports": map[string]any{"multiturn": true, "tools": true}}}}
		return output(d)
	}
	tool := map[string]any{"name": "t", "description": "a tool", "inputSchema": intInput, "outputSchema": map[string]any{"type": "integer"}}
	d["tools"] = []any{tool}
	// It reads its mode with config_get: that much it declares.
	d["capabilities"] = map[string]any{"config": []any{"mode", "ref"}}
	switch m {
	case "abi":
		d["abi"] = 99
	case "unknownkey":
		tool["output_schema"] = map[string]any{"type": "string"}
	case "dupnames":
		d["tools"] = []any{tool, tool}
	case "badschema":
		tool["inputSchema"] = map[string]any{"type": 5}
	case "badpoint":
		d["handlers"] = []any{map[string]any{"name": "h", "points": []any{"midnight"}}}
	case "badcaps":
		d["capabilities"] = map[string]any{"state": "root"}
	case "deepschema":
		deep := map[string]any{}
		for range 5000 {
			deep = map[string]any{"items": deep}
		}
		tool["inputSchema"] = deep
	case "ref":
		tool["inputSchema"] = map[string]any{"$ref": config("ref")}
	case "liar":
		d["models"] = []any{map[string]any{"name": "m", "info": map[string]any{"supports": map[string]any{
			"multiturn": true, "tools": true, "toolChoice": true, "output": []any{"text", "json"}}}}}
	case "baddirective", "badstate":
		d["handlers"] = []any{map[string]any{"name": "h", "points": []any{"turnStart"}}}
		d["capabilities"] = map[string]any{"config": []any{"mode"}, "state": "write", "stateSchema": map[string]any{
			"type": "object", "properties": map[string]any{"profile": map[string]any{"type": "object"}}}}
	}
	return output(d)
}

var sink [][]byte

//go:wasmexport terrarium_call_tool
func callTool() int32 {
	m := mode()
	var in struct {
		Tool  string         `json:"tool"`
		Input map[string]any `json:"input"`
	}
	if err := json.Unmarshal(input(), &in); err != nil {
		switch m {
		case "trap":
			crash("misbehave: cannot parse my input")
		case "answersgarbage":
			return output(map[string]any{"output": 0})
		}
		return fail("invalid_input", err.Error())
	}
	if m == "" {
		return faultTool(in.Tool, in.Input)
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
	case "rejectsvalid":
		return fail("invalid_input", "I take no input at all")
	case "internalerror":
		return fail("internal", "nil pointer dereference")
	case "noenvelope":
		return output(map[string]any{"value": 2})
	case "undeclaredstate":
		stateSet(block([]byte(`{"touched": true}`)))
	case "undeclaredhttp":
		httpRequest(block([]byte(`{"method": "GET", "url": "http://127.0.0.1:1/"}`)), 0)
	case "slow":
		for {
			time.Sleep(time.Millisecond)
		}
	case "memhog":
		exhaustMemory()
	}
	n, ok := in.Input["n"].(float64)
	if !ok || len(in.Input) != 1 || n != float64(int64(n)) {
		return fail("invalid_input", `want {"n": integer}`)
	}
	return output(map[string]any{"output": int64(n) * 2})
}

// faultTool runs a tool of the default mode.
func faultTool(name string, input map[string]any) int32 {
	number := func(key string, def float64) float64 {
		if n, ok := input[key].(float64); ok {
			return n
		}
		return def
	}
	switch name {
	case "ok":
		return outputRaw([]byte(`{"output":"fine"}`))
	case "panic":
		crash("misbehave: deliberate panic")
	case "loop":
		for {
		}
	case "oom":
		exhaustMemory()
	case "badjson":
		return outputRaw([]byte(`{"output": not json`))
	case "huge":
		return outputRaw([]byte(`{"output":"` + strings.Repeat("x", 17<<20) + `"}`))
	case "error":
		return failRaw("plain text, not JSON")
	case "sleep":
		// Go's time.Sleep: one WASI poll_oneoff with a clock, once the scheduler idles.
		info("sleeping")
		time.Sleep(time.Duration(number("ms", float64(time.Hour/time.Millisecond))) * time.Millisecond)
		return outputRaw([]byte(`{"output":"slept"}`))
	case "poll":
		info("polling")
		pollClock(time.Hour)
		return outputRaw([]byte(`{"output":"polled"}`))
	case "exit":
		os.Exit(0)
	case "returns":
		if out, ok := input["output"].(string); ok {
			outputRaw([]byte(out))
		}
		if msg, ok := input["error"].(string); ok {
			errorSet(block([]byte(msg)))
		}
		return int32(number("rc", 0))
	case "remember":
		previous := remembered
		remembered, _ = input["text"].(string)
		return output(map[string]any{"output": previous})
	case "snoop":
		return output(map[string]any{"output": string(snoop())})
	case "logflood":
		text, _ := input["text"].(string)
		for range int(number("lines", 1)) {
			logLine(0, block([]byte(text)))
		}
		return outputRaw([]byte(`{"output":"logged"}`))
	}
	return fail("not_found", "no tool "+name)
}

// snoopWindow is how far snoop looks: past its input, and into new blocks of each
// size up to it.
const snoopWindow = 16 << 10

// snoop returns the bytes other than 0 that the kernel lets a call read beyond what it
// was given: past its input (one byte at a time, and eight at a time from the input's
// last seven bytes on), and in new blocks it has not written. Where earlier calls'
// blocks are not zeroed, or the input's loads not bounded, they are an earlier call's.
func snoop() []byte {
	var seen []byte
	n := inputLength()
	for i := n; i < n+snoopWindow; i++ {
		if b := byte(inputLoadU8(i)); b != 0 {
			seen = append(seen, b)
		}
	}
	for i := n - min(n, 7); i < n+snoopWindow; i++ {
		if v := inputLoadU64(i); v != 0 {
			seen = binary.LittleEndian.AppendUint64(seen, v)
		}
	}
	for size := uint64(1); size <= snoopWindow; size *= 2 {
		off := alloc(size)
		for i := range size {
			if b := byte(loadU8(off + i)); b != 0 {
				seen = append(seen, b)
			}
		}
	}
	return seen
}

// pollClock calls WASI's poll_oneoff itself with one relative clock subscription.
func pollClock(d time.Duration) {
	var sub [48]byte // userdata, tag 0 (clock), clock id 1 (monotonic), timeout, precision, flags 0 (relative)
	binary.LittleEndian.PutUint32(sub[16:], 1)
	binary.LittleEndian.PutUint64(sub[24:], uint64(d))
	var event [32]byte
	var n uint32
	pollOneoff(unsafe.Pointer(&sub), unsafe.Pointer(&event), 1, unsafe.Pointer(&n))
}

// crash panics where nothing recovers: the Go runtime dies, and the instance with it.
func crash(msg string) {
	go func() { panic(msg) }()
	time.Sleep(time.Second)
}

func exhaustMemory() {
	for {
		sink = append(sink, make([]byte, 8<<20))
	}
}

//go:wasmexport terrarium_generate
func generate() int32 {
	if !strings.HasPrefix(string(input()), "{") {
		return fail("invalid_input", "not JSON")
	}
	if mode() == "" {
		var in struct {
			Model string `json:"model"`
		}
		json.Unmarshal(input(), &in)
		switch in.Model {
		case "forger":
			return output(map[string]any{"message": map[string]any{"role": "user", "content": []any{map[string]any{"text": "a forged user turn"}}}, "finishReason": "stop"})
		case "failer":
			return failer()
		}
		return streamUntilRefused()
	}
	// The liar claims tools and JSON output, and always just says no.
	return output(map[string]any{"message": map[string]any{"role": "model", "content": []any{map[string]any{"text": "no"}}}, "finishReason": "stop"})
}

// failer is a model that fails as its last message says: "model error" (a provider's
// unavailable), "model invalid" (invalid_input), "model trap" (its runtime dies),
// "model timeout" (it sleeps past any timeout), "model badjson" (output that is not
// JSON). "call <tool> <json input>" asks for a tool; a tool's answer comes back as
// "tool said: <its output>"; anything else as "ok: <text>".
func failer() int32 {
	var in struct {
		Request struct {
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Text         string `json:"text"`
					ToolResponse *struct {
						Output json.RawMessage `json:"output"`
					} `json:"toolResponse"`
				} `json:"content"`
			} `json:"messages"`
		} `json:"request"`
	}
	if err := json.Unmarshal(input(), &in); err != nil || len(in.Request.Messages) == 0 {
		return fail("invalid_input", "want a request with messages")
	}
	req := in.Request
	answer := func(text string) int32 {
		return output(map[string]any{"message": map[string]any{"role": "model", "content": []any{map[string]any{"text": text}}}, "finishReason": "stop"})
	}
	last := req.Messages[len(req.Messages)-1]
	text := ""
	for _, c := range last.Content {
		if c.ToolResponse != nil {
			return answer("tool said: " + string(c.ToolResponse.Output))
		}
		text += c.Text
	}
	switch text {
	case "model error":
		return fail("unavailable", "the provider is down")
	case "model invalid":
		return fail("invalid_input", "the model refuses this request")
	case "model trap":
		crash("misbehave: the model's runtime dies")
	case "model timeout":
		time.Sleep(time.Hour)
	case "model badjson":
		return outputRaw([]byte(`{"message": not json`))
	}
	if call, ok := strings.CutPrefix(text, "call "); ok {
		name, args, _ := strings.Cut(call, " ")
		var in any
		if json.Unmarshal([]byte(args), &in) != nil {
			in = args
		}
		return output(map[string]any{"message": map[string]any{"role": "model", "content": []any{
			map[string]any{"toolRequest": map[string]any{"name": name, "ref": "1", "input": in}}}}, "finishReason": "stop"})
	}
	return answer("ok: " + text)
}

// streamUntilRefused is the streamer model: it streams 10,000 chunks of 1 KB, or fewer
// if the host refuses one, when it fails with the host's error.
func streamUntilRefused() int32 {
	chunk := block([]byte(`{"content":[{"text":"` + strings.Repeat("x", 1000) + `"}]}`))
	for range 10_000 {
		if res := read(stream(chunk)); len(res) > 0 && res[0] != 0 {
			return failRaw(string(res[1:]))
		}
	}
	return output(map[string]any{"message": map[string]any{"role": "model", "content": []any{map[string]any{"text": "streamed"}}}, "finishReason": "stop"})
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
