package plugin

import (
	"encoding/json"

	"github.com/terrarium-ai/terrarium/abi"
)

// Version is the plugin ABI version this package describes.
const Version = 1

// HostModule is the import module of Terrarium's host functions.
const HostModule = "terrarium:host/v1"

// The exports a plugin provides. Each takes its input and gives its output through the
// Extism kernel (input_load_*, output_set) and returns 0 on success; on failure it sets
// an error (error_set) holding an abi.Error in JSON and returns 1.
const (
	ExportDescribe = "terrarium_describe"
	ExportGenerate = "terrarium_generate"
	ExportCallTool = "terrarium_call_tool"
	ExportHandle   = "terrarium_handle"
)

// ExportInputBuffer is an optional export, (i64 length) -> i32 address: the host may
// call it before an export whose input is large, to write that input into the
// plugin's own memory at the address returned, in one copy (ABI.md, section 2). A
// plugin returning 0, or without it, reads its input through the kernel.
const ExportInputBuffer = "terrarium_input_buffer"

// The host functions a plugin may import from HostModule. Every one returns the offset
// of a result block (see ResultOK); their parameters are described in ABI.md.
const (
	FnSessionID      = "session_id"
	FnStateGet       = "state_get"
	FnStateSet       = "state_set"
	FnMessagesGet    = "messages_get"
	FnMessagesAppend = "messages_append"
	FnMessagesSet    = "messages_set"
	FnArtifactAdd    = "artifact_add"
	FnStream         = "stream"
	FnConfigGet      = "config_get"
	FnSecretGet      = "secret_get"
	FnHTTPRequest    = "http_request"
	FnHTTPRead       = "http_read"
	FnHTTPClose      = "http_close"
	FnLog            = "log"
)

// The first byte of a result block: the rest is the payload (ResultOK) or an abi.Error in
// JSON (ResultError).
const (
	ResultOK    byte = 0
	ResultError byte = 1
)

// DecodeError reads an error a plugin set. Text that is not an abi.Error in JSON becomes
// an internal error carrying the text, so nothing a plugin says is lost.
func DecodeError(text string) *abi.Error {
	var e abi.Error
	if err := json.Unmarshal([]byte(text), &e); err == nil && e.Code != "" {
		return &e
	}
	return &abi.Error{Code: abi.CodeInternal, Message: text}
}

// Descriptor is what terrarium_describe returns: who the plugin is, what it provides
// and what it asks for.
type Descriptor struct {
	// ABI is the protocol version the plugin speaks (Version).
	ABI         int    `json:"abi"`
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Models are registered as /model/<plugin>/<name>.
	Models []ModelDescriptor `json:"models,omitempty"`
	// Tools are registered as /tool/<plugin>/<name>.
	Tools []*abi.ToolDefinition `json:"tools,omitempty"`
	// Handlers are registered as /handler/<plugin>/<name>.
	Handlers []HandlerDescriptor `json:"handlers,omitempty"`
	// Capabilities lists what the plugin needs; the operator's manifest grants it (or
	// not).
	Capabilities Capabilities `json:"capabilities,omitzero"`
}

// ModelDescriptor describes one model a plugin serves.
type ModelDescriptor struct {
	Name string         `json:"name"`
	Info *abi.ModelInfo `json:"info,omitempty"`
}

// HandlerDescriptor describes one handler a plugin provides.
type HandlerDescriptor struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Points      []abi.HookPoint `json:"points"`
}

// StateAccess is how much of the session state a plugin may touch.
type StateAccess string

// The levels of state access.
const (
	StateNone  StateAccess = "none"
	StateRead  StateAccess = "read"
	StateWrite StateAccess = "write"
)

// Allows reports whether access a covers what need requires.
func (a StateAccess) Allows(need StateAccess) bool {
	rank := map[StateAccess]int{"": 0, StateNone: 0, StateRead: 1, StateWrite: 2}
	return rank[a] >= rank[need]
}

// Capabilities are what a plugin asks for in its descriptor, and what a manifest grants.
type Capabilities struct {
	// State is the access to the session (custom state, messages, artifacts).
	State StateAccess `json:"state,omitempty"`
	// HTTP lists the hosts the plugin calls ("api.openai.com", "*.example.com").
	HTTP []string `json:"http,omitempty"`
	// Config lists the config keys the plugin reads.
	Config []string `json:"config,omitempty"`
	// Secrets lists the secrets the plugin needs injected into its HTTP headers.
	Secrets []string `json:"secrets,omitempty"`
	// StateSchema is the JSON Schema the session's custom state must satisfy for the
	// plugin: the parts it reads and writes (other parts are the app's and should be
	// allowed). The conformance suite checks the state against it after each call.
	StateSchema map[string]any `json:"stateSchema,omitempty"`
}

// GenerateInput is the input of terrarium_generate.
type GenerateInput struct {
	Model   string               `json:"model"`
	Request *abi.GenerateRequest `json:"request"`
	// Stream says the caller listens for chunks: the model should stream them with the
	// stream host function as they arrive. Without it, chunks go nowhere.
	Stream bool `json:"stream,omitempty"`
}

// ToolInput is the input of terrarium_call_tool.
type ToolInput struct {
	Tool  string `json:"tool"`
	Input any    `json:"input"`
	// Resumed is set when a client restarted this tool after it interrupted: the
	// restart's metadata (e.g. {"approved": true}).
	Resumed map[string]any `json:"resumed,omitzero"`
}

// ToolOutput is the output of terrarium_call_tool: the tool's output, with content
// parts (images, documents, text for the model to read) beside it, or an interrupt
// asking for outside input first.
type ToolOutput struct {
	Output any `json:"output,omitempty"`
	// Content becomes the tool response's content, which providers pass to the model.
	Content   []*abi.Part    `json:"content,omitempty"`
	Interrupt map[string]any `json:"interrupt,omitzero"`
}

// HTTPRequest is the first argument of http_request; the body is the second.
type HTTPRequest struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	// Headers may hold secret placeholders, {{secret:NAME}}, which the host replaces
	// with the granted secret's value; the plugin never sees the value.
	Headers map[string]string `json:"headers,omitempty"`
}

// HTTPResponse is the payload of http_request: the status and headers; the body is read
// with http_read(handle) until it returns no bytes, then closed with http_close.
type HTTPResponse struct {
	Handle  int64             `json:"handle"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
}

// LogLevel is the level of a log host function call.
type LogLevel int64

// The log levels, as log/slog numbers them.
const (
	LogDebug LogLevel = -4
	LogInfo  LogLevel = 0
	LogWarn  LogLevel = 4
	LogError LogLevel = 8
)
