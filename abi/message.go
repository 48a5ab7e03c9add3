package abi

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Role is the author of a message.
type Role string

// The roles of Genkit's format.
const (
	RoleSystem Role = "system"
	RoleUser   Role = "user"
	RoleModel  Role = "model"
	RoleTool   Role = "tool"
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleSystem, RoleUser, RoleModel, RoleTool:
		return true
	}
	return false
}

// Message is one turn of a conversation: who said it and what it says.
//
// Messages handed to a session or a generate call are treated as immutable: code that
// wants a changed message builds a new one (Clone helps) rather than editing it in place.
type Message struct {
	Role     Role           `json:"role"`
	Content  []*Part        `json:"content"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// NewMessage returns a message with the given role and parts.
func NewMessage(role Role, parts ...*Part) *Message {
	if parts == nil {
		parts = []*Part{}
	}
	return &Message{Role: role, Content: parts}
}

// NewUserMessage returns a user message with the given parts.
func NewUserMessage(parts ...*Part) *Message { return NewMessage(RoleUser, parts...) }

// NewUserTextMessage returns a user message holding one text part.
func NewUserTextMessage(text string) *Message { return NewMessage(RoleUser, NewTextPart(text)) }

// NewModelMessage returns a model message with the given parts.
func NewModelMessage(parts ...*Part) *Message { return NewMessage(RoleModel, parts...) }

// NewModelTextMessage returns a model message holding one text part.
func NewModelTextMessage(text string) *Message { return NewMessage(RoleModel, NewTextPart(text)) }

// NewSystemTextMessage returns a system message holding one text part.
func NewSystemTextMessage(text string) *Message { return NewMessage(RoleSystem, NewTextPart(text)) }

// NewToolMessage returns a tool message answering tool requests.
func NewToolMessage(responses ...*ToolResponse) *Message {
	parts := make([]*Part, len(responses))
	for i, r := range responses {
		parts[i] = NewToolResponsePart(r)
	}
	return NewMessage(RoleTool, parts...)
}

// Text returns the concatenated text of the message's text parts.
func (m *Message) Text() string {
	if m == nil {
		return ""
	}
	return concatText(m.Content, PartText)
}

// Reasoning returns the concatenated text of the message's reasoning parts.
func (m *Message) Reasoning() string {
	if m == nil {
		return ""
	}
	return concatText(m.Content, PartReasoning)
}

// ToolRequests returns the message's tool requests in order.
func (m *Message) ToolRequests() []*ToolRequest {
	if m == nil {
		return nil
	}
	var out []*ToolRequest
	for _, p := range m.Content {
		if p.IsToolRequest() {
			out = append(out, p.ToolRequest)
		}
	}
	return out
}

// ToolResponses returns the message's tool responses in order.
func (m *Message) ToolResponses() []*ToolResponse {
	if m == nil {
		return nil
	}
	var out []*ToolResponse
	for _, p := range m.Content {
		if p.IsToolResponse() {
			out = append(out, p.ToolResponse)
		}
	}
	return out
}

// Output decodes the JSON value in the message's text into v, as
// GenerateResponse.Output does.
func (m *Message) Output(v any) error {
	raw, err := ExtractJSON(m.Text())
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("abi: decoding output: %w", err)
	}
	return nil
}

// Clone returns a copy of m whose content slice, parts and metadata map are its own.
func (m *Message) Clone() *Message {
	if m == nil {
		return nil
	}
	c := *m
	c.Content = cloneParts(m.Content)
	if c.Content == nil {
		c.Content = []*Part{}
	}
	c.Metadata = cloneMap(m.Metadata)
	return &c
}

func concatText(parts []*Part, kind PartKind) string {
	var b strings.Builder
	for _, p := range parts {
		if p != nil && p.Kind == kind {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// MarshalJSON encodes m with "content" always present, as Genkit's schema requires.
func (m Message) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(make([]byte, 0, 64))
}

// AppendJSON appends m's encoding, MarshalJSON's, to b: for an encoding that holds
// messages, written without encoding/json re-reading each message's bytes.
func (m *Message) AppendJSON(b []byte) ([]byte, error) {
	// Written out rather than through a copy encoding/json reflects over: messages are
	// what snapshots, streams and traces encode most, and each level of MarshalJSON
	// encoding/json goes through costs a full encoding of what is below it.
	b = append(b, `{"role":`...)
	if m.Role.Valid() { // a word: nothing to escape
		b = append(b, '"')
		b = append(b, m.Role...)
		b = append(b, '"')
	} else {
		b = AppendJSONString(b, string(m.Role))
	}
	b = append(b, `,"content":`...)
	b, err := AppendJSONArray(b, m.Content)
	if err != nil {
		return nil, err
	}
	return closeWithMetadata(b, m.Metadata)
}

// AppendJSONArray appends vs as a JSON array, each element as its AppendJSON writes it
// and a nil one as null (a nil or empty vs as []): for the encoders that write
// messages and parts by hand.
func AppendJSONArray[T any, E interface {
	*T
	AppendJSON([]byte) ([]byte, error)
}](b []byte, vs []E) ([]byte, error) {
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		if v == nil {
			b = append(b, "null"...)
			continue
		}
		var err error
		if b, err = v.AppendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// AppendJSONString appends s as a JSON string, escaped as encoding/json escapes it
// (HTML characters included): for the encoders that write Genkit's documents by hand,
// without encoding/json's reflection.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			// Escapes, or UTF-8 that may need them (U+2028, invalid bytes): the
			// encoder's own rules, rather than a copy of them.
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSON appends v as encoding/json encodes it.
func appendJSON(b []byte, v any) ([]byte, error) {
	q, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, q...), nil
}

// closeWithMetadata ends an object being written, with its "metadata" member when md
// holds any (as omitempty encodes it).
func closeWithMetadata(b []byte, md map[string]any) ([]byte, error) {
	if len(md) > 0 {
		b = append(b, `,"metadata":`...)
		var err error
		if b, err = appendJSON(b, md); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes a message and rejects an unknown role.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	var c plain
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	if !c.Role.Valid() {
		return fmt.Errorf("abi: message has role %q: want system, user, model or tool", c.Role)
	}
	if err := NoNulls("message content", c.Content); err != nil {
		return err
	}
	if c.Content == nil {
		c.Content = []*Part{}
	}
	*m = Message(c)
	return nil
}

// NoNulls returns an error naming what[i] for the first nil element of elems. Every
// wire type holding an array of objects calls it as it is decoded: encoding/json
// decodes a null element of a []*T to a nil pointer without asking T, and then every
// reader of the array (a session's checks, a provider's encoder) would have to check
// each element, or panic on the first null a client sends.
func NoNulls[T any](what string, elems []*T) error {
	for i, e := range elems {
		if e == nil {
			return fmt.Errorf("%s[%d] is null: want an object", what, i)
		}
	}
	return nil
}

// SplitSystem separates system messages from the rest, for providers that take system
// instructions outside the conversation. It returns the system messages' parts in order
// and the remaining messages, leaving msgs unchanged.
func SplitSystem(msgs []*Message) (system []*Part, rest []*Message) {
	rest = make([]*Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Role == RoleSystem {
			system = append(system, m.Content...)
			continue
		}
		rest = append(rest, m)
	}
	return system, rest
}

// Artifact is a named output of a session (a file, an image, a document): a collection
// of parts. A session keeps one artifact per name, the latest.
type Artifact struct {
	Name     string         `json:"name,omitempty"`
	Parts    []*Part        `json:"parts"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// UnmarshalJSON decodes an artifact, refusing a null part.
func (a *Artifact) UnmarshalJSON(b []byte) error {
	type plain Artifact
	if err := json.Unmarshal(b, (*plain)(a)); err != nil {
		return err
	}
	return NoNulls("artifact parts", a.Parts)
}
