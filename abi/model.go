package abi

import (
	"encoding/json"
	"errors"
)

// FinishReason says why a model stopped generating.
type FinishReason string

// The finish reasons of Genkit's format.
const (
	FinishStop        FinishReason = "stop"
	FinishLength      FinishReason = "length"
	FinishBlocked     FinishReason = "blocked"
	FinishAborted     FinishReason = "aborted"
	FinishInterrupted FinishReason = "interrupted"
	FinishOther       FinishReason = "other"
	FinishUnknown     FinishReason = "unknown"
)

// ToolChoice tells a model whether it may, must or must not call tools.
type ToolChoice string

// The tool choices of Genkit's format.
const (
	ToolChoiceAuto     ToolChoice = "auto"
	ToolChoiceRequired ToolChoice = "required"
	ToolChoiceNone     ToolChoice = "none"
)

// GenerateRequest is the input of a model action.
type GenerateRequest struct {
	Messages []*Message `json:"messages"`
	// Config is passed through to the model untouched: known keys are handled by the
	// model, unknown ones go on to the provider's API.
	Config     any               `json:"config,omitempty"`
	Tools      []*ToolDefinition `json:"tools,omitzero"`
	ToolChoice ToolChoice        `json:"toolChoice,omitempty"`
	Output     *OutputConfig     `json:"output,omitempty"`
	Docs       []*Document       `json:"docs,omitempty"`
}

// UnmarshalJSON decodes a request, refusing a null message, tool or document.
func (r *GenerateRequest) UnmarshalJSON(b []byte) error {
	type plain GenerateRequest
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	return errors.Join(NoNulls("messages", r.Messages), NoNulls("tools", r.Tools), NoNulls("docs", r.Docs))
}

// MarshalJSON encodes r with "messages" always present, as Genkit's schema requires.
func (r GenerateRequest) MarshalJSON() ([]byte, error) {
	type plain GenerateRequest
	c := plain(r)
	if c.Messages == nil {
		c.Messages = []*Message{}
	}
	return json.Marshal(c)
}

// OutputConfig describes the output a request wants from the model.
type OutputConfig struct {
	Format string         `json:"format,omitempty"`
	Schema map[string]any `json:"schema,omitempty"`
	// Constrained asks the model to enforce Schema natively while generating.
	Constrained bool   `json:"constrained,omitempty"`
	ContentType string `json:"contentType,omitempty"`
}

// Document is a piece of retrieved context handed to a model with a request.
type Document struct {
	Content  []*Part        `json:"content"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// UnmarshalJSON decodes a document, refusing a null part.
func (d *Document) UnmarshalJSON(b []byte) error {
	type plain Document
	if err := json.Unmarshal(b, (*plain)(d)); err != nil {
		return err
	}
	return NoNulls("document content", d.Content)
}

// NewTextDocument returns a document holding one text part.
func NewTextDocument(text string) *Document { return &Document{Content: []*Part{NewTextPart(text)}} }

// Text returns the concatenated text of the document's text parts.
func (d *Document) Text() string {
	if d == nil {
		return ""
	}
	return concatText(d.Content, PartText)
}

// ToolDefinition describes a tool to a model.
type ToolDefinition struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema,omitempty"`
	// OutputSchema describes the tool's output; nil means any JSON value.
	OutputSchema map[string]any `json:"outputSchema,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// GenerateResponse is the output of a model action.
type GenerateResponse struct {
	Message       *Message         `json:"message,omitempty"`
	FinishReason  FinishReason     `json:"finishReason,omitempty"`
	FinishMessage string           `json:"finishMessage,omitempty"`
	LatencyMs     float64          `json:"latencyMs,omitempty"`
	Usage         *GenerationUsage `json:"usage,omitempty"`
	// Custom holds model-specific extra information.
	Custom any `json:"custom,omitempty"`
	// Request is the request that produced this response.
	Request *GenerateRequest `json:"request,omitempty"`
}

// Text returns the text of the response's message.
func (r *GenerateResponse) Text() string {
	if r == nil {
		return ""
	}
	return r.Message.Text()
}

// Reasoning returns the reasoning text of the response's message.
func (r *GenerateResponse) Reasoning() string {
	if r == nil {
		return ""
	}
	return r.Message.Reasoning()
}

// ToolRequests returns the tool requests of the response's message.
func (r *GenerateResponse) ToolRequests() []*ToolRequest {
	if r == nil {
		return nil
	}
	return r.Message.ToolRequests()
}

// History returns the conversation the response answers, as a caller sends it back to
// continue it: the request's messages without the parts the call injected for this
// request only (format instructions, folded documents: see Injected), then the
// response's message.
func (r *GenerateResponse) History() []*Message {
	if r == nil {
		return nil
	}
	var msgs []*Message
	if r.Request != nil {
		msgs = WithoutInjected(r.Request.Messages)
	}
	out := make([]*Message, 0, len(msgs)+1)
	out = append(out, msgs...)
	if r.Message != nil {
		out = append(out, r.Message)
	}
	return out
}

// The parts a generate call adds to a request for that request only are marked, as
// Genkit marks them, with metadata "purpose": "output" for format instructions and
// "context" for documents folded into the prompt.
const (
	PurposeOutput  = "output"
	PurposeContext = "context"
)

// Injected reports whether p is a part a generate call injected (PurposeOutput or
// PurposeContext).
func Injected(p *Part) bool {
	if p == nil || p.Metadata == nil { // most parts: checked without a map lookup, for long histories
		return false
	}
	purpose, _ := p.Metadata["purpose"].(string)
	return purpose == PurposeOutput || purpose == PurposeContext
}

// WithoutInjected returns msgs without injected parts, which a generate call adds to
// user messages only (the parts of other messages are theirs, whatever their
// metadata). Messages holding none (and nil ones) are kept as they are; the others are
// copied, so msgs is never changed.
func WithoutInjected(msgs []*Message) []*Message {
	out := msgs
	copied := false
	for i, m := range msgs {
		// Looked for first: a request carries the whole history, whose messages seldom
		// hold any, and a copy of each would grow every call's cost with the history.
		if m == nil || m.Role != RoleUser || !hasInjected(m.Content) {
			continue
		}
		keep := make([]*Part, 0, len(m.Content)-1)
		for _, p := range m.Content {
			if !Injected(p) {
				keep = append(keep, p)
			}
		}
		if !copied {
			out = append([]*Message(nil), msgs...)
			copied = true
		}
		c := *m
		c.Content = keep
		out[i] = &c
	}
	return out
}

// hasInjected reports whether parts holds an injected part: a loop Injected is inlined
// into, as it is run over whole histories.
func hasInjected(parts []*Part) bool {
	for _, p := range parts {
		if Injected(p) {
			return true
		}
	}
	return false
}

// ErrNoJSON is returned by Output when a response's text holds no JSON value.
var ErrNoJSON = errors.New("abi: no JSON value in text")

// Output decodes the JSON value in the response's text into v. It accepts a bare value or
// one wrapped in a Markdown code fence, with prose around it (see ExtractJSON).
func (r *GenerateResponse) Output(v any) error {
	if r == nil {
		return ErrNoJSON
	}
	return r.Message.Output(v)
}

// GenerationUsage counts what a generation consumed and produced.
type GenerationUsage struct {
	InputTokens         int                `json:"inputTokens,omitempty"`
	OutputTokens        int                `json:"outputTokens,omitempty"`
	TotalTokens         int                `json:"totalTokens,omitempty"`
	InputCharacters     int                `json:"inputCharacters,omitempty"`
	OutputCharacters    int                `json:"outputCharacters,omitempty"`
	InputImages         int                `json:"inputImages,omitempty"`
	OutputImages        int                `json:"outputImages,omitempty"`
	InputVideos         int                `json:"inputVideos,omitempty"`
	OutputVideos        int                `json:"outputVideos,omitempty"`
	InputAudioFiles     int                `json:"inputAudioFiles,omitempty"`
	OutputAudioFiles    int                `json:"outputAudioFiles,omitempty"`
	ThoughtsTokens      int                `json:"thoughtsTokens,omitempty"`
	CachedContentTokens int                `json:"cachedContentTokens,omitempty"`
	Custom              map[string]float64 `json:"custom,omitempty"`
}

// Add adds o's counts to u's, as the usage of several generations adds up.
func (u *GenerationUsage) Add(o *GenerationUsage) {
	if o == nil {
		return
	}
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.TotalTokens += o.TotalTokens
	u.InputCharacters += o.InputCharacters
	u.OutputCharacters += o.OutputCharacters
	u.InputImages += o.InputImages
	u.OutputImages += o.OutputImages
	u.InputVideos += o.InputVideos
	u.OutputVideos += o.OutputVideos
	u.InputAudioFiles += o.InputAudioFiles
	u.OutputAudioFiles += o.OutputAudioFiles
	u.ThoughtsTokens += o.ThoughtsTokens
	u.CachedContentTokens += o.CachedContentTokens
	for k, v := range o.Custom {
		if u.Custom == nil {
			u.Custom = map[string]float64{}
		}
		u.Custom[k] += v
	}
}

// GenerateResponseChunk is one piece of a streamed response.
type GenerateResponseChunk struct {
	Role Role `json:"role,omitempty"`
	// Index is the position, among the messages one generate call produces, of the
	// message this chunk belongs to: 0 for the first model message, 1 for the tool
	// message answering it, 2 for the next model message, and so on.
	Index   int     `json:"index"`
	Content []*Part `json:"content"`
	// Aggregated marks a chunk holding everything generated so far rather than a delta.
	Aggregated bool `json:"aggregated,omitempty"`
	Custom     any  `json:"custom,omitempty"`
}

// UnmarshalJSON decodes a chunk, refusing a null part.
func (c *GenerateResponseChunk) UnmarshalJSON(b []byte) error {
	type plain GenerateResponseChunk
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	return NoNulls("chunk content", c.Content)
}

// MarshalJSON encodes c with "content" always present, as Genkit's schema requires.
func (c GenerateResponseChunk) MarshalJSON() ([]byte, error) {
	type plain GenerateResponseChunk
	p := plain(c)
	if p.Content == nil {
		p.Content = []*Part{}
	}
	return json.Marshal(p)
}

// Text returns the concatenated text of the chunk's text parts.
func (c *GenerateResponseChunk) Text() string {
	if c == nil {
		return ""
	}
	return concatText(c.Content, PartText)
}

// Reasoning returns the concatenated text of the chunk's reasoning parts.
func (c *GenerateResponseChunk) Reasoning() string {
	if c == nil {
		return ""
	}
	return concatText(c.Content, PartReasoning)
}

// Constrained says which requests a model can constrain to a schema natively.
type Constrained string

// The constrained-generation levels of Genkit's format.
const (
	ConstrainedNone    Constrained = "none"
	ConstrainedAll     Constrained = "all"
	ConstrainedNoTools Constrained = "no-tools"
)

// Stage is a model's development stage.
type Stage string

// The stages of Genkit's format.
const (
	StageFeatured   Stage = "featured"
	StageStable     Stage = "stable"
	StageUnstable   Stage = "unstable"
	StageLegacy     Stage = "legacy"
	StageDeprecated Stage = "deprecated"
)

// ModelInfo describes a model: what it is called and what it supports.
type ModelInfo struct {
	Label    string         `json:"label,omitempty"`
	Versions []string       `json:"versions,omitempty"`
	Supports *ModelSupports `json:"supports,omitempty"`
	// ConfigSchema is the JSON Schema of the model's config. In action metadata Genkit
	// calls the same schema customOptions.
	ConfigSchema map[string]any `json:"configSchema,omitempty"`
	Stage        Stage          `json:"stage,omitempty"`
}

// ModelSupports lists the capabilities a model has.
type ModelSupports struct {
	Multiturn   bool        `json:"multiturn,omitempty"`
	Media       bool        `json:"media,omitempty"`
	Tools       bool        `json:"tools,omitempty"`
	SystemRole  bool        `json:"systemRole,omitempty"`
	Output      []string    `json:"output,omitempty"`
	ContentType []string    `json:"contentType,omitempty"`
	Context     bool        `json:"context,omitempty"`
	Constrained Constrained `json:"constrained,omitempty"`
	ToolChoice  bool        `json:"toolChoice,omitempty"`
	LongRunning bool        `json:"longRunning,omitempty"`
}

// GenerateActionOptions is the serializable form of a generate call: what a prompt
// renders to and what Genkit's /util/generate action takes. Models and tools are named,
// not held.
type GenerateActionOptions struct {
	Model      string                      `json:"model,omitempty"`
	Docs       []*Document                 `json:"docs,omitempty"`
	Messages   []*Message                  `json:"messages"`
	Tools      []string                    `json:"tools,omitempty"`
	ToolChoice ToolChoice                  `json:"toolChoice,omitempty"`
	Config     any                         `json:"config,omitempty"`
	Output     *GenerateActionOutputConfig `json:"output,omitempty"`
	// Resume continues a generation that tools interrupted.
	Resume             *Resume `json:"resume,omitempty"`
	ReturnToolRequests bool    `json:"returnToolRequests,omitempty"`
	MaxTurns           int     `json:"maxTurns,omitempty"`
}

// UnmarshalJSON decodes the options, refusing a null message or document.
func (o *GenerateActionOptions) UnmarshalJSON(b []byte) error {
	type plain GenerateActionOptions
	if err := json.Unmarshal(b, (*plain)(o)); err != nil {
		return err
	}
	return errors.Join(NoNulls("messages", o.Messages), NoNulls("docs", o.Docs))
}

// MarshalJSON encodes o with "messages" always present, as Genkit's schema requires.
func (o GenerateActionOptions) MarshalJSON() ([]byte, error) {
	type plain GenerateActionOptions
	c := plain(o)
	if c.Messages == nil {
		c.Messages = []*Message{}
	}
	return json.Marshal(c)
}

// GenerateActionOutputConfig is the output a generate call asks for.
type GenerateActionOutputConfig struct {
	Format      string `json:"format,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	// Instructions is false to add no format instructions, a string to use instead of
	// the generated ones, or nil for the default.
	Instructions any            `json:"instructions,omitempty"`
	JSONSchema   map[string]any `json:"jsonSchema,omitempty"`
	// Constrained, when false, declines the model's native constrained generation; nil
	// uses it wherever the model supports it.
	Constrained *bool `json:"constrained,omitempty"`
}

// Resume answers the tool requests that interrupted a generation: Respond supplies
// their responses, Restart runs them again (possibly with new input).
type Resume struct {
	Respond  []*Part        `json:"respond,omitempty"`
	Restart  []*Part        `json:"restart,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// UnmarshalJSON decodes a resume, refusing a null part.
func (r *Resume) UnmarshalJSON(b []byte) error {
	type plain Resume
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	return errors.Join(NoNulls("resume respond", r.Respond), NoNulls("resume restart", r.Restart))
}
