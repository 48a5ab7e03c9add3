package sdk

import (
	"encoding/json"
	"fmt"
	"unsafe"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// maxChunk is the largest chunk or status a plugin may stream (ABI.md, section 4).
const maxChunk = 1 << 20

// hostArg is one parameter of a host function: a block holding data (none when data
// is empty: the offset 0), or a number.
type hostArg struct {
	data  []byte
	num   int64
	isNum bool
}

func blockArg(b []byte) hostArg { return hostArg{data: b} }

// textArg is a block holding s, without the copy []byte(s) would make (a KiB message
// is a KiB allocated, and in a wasm guest each allocation costs about a microsecond):
// a hostCaller only reads its arguments' data.
func textArg(s string) hostArg { return hostArg{data: unsafe.Slice(unsafe.StringData(s), len(s))} }

func numArg(n int64) hostArg { return hostArg{num: n, isNum: true} }

// hostArgs are the parameters of one host function call, at most two (ABI.md, section
// 3): args[:n]. They are an array passed by value because a slice passed through the
// hostCaller interface escapes, an allocation on every call.
type hostArgs struct {
	n    int
	args [2]hostArg
}

// hostCaller calls the host functions of plugin.HostModule. call returns the contents of
// the result block (tag byte first); the block and the argument blocks are freed. It
// only reads its arguments' data.
type hostCaller interface {
	call(fn string, args hostArgs) []byte
}

// host is the host the package's functions call: the real one in a wasip1 build, one
// that fails every call elsewhere. Tests replace it.
var host hostCaller = defaultHost()

// noHost is the host outside a plugin: every call fails.
type noHost struct{}

func (noHost) call(fn string, _ hostArgs) []byte {
	b, _ := json.Marshal(abi.Errorf(abi.CodeInternal, "sdk: %s: host functions are only available in a plugin (GOOS=wasip1)", fn))
	return append([]byte{plugin.ResultError}, b...)
}

// callHost calls a host function and returns the payload of its result block, or the
// error it holds.
func callHost(fn string, args ...hostArg) ([]byte, error) {
	var a hostArgs
	if len(args) > len(a.args) {
		panic(fmt.Sprintf("sdk: %s: %d arguments, more than a host function takes", fn, len(args)))
	}
	a.n = copy(a.args[:], args)
	return parseResult(fn, host.call(fn, a))
}

// parseResult splits a result block into its payload or its error (ABI.md, section 3).
func parseResult(fn string, block []byte) ([]byte, error) {
	if len(block) == 0 {
		return nil, abi.Errorf(abi.CodeInternal, "sdk: %s: the host returned an empty result block", fn)
	}
	switch block[0] {
	case plugin.ResultOK:
		return block[1:], nil
	case plugin.ResultError:
		return nil, plugin.DecodeError(string(block[1:]))
	}
	return nil, abi.Errorf(abi.CodeInternal, "sdk: %s: the result block starts with %d (want 0 or 1)", fn, block[0])
}

// callJSON encodes v as the one argument of a host function and returns its payload.
func callJSON(fn string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInternal, "sdk: %s: encoding the argument: %v", fn, err)
	}
	return callHost(fn, blockArg(b))
}

// decodePayload decodes a JSON payload into v; an empty payload leaves v unchanged.
func decodePayload(fn string, payload []byte, v any) error {
	if len(payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return abi.Errorf(abi.CodeInternal, "sdk: %s: decoding the result into %T: %v", fn, v, err)
	}
	return nil
}

// SessionID returns the ID of the session the current call is bound to. It fails with
// no_session outside a session.
func SessionID() (string, error) {
	b, err := callHost(plugin.FnSessionID)
	return string(b), err
}

// State returns the session's custom state decoded into T; null (no state yet) is T's
// zero value. It needs the state capability (read). A T that does not match the app's
// state type fails to decode with an internal error; map[string]any reads any state.
func State[T any]() (T, error) {
	var v T
	b, err := callHost(plugin.FnStateGet)
	if err != nil {
		return v, err
	}
	err = decodePayload(plugin.FnStateGet, b, &v)
	return v, err
}

// SetState replaces the session's custom state with v. It needs the state capability
// (write), and v's JSON must decode into the app's state type.
func SetState[T any](v T) error {
	_, err := callJSON(plugin.FnStateSet, v)
	return err
}

// Messages returns the session's messages. It needs the state capability (read).
func Messages() ([]*abi.Message, error) {
	b, err := callHost(plugin.FnMessagesGet)
	if err != nil {
		return nil, err
	}
	var msgs []*abi.Message
	err = decodePayload(plugin.FnMessagesGet, b, &msgs)
	return msgs, err
}

// AppendMessages adds messages to the end of the session's conversation. It needs the
// state capability (write).
func AppendMessages(msgs ...*abi.Message) error {
	if msgs == nil {
		msgs = []*abi.Message{}
	}
	_, err := callJSON(plugin.FnMessagesAppend, msgs)
	return err
}

// SetMessages replaces the session's conversation. A handler changing the messages
// changes what the model sees. It needs the state capability (write).
func SetMessages(msgs []*abi.Message) error {
	if msgs == nil {
		msgs = []*abi.Message{}
	}
	_, err := callJSON(plugin.FnMessagesSet, msgs)
	return err
}

// AddArtifact adds a named artifact to the session, replacing one of the same name. It
// needs the state capability (write).
func AddArtifact(name string, parts []*abi.Part, metadata map[string]any) error {
	if parts == nil {
		parts = []*abi.Part{}
	}
	_, err := callJSON(plugin.FnArtifactAdd, struct {
		Name     string         `json:"name"`
		Parts    []*abi.Part    `json:"parts"`
		Metadata map[string]any `json:"metadata,omitempty"`
	}{name, parts, metadata})
	return err
}

// StreamChunk streams a chunk of a model's response; the host forwards it at once. Only
// a model may call it. A chunk is at most 1 MiB of JSON.
func StreamChunk(c *abi.GenerateResponseChunk) error {
	if c == nil {
		return abi.Errorf(abi.CodeInvalidInput, "sdk: StreamChunk: nil chunk")
	}
	return stream(c)
}

// Status streams a status update (any JSON value) from a tool or a handler, e.g.
// {"progress": 0.5}. It is at most 1 MiB of JSON.
func Status(v any) error { return stream(v) }

func stream(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return abi.Errorf(abi.CodeInternal, "sdk: %s: encoding: %v", plugin.FnStream, err)
	}
	if len(b) > maxChunk {
		return abi.Errorf(abi.CodeLimitExceeded, "sdk: %s: %d bytes, more than the limit of %d", plugin.FnStream, len(b), maxChunk)
	}
	_, err = callHost(plugin.FnStream, blockArg(b))
	return err
}

// Config returns the value of a config key the manifest grants the plugin.
func Config(key string) (string, error) {
	b, err := callHost(plugin.FnConfigGet, textArg(key))
	return string(b), err
}

// Secret returns the value of a secret the manifest grants the plugin as readable.
// Prefer {{secret:NAME}} placeholders in HTTP headers, which the host fills in without
// the plugin ever seeing the value.
func Secret(name string) (string, error) {
	b, err := callHost(plugin.FnSecretGet, textArg(name))
	return string(b), err
}

// Log writes a message to the host's log at the given level. It never fails: a message
// the host does not take is dropped.
func Log(level plugin.LogLevel, msg string) {
	_, _ = callHost(plugin.FnLog, numArg(int64(level)), textArg(msg))
}

// Logf writes a formatted message to the host's log at the given level.
func Logf(level plugin.LogLevel, format string, args ...any) {
	Log(level, fmt.Sprintf(format, args...))
}
