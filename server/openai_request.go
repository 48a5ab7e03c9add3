package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// paramError is a request refused as OpenAI's API refuses one: 400, the parameter at
// fault (a JSON path: "messages[2].content") and OpenAI's code for what is wrong.
type paramError struct {
	param, code, msg string
}

// The codes of paramError, as OpenAI's API sets them.
const (
	codeMissing     = "missing_required_parameter"
	codeUnknown     = "unknown_parameter"
	codeUnsupported = "unsupported_parameter" // a parameter Terrarium cannot honour
	codeUnsupValue  = "unsupported_value"     // a value of it Terrarium cannot honour
	codeInvalidType = "invalid_type"
	codeInvalid     = "invalid_value"
)

func (e *paramError) Error() string { return e.msg }

// Unwrap makes a paramError a malformed request for the other surfaces' table.
func (e *paramError) Unwrap() error { return ErrBadJSON }

func refuse(param, code, format string, args ...any) *paramError {
	return &paramError{param: param, code: code, msg: param + ": " + fmt.Sprintf(format, args...)}
}

// unsettable is the reason given for refusing a generation setting: an agent's model
// settings are its agent file's.
const unsettable = "the agent's model settings are its agent file's (model.config); a request does not change them"

// chatFields is every field of an OpenAI chat completions request (the openai npm
// package 6.49.0's ChatCompletionCreateParams), with the check of its value: nil
// accepts any (the field is honoured or mapped, and read into ChatRequest), a
// function refuses the values Terrarium cannot honour. docs/serving.md has them in a
// table, which a test compares with this one. A field given as null is absent.
var chatFields = map[string]func(raw json.RawMessage) error{
	"model":                  nil,
	"messages":               nil,
	"stream":                 nil,
	"stream_options":         nil,
	"tools":                  nil,
	"tool_choice":            nil,
	"response_format":        nil,
	"user":                   nil,
	"safety_identifier":      nil,
	"n":                      only("n", codeUnsupValue, "Terrarium answers with one choice", "1"),
	"logprobs":               only("logprobs", codeUnsupValue, "Terrarium's models report no log probabilities", "false"),
	"parallel_tool_calls":    only("parallel_tool_calls", codeUnsupValue, "the agent's model decides how many tools it calls at once", "true"),
	"store":                  only("store", codeUnsupValue, "Terrarium stores no completions for distillation or evals (an agent's sessions are kept as its file says)", "false"),
	"service_tier":           only("service_tier", codeUnsupValue, "Terrarium has one tier", `"auto"`, `"default"`),
	"modalities":             only("modalities", codeUnsupValue, "Terrarium answers in text", `["text"]`),
	"top_logprobs":           never("top_logprobs", "Terrarium's models report no log probabilities"),
	"audio":                  never("audio", "Terrarium answers in text"),
	"prediction":             never("prediction", "Terrarium takes no predicted output"),
	"web_search_options":     never("web_search_options", "an agent's tools are its agent file's"),
	"functions":              never("functions", "deprecated by OpenAI: give tools instead"),
	"function_call":          never("function_call", "deprecated by OpenAI: give tool_choice instead"),
	"metadata":               never("metadata", "Terrarium stores no completions to tag"),
	"moderation":             never("moderation", "Terrarium runs no moderation of its own"),
	"prompt_cache_key":       never("prompt_cache_key", "Terrarium keeps no prompt cache"),
	"prompt_cache_retention": never("prompt_cache_retention", "Terrarium keeps no prompt cache"),
	"prompt_cache_options":   never("prompt_cache_options", "Terrarium keeps no prompt cache"),
	"temperature":            never("temperature", unsettable),
	"top_p":                  never("top_p", unsettable),
	"frequency_penalty":      never("frequency_penalty", unsettable),
	"presence_penalty":       never("presence_penalty", unsettable),
	"logit_bias":             never("logit_bias", unsettable),
	"max_tokens":             never("max_tokens", unsettable),
	"max_completion_tokens":  never("max_completion_tokens", unsettable),
	"stop":                   never("stop", unsettable),
	"seed":                   never("seed", unsettable),
	"reasoning_effort":       never("reasoning_effort", unsettable),
	"verbosity":              never("verbosity", unsettable),
}

// never refuses any value of a parameter.
func never(param, why string) func(json.RawMessage) error {
	return func(json.RawMessage) error { return refuse(param, codeUnsupported, "not supported: %s", why) }
}

// only accepts the values of a parameter written as JSON in ok, and refuses any other.
func only(param, code, why string, ok ...string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			for _, want := range ok {
				var w any
				json.Unmarshal([]byte(want), &w)
				if reflect.DeepEqual(v, w) {
					return nil
				}
			}
		}
		return refuse(param, code, "%s is not supported: %s (accepted: %s)", raw, why, strings.Join(ok, ", "))
	}
}

// ChatRequest is what Terrarium reads of an OpenAI chat completions request; every
// other field is refused (see chatFields), unless it asks for what Terrarium does
// anyway.
type ChatRequest struct {
	Model    string        `json:"model"`
	Messages []ChatMessage `json:"messages"`
	Stream   bool          `json:"stream,omitempty"`
	// StreamOptions.IncludeUsage adds a last chunk with the turn's usage.
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	// Tools are the client's tools, offered to the agent's model beside its own.
	Tools []ChatTool `json:"tools,omitempty"`
	// ToolChoice is "auto" (the default) or "none" (the client's tools are not
	// offered).
	ToolChoice json.RawMessage `json:"tool_choice,omitempty"`
	// ResponseFormat asks for JSON: an object, or one of a schema.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// User and SafetyIdentifier name the application's end user: they are logged
	// with the turn.
	User             string `json:"user,omitempty"`
	SafetyIdentifier string `json:"safety_identifier,omitempty"`
}

// StreamOptions are a streamed request's options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
	// IncludeObfuscation is accepted and has no effect: Terrarium pads no chunk.
	IncludeObfuscation *bool `json:"include_obfuscation,omitempty"`
}

// ChatTool is a client tool of a request.
type ChatTool struct {
	Type     string        `json:"type"`
	Function *ChatFunction `json:"function,omitempty"`
	Custom   any           `json:"custom,omitempty"`
}

// ChatFunction is a function tool: its parameters are the tool's input schema, which
// the model's input is checked against whether or not Strict is set.
type ChatFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
	Strict      *bool          `json:"strict,omitempty"`
}

// ResponseFormat is a request's response_format.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is the schema of a json_schema response format.
type JSONSchema struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Schema      map[string]any `json:"schema,omitempty"`
	Strict      *bool          `json:"strict,omitempty"`
}

// ChatMessage is an OpenAI chat message of any role.
type ChatMessage struct {
	Role string `json:"role"`
	// Content is a string or a list of parts: text (and, for a user, image_url and
	// input_audio); null for an assistant message with tool calls only.
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []ChatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	// Refusal is an assistant message's refusal text, read as its text.
	Refusal *string `json:"refusal,omitempty"`
	Name    *string `json:"name,omitempty"`
	// Audio and FunctionCall are refused.
	Audio        json.RawMessage `json:"audio,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
	// Annotations are an earlier answer's (clients send answers back as they got
	// them): they say nothing to the agent, which has the answer's text.
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// ChatToolCall is a tool call of an assistant message.
type ChatToolCall struct {
	// Index is a streamed delta's; requests carry none.
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function ChatFunctionCall `json:"function"`
}

// ChatFunctionCall is a tool call's function and its JSON arguments.
type ChatFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// decodeChatRequest decodes a request, refusing an unknown field, a field of the wrong
// type, and a value Terrarium cannot honour, naming it.
func decodeChatRequest(body []byte) (*ChatRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("%w: the body is not a JSON object: %v", ErrBadJSON, err)
	}
	known := map[string]json.RawMessage{}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		check, ok := chatFields[name]
		switch {
		case !ok:
			return nil, refuse(name, codeUnknown, "unrecognized request argument")
		case string(raw) == "null":
			continue
		case check != nil:
			if err := check(raw); err != nil {
				return nil, err
			}
		default:
			known[name] = raw
		}
	}
	for _, name := range []string{"model", "messages"} {
		if known[name] == nil {
			return nil, refuse(name, codeMissing, "missing required parameter")
		}
	}
	var req ChatRequest
	for _, name := range slices.Sorted(maps.Keys(known)) {
		if err := decodeField(&req, name, known[name]); err != nil {
			return nil, err
		}
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeField decodes one field of a request into req, strictly, naming it in an
// error.
func decodeField(req *ChatRequest, name string, raw json.RawMessage) error {
	var err error
	switch name {
	case "model":
		err = strict(raw, &req.Model)
	case "messages":
		var msgs []json.RawMessage
		if err = strict(raw, &msgs); err != nil {
			break
		}
		req.Messages = make([]ChatMessage, len(msgs))
		for i, m := range msgs {
			if string(m) == "null" {
				return refuse(fmt.Sprintf("messages[%d]", i), codeInvalidType, "null: want a message")
			}
			if err := strict(m, &req.Messages[i]); err != nil {
				return refuse(fmt.Sprintf("messages[%d]", i), codeInvalidType, "%v", err)
			}
		}
	case "stream":
		err = strict(raw, &req.Stream)
	case "stream_options":
		err = strict(raw, &req.StreamOptions)
	case "tools":
		err = strict(raw, &req.Tools)
	case "tool_choice":
		req.ToolChoice = raw
	case "response_format":
		err = strict(raw, &req.ResponseFormat)
	case "user":
		err = strict(raw, &req.User)
	case "safety_identifier":
		err = strict(raw, &req.SafetyIdentifier)
	}
	if err != nil {
		return refuse(name, codeInvalidType, "%v", err)
	}
	return nil
}

// strict decodes raw into v, refusing unknown fields.
func strict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// toolName is what OpenAI's API accepts as a function's name.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// check refuses what the fields say together that Terrarium cannot honour.
func (req *ChatRequest) check() error {
	if req.Model == "" {
		return refuse("model", codeMissing, "missing required parameter")
	}
	if len(req.Messages) == 0 {
		return refuse("messages", codeInvalid, "a request needs at least one message")
	}
	if req.StreamOptions != nil && !req.Stream {
		return refuse("stream_options", codeInvalid, "only allowed when stream is true")
	}
	for i, t := range req.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return refuse(at+".type", codeUnsupValue, "%q is not supported: Terrarium offers function tools", t.Type)
		case t.Function == nil:
			return refuse(at+".function", codeMissing, "missing required parameter")
		case !toolName.MatchString(t.Function.Name):
			return refuse(at+".function.name", codeInvalid, "%q: want 1 to 64 letters, digits, _ or -", t.Function.Name)
		}
		if t.Function.Parameters != nil {
			if _, err := schema.Compile(t.Function.Parameters); err != nil {
				return refuse(at+".function.parameters", codeInvalid, "not a JSON Schema: %v", err)
			}
		}
	}
	switch c := string(req.ToolChoice); c {
	case "", `"auto"`, `"none"`:
	default:
		return refuse("tool_choice", codeUnsupValue, "%s is not supported: the agent's model decides whether it calls a tool (accepted: \"auto\", \"none\")", c)
	}
	if f := req.ResponseFormat; f != nil {
		switch {
		case f.Type == "json_schema" && (f.JSONSchema == nil || f.JSONSchema.Name == ""):
			return refuse("response_format.json_schema", codeMissing, "a json_schema response format needs json_schema with a name and a schema")
		case f.Type != "text" && f.Type != "json_object" && f.Type != "json_schema":
			return refuse("response_format.type", codeInvalid, "%q: want text, json_object or json_schema", f.Type)
		case f.JSONSchema != nil && f.JSONSchema.Schema != nil:
			if _, err := schema.Compile(f.JSONSchema.Schema); err != nil {
				return refuse("response_format.json_schema.schema", codeInvalid, "not a JSON Schema: %v", err)
			}
		}
	}
	for i, m := range req.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		switch {
		case m.Audio != nil && string(m.Audio) != "null":
			return refuse(at+".audio", codeUnsupported, "not supported: Terrarium takes text")
		case m.FunctionCall != nil && string(m.FunctionCall) != "null":
			return refuse(at+".function_call", codeUnsupported, "deprecated by OpenAI: give tool_calls instead")
		case m.Name != nil:
			return refuse(at+".name", codeUnsupported, "not supported: an agent's conversation has one user")
		}
	}
	return nil
}

// output is the turn's output format that the request's response format asks for,
// or nil for text.
func (req *ChatRequest) output() *abi.GenerateActionOutputConfig {
	f := req.ResponseFormat
	switch {
	case f == nil || f.Type == "text":
		return nil
	case f.Type == "json_object":
		return &abi.GenerateActionOutputConfig{Format: "json", ContentType: "application/json"}
	}
	sch := f.JSONSchema.Schema
	if sch == nil {
		sch = map[string]any{}
	}
	return &abi.GenerateActionOutputConfig{Format: "json", ContentType: "application/json", JSONSchema: sch}
}

// clientTools are the tool definitions of the request's tools, none with tool_choice
// "none".
func (req *ChatRequest) clientTools() []*abi.ToolDefinition {
	if string(req.ToolChoice) == `"none"` {
		return nil
	}
	var defs []*abi.ToolDefinition
	for _, t := range req.Tools {
		in := t.Function.Parameters
		if in == nil {
			in = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		defs = append(defs, &abi.ToolDefinition{Name: t.Function.Name, Description: t.Function.Description, InputSchema: in})
	}
	return defs
}

// parts returns the parts of a message's content: a string, or its text (and
// refusal) parts, and images and audio where media may be given; at is the message's
// path in the request, for errors.
func (m ChatMessage) parts(at string, media bool) ([]*abi.Part, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		if m.Role == "assistant" {
			return nil, nil // an answer of tool calls alone
		}
		return nil, refuse(at+".content", codeInvalidType, "null or missing: want a string or a list of content parts")
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return []*abi.Part{abi.NewTextPart(s)}, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(m.Content, &raw); err != nil {
		return nil, refuse(at+".content", codeInvalidType, "want a string or a list of content parts")
	}
	var out []*abi.Part
	for j, r := range raw {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		if string(r) == "null" {
			return nil, refuse(pat, codeInvalidType, "null: want a content part")
		}
		var p struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Refusal  string `json:"refusal"`
			ImageURL *struct {
				URL    string `json:"url"`
				Detail string `json:"detail"`
			} `json:"image_url"`
			InputAudio *struct {
				Data   string `json:"data"`
				Format string `json:"format"`
			} `json:"input_audio"`
			File any `json:"file"`
		}
		if err := strict(r, &p); err != nil {
			return nil, refuse(pat, codeInvalidType, "%v", err)
		}
		switch {
		case p.Type == "text":
			out = append(out, abi.NewTextPart(p.Text))
		case p.Type == "refusal":
			out = append(out, abi.NewTextPart(p.Refusal))
		case p.Type == "image_url" && media && p.ImageURL != nil:
			if p.ImageURL.Detail != "" && p.ImageURL.Detail != "auto" {
				return nil, refuse(pat+".image_url.detail", codeUnsupValue, "%q is not supported: the agent's model decides (accepted: \"auto\")", p.ImageURL.Detail)
			}
			out = append(out, abi.NewMediaPart("", p.ImageURL.URL))
		case p.Type == "input_audio" && media && p.InputAudio != nil:
			if _, err := base64.StdEncoding.DecodeString(p.InputAudio.Data); err != nil {
				return nil, refuse(pat+".input_audio.data", codeInvalid, "not base64: %v", err)
			}
			out = append(out, abi.NewMediaPart("audio/"+p.InputAudio.Format, "data:audio/"+p.InputAudio.Format+";base64,"+p.InputAudio.Data))
		default:
			return nil, refuse(pat+".type", codeUnsupValue, "a %s message's %q part is not supported", m.Role, p.Type)
		}
	}
	return out, nil
}

// toolCallID is the id under which a client sees a pending tool request: opaque to
// it, it names the session, the tool and the request's ref, so that the tool message
// answering it finds them even without the session header (as clients that run tools
// for a model, such as the AI SDKs, send none).
func toolCallID(sessionID string, tr *abi.ToolRequest) string {
	parts := []string{sessionID, tr.Name, tr.Ref}
	for i, p := range parts {
		parts[i] = base64.RawURLEncoding.EncodeToString([]byte(p))
	}
	return toolCallPrefix + strings.Join(parts, ".")
}

const toolCallPrefix = "call_"

// parseToolCallID reads an id toolCallID made; ok is false for any other.
func parseToolCallID(id string) (sessionID, name, ref string, ok bool) {
	rest, found := strings.CutPrefix(id, toolCallPrefix)
	parts := strings.Split(rest, ".")
	if !found || len(parts) != 3 {
		return "", "", "", false
	}
	for i, p := range parts {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return "", "", "", false
		}
		parts[i] = string(b)
	}
	if parts[1] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// chatTurn is what a request's messages make of a turn.
type chatTurn struct {
	// history is the conversation before the turn, which an agent whose clients keep
	// the state starts from.
	history []*abi.Message
	// input is the turn's: the last message, the user's, or the tool messages that
	// end the request, which resume the turn whose answer asked for them.
	input *session.SessionFlowInput
	// session is the session of the tool calls the input answers ("" if they name
	// none).
	session string
}

// turn reads the request's messages as a turn.
func (req *ChatRequest) turn() (*chatTurn, error) {
	msgs := req.Messages
	n := len(msgs)
	t := &chatTurn{input: &session.SessionFlowInput{}}
	end := n - 1 // the history is msgs[:end]
	switch msgs[n-1].Role {
	case "user":
	case "tool":
		for end > 0 && msgs[end-1].Role == "tool" {
			end--
		}
	default:
		return nil, refuse(fmt.Sprintf("messages[%d].role", n-1), codeInvalid,
			"the last message is the user's (a turn) or tool results (answering the tool calls of the answer before them), not the %s's", msgs[n-1].Role)
	}
	calls := map[string]*abi.ToolRequest{} // the tool calls of the history, by id
	for i, m := range msgs[:end] {
		msg, err := m.message(fmt.Sprintf("messages[%d]", i), calls)
		if err != nil {
			return nil, err
		}
		t.history = append(t.history, msg)
	}
	if msgs[n-1].Role == "user" {
		parts, err := msgs[n-1].parts(fmt.Sprintf("messages[%d]", n-1), true)
		if err != nil {
			return nil, err
		}
		t.input.Messages = []*abi.Message{abi.NewUserMessage(parts...)}
		return t, nil
	}

	// Tool results: they answer the tool calls of the answer before them, now
	// pending. Without it (a client continuing a kept session by its header sends
	// only what is new), the ids say which calls they answer.
	var asked *abi.Message
	if h := t.history; len(h) > 0 && h[len(h)-1].Role == abi.RoleModel && len(h[len(h)-1].ToolRequests()) > 0 {
		asked = h[len(h)-1]
		for _, p := range asked.Content {
			if p.IsToolRequest() {
				p.Metadata = map[string]any{"interrupt": true}
			}
		}
	}
	sessions := map[string]bool{}
	t.input.Resume = &abi.Resume{}
	for i := end; i < n; i++ {
		m := msgs[i]
		at := fmt.Sprintf("messages[%d]", i)
		sid, name, ref, ok := parseToolCallID(m.ToolCallID)
		if asked != nil {
			tr := calls[m.ToolCallID]
			if tr == nil || !slices.ContainsFunc(asked.ToolRequests(), func(q *abi.ToolRequest) bool { return q == tr }) {
				return nil, refuse(at+".tool_call_id", codeInvalid, "%q is not the id of a tool call of the assistant message before", m.ToolCallID)
			}
			name, ref = tr.Name, tr.Ref
		} else if !ok {
			return nil, refuse(at+".tool_call_id", codeInvalid, "%q is no tool call of Terrarium's, and no assistant message with tool calls comes before", m.ToolCallID)
		}
		sessions[sid] = true
		output, err := m.text(at)
		if err != nil {
			return nil, err
		}
		t.input.Resume.Respond = append(t.input.Resume.Respond,
			abi.NewToolResponsePart(&abi.ToolResponse{Name: name, Ref: ref, Output: output}))
	}
	if len(sessions) > 1 {
		return nil, refuse(fmt.Sprintf("messages[%d]", end), codeInvalid, "the tool results answer the tool calls of different sessions")
	}
	for sid := range sessions {
		t.session = sid
	}
	if asked != nil {
		for _, tr := range asked.ToolRequests() {
			if !slices.ContainsFunc(t.input.Resume.Respond, func(p *abi.Part) bool {
				return p.ToolResponse.Name == tr.Name && p.ToolResponse.Ref == tr.Ref
			}) {
				id := ""
				for k, v := range calls {
					if v == tr {
						id = k
					}
				}
				return nil, refuse(fmt.Sprintf("messages[%d].tool_calls", end-1), codeInvalid, "tool call %q has no tool message answering it", id)
			}
		}
	}
	return t, nil
}

// message converts a message of the conversation before the turn; calls holds the
// tool calls of the assistant messages so far, by id, which a tool message answers.
func (m ChatMessage) message(at string, calls map[string]*abi.ToolRequest) (*abi.Message, error) {
	switch m.Role {
	case "system", "developer":
		text, err := m.text(at)
		if err != nil {
			return nil, err
		}
		return abi.NewSystemTextMessage(text), nil
	case "user":
		parts, err := m.parts(at, true)
		if err != nil {
			return nil, err
		}
		return abi.NewUserMessage(parts...), nil
	case "assistant":
		parts, err := m.parts(at, false)
		if err != nil {
			return nil, err
		}
		if m.Refusal != nil && *m.Refusal != "" {
			parts = append(parts, abi.NewTextPart(*m.Refusal))
		}
		for j, c := range m.ToolCalls {
			cat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
			if c.Type != "function" {
				return nil, refuse(cat+".type", codeUnsupValue, "%q is not supported: Terrarium offers function tools", c.Type)
			}
			var input any
			if strings.TrimSpace(c.Function.Arguments) != "" {
				if err := json.Unmarshal([]byte(c.Function.Arguments), &input); err != nil {
					return nil, refuse(cat+".function.arguments", codeInvalid, "not JSON: %v", err)
				}
			}
			ref := c.ID
			if _, _, r, ok := parseToolCallID(c.ID); ok {
				ref = r
			}
			tr := &abi.ToolRequest{Name: c.Function.Name, Ref: ref, Input: input}
			calls[c.ID] = tr
			parts = append(parts, abi.NewToolRequestPart(tr))
		}
		return abi.NewModelMessage(parts...), nil
	case "tool":
		tr := calls[m.ToolCallID]
		if tr == nil {
			return nil, refuse(at+".tool_call_id", codeInvalid, "%q answers no tool call of an assistant message before", m.ToolCallID)
		}
		text, err := m.text(at)
		if err != nil {
			return nil, err
		}
		return abi.NewToolMessage(&abi.ToolResponse{Name: tr.Name, Ref: tr.Ref, Output: text}), nil
	}
	return nil, refuse(at+".role", codeInvalid, "%q: want system, developer, user, assistant or tool", m.Role)
}

// text returns the text of a message that holds only text.
func (m ChatMessage) text(at string) (string, error) {
	parts, err := m.parts(at, false)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), err
}
