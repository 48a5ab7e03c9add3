package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
	"github.com/terrarium-ai/terrarium/sdk/sse"
)

// completion is a response of POST /chat/completions, and (with deltas for messages)
// one chunk of a streamed response.
type completion struct {
	ID                string    `json:"id"`
	Model             string    `json:"model"`
	SystemFingerprint string    `json:"system_fingerprint"`
	Choices           []choice  `json:"choices"`
	Usage             *usage    `json:"usage"`
	Error             *apiError `json:"error"`
}

type choice struct {
	Index        int         `json:"index"`
	Message      *apiMessage `json:"message"`
	Delta        *apiMessage `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
}

// apiMessage is a message of a response, or the delta of a streamed one.
type apiMessage struct {
	Role string `json:"role"`
	// Content is a string, null, or (some servers) a list of parts.
	Content json.RawMessage `json:"content"`
	// Reasoning is OpenRouter's (and vLLM's, Ollama's) reasoning text;
	// ReasoningContent DeepSeek's.
	Reasoning        *string       `json:"reasoning"`
	ReasoningContent *string       `json:"reasoning_content"`
	Refusal          *string       `json:"refusal"`
	ToolCalls        []apiToolCall `json:"tool_calls"`
}

type apiToolCall struct {
	// Index orders the calls of a streamed response; their deltas repeat it.
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON string holding the arguments' JSON text, or (some
		// servers) the arguments themselves.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *usage) toABI() *abi.GenerationUsage {
	if u == nil {
		return nil
	}
	g := &abi.GenerationUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if g.TotalTokens == 0 {
		g.TotalTokens = g.InputTokens + g.OutputTokens
	}
	if d := u.PromptTokensDetails; d != nil {
		g.CachedContentTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		g.ThoughtsTokens = d.ReasoningTokens
	}
	return g
}

// finishReason maps the API's finish reason: stop and tool_calls (and the older
// function_call) to stop, length to length, content_filter to blocked, none to
// unknown, anything else to other.
func finishReason(r string) (abi.FinishReason, string) {
	switch r {
	case "stop", "tool_calls", "function_call":
		return abi.FinishStop, ""
	case "length":
		return abi.FinishLength, "the answer reached the token limit"
	case "content_filter":
		return abi.FinishBlocked, "the provider's content filter stopped the answer"
	case "":
		return abi.FinishUnknown, ""
	}
	return abi.FinishOther, "finish reason " + r
}

// argumentsText returns the JSON text of a call's arguments.
func argumentsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := strings.TrimSpace(string(raw)); t != "null" {
		return t
	}
	return ""
}

// parseArguments decodes the arguments of a complete call; text that is not JSON is
// kept as a string (the tool's input validation then says what is wrong).
func parseArguments(text string, wrapped bool) any {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return text
	}
	return unwrap(v, wrapped)
}

// unwrap takes the input of a tool whose input is not an object out of {"input": ...}.
func unwrap(v any, wrapped bool) any {
	if !wrapped {
		return v
	}
	if m, ok := v.(map[string]any); ok {
		return m["input"]
	}
	return v
}

// contentText reads a message's content: a string, or the text of a list of parts.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" || p.Type == "output_text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// reasoningText reads a message's (or a delta's) reasoning, whichever field the
// server uses.
func (m *apiMessage) reasoningText() string {
	if m.ReasoningContent != nil && *m.ReasoningContent != "" {
		return *m.ReasoningContent
	}
	if m.Reasoning != nil {
		return *m.Reasoning
	}
	return ""
}

// custom is the response's provider details kept in GenerateResponse.Custom.
func (c *completion) custom() map[string]any {
	m := map[string]any{}
	if c.ID != "" {
		m["id"] = c.ID
	}
	if c.Model != "" {
		m["model"] = c.Model
	}
	if c.SystemFingerprint != "" {
		m["systemFingerprint"] = c.SystemFingerprint
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// callRef is the ref of a call: its id, or one made from its position when the
// server assigns none.
func callRef(id string, index int) string {
	if id != "" {
		return id
	}
	return fmt.Sprintf("call_%d", index)
}

// parseResponse reads a whole (not streamed) response.
func parseResponse(body []byte, names *toolNames, c *callInfo) (*abi.GenerateResponse, error) {
	var resp completion
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, badResponse(c, "the response is not JSON", body, err)
	}
	if resp.Error != nil {
		return nil, streamError(resp.Error, c)
	}
	var ch *choice
	for i := range resp.Choices {
		if resp.Choices[i].Index == 0 {
			ch = &resp.Choices[i]
			break
		}
	}
	if ch == nil || ch.Message == nil {
		return nil, badResponse(c, "the response has no choice", body, nil)
	}
	m := ch.Message
	parts := []*abi.Part{}
	if r := m.reasoningText(); r != "" {
		parts = append(parts, abi.NewReasoningPart(r))
	}
	if t := contentText(m.Content); t != "" {
		parts = append(parts, abi.NewTextPart(t))
	}
	for i, tc := range m.ToolCalls {
		api := tc.Function.Name
		parts = append(parts, abi.NewToolRequestPart(&abi.ToolRequest{
			Ref:   callRef(tc.ID, i),
			Name:  names.Original(api),
			Input: parseArguments(argumentsText(tc.Function.Arguments), names.wrapped[api]),
		}))
	}
	out := &abi.GenerateResponse{Message: abi.NewModelMessage(parts...), Usage: resp.Usage.toABI()}
	reason := ""
	if ch.FinishReason != nil {
		reason = *ch.FinishReason
	}
	out.FinishReason, out.FinishMessage = finishReason(reason)
	if m.Refusal != nil && *m.Refusal != "" {
		out.FinishReason, out.FinishMessage = abi.FinishBlocked, "the model refused: "+*m.Refusal
	}
	if cu := resp.custom(); cu != nil {
		out.Custom = cu
	}
	return out, nil
}

// badResponse is the error of a response the plugin cannot read.
func badResponse(c *callInfo, what string, body []byte, err error) *abi.Error {
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	msg := fmt.Sprintf("openai: %s from %s: %s", what, c.url, text)
	if err != nil {
		msg += ": " + err.Error()
	}
	return &abi.Error{Code: abi.CodeUnavailable, Message: msg}
}

// maxStreamedArguments bounds the arguments a partial tool request carries in a chunk
// (a chunk is at most 1 MiB); longer ones arrive whole in the final response only.
const maxStreamedArguments = 256 << 10

// streamedCall is a tool call being streamed.
type streamedCall struct {
	index int
	ref   string
	name  string // the API's name
	args  strings.Builder
	done  bool
}

// streamReader turns a streamed response (server-sent events of completion chunks)
// into chunks, emitted as each event arrives, and the final response.
type streamReader struct {
	names *toolNames
	call  *callInfo
	emit  func(*abi.GenerateResponseChunk) error

	acc      abi.Accumulator
	calls    []*streamedCall
	finish   *string
	refusal  strings.Builder
	usage    *usage
	info     completion // id, model, fingerprint
	finished bool       // [DONE] arrived
}

// readStream reads a streamed response to its end and returns the whole response.
func readStream(body io.Reader, names *toolNames, c *callInfo, emit func(*abi.GenerateResponseChunk) error) (*abi.GenerateResponse, error) {
	s := &streamReader{names: names, call: c, emit: emit}
	r := sse.NewReader(body)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, provider.TransportError("openai", "reading the stream from "+c.url, err)
		}
		data := strings.TrimSpace(ev.Data)
		if data == "[DONE]" {
			s.finished = true
			break
		}
		if data == "" {
			continue
		}
		if err := s.event(data); err != nil {
			return nil, err
		}
	}
	return s.response()
}

// event handles one event's data: a completion chunk.
func (s *streamReader) event(data string) error {
	var c completion
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return badResponse(s.call, "a streamed event is not JSON", []byte(data), err)
	}
	if c.Error != nil {
		return streamError(c.Error, s.call)
	}
	if c.ID != "" && s.info.ID == "" {
		s.info.ID = c.ID
	}
	if c.Model != "" && s.info.Model == "" {
		s.info.Model = c.Model
	}
	if c.SystemFingerprint != "" {
		s.info.SystemFingerprint = c.SystemFingerprint
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if d := ch.Delta; d != nil {
			if err := s.delta(d); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			r := *ch.FinishReason
			s.finish = &r
			if err := s.completeCalls(); err != nil {
				return err
			}
		}
	}
	return nil
}

// delta forwards one delta: reasoning, text, and the tool calls it continues, each
// call as a partial tool request holding the arguments accumulated so far.
func (s *streamReader) delta(d *apiMessage) error {
	var parts []*abi.Part
	if r := d.reasoningText(); r != "" {
		parts = append(parts, abi.NewReasoningPart(r))
	}
	if t := contentText(d.Content); t != "" {
		parts = append(parts, abi.NewTextPart(t))
	}
	if d.Refusal != nil {
		s.refusal.WriteString(*d.Refusal)
	}
	for _, tc := range d.ToolCalls {
		sc := s.streamedCall(tc)
		if tc.Function.Name != "" && sc.name == "" {
			sc.name = tc.Function.Name
		}
		sc.args.WriteString(argumentsText(tc.Function.Arguments))
		tr := &abi.ToolRequest{Ref: sc.ref, Name: s.names.Original(sc.name), Partial: true}
		if sc.args.Len() <= maxStreamedArguments {
			if v, ok := provider.RepairJSON(sc.args.String()); ok {
				tr.Input = unwrap(v, s.names.wrapped[sc.name])
			}
		}
		parts = append(parts, abi.NewToolRequestPart(tr))
	}
	return s.send(parts)
}

// streamedCall finds the call a tool call delta continues, or starts one.
func (s *streamReader) streamedCall(tc apiToolCall) *streamedCall {
	if tc.Index != nil {
		for _, c := range s.calls {
			if c.index == *tc.Index {
				return c
			}
		}
	} else if n := len(s.calls); n > 0 && (tc.ID == "" || s.calls[n-1].ref == tc.ID) {
		// No index: a delta without an id (or with the same one) continues the last call.
		return s.calls[n-1]
	}
	index := len(s.calls)
	if tc.Index != nil {
		index = *tc.Index
	}
	c := &streamedCall{index: index, ref: callRef(tc.ID, index)}
	s.calls = append(s.calls, c)
	return c
}

// completeCalls sends the calls streamed so far whole: partial no more, their
// arguments parsed.
func (s *streamReader) completeCalls() error {
	var parts []*abi.Part
	for _, c := range s.calls {
		if c.done {
			continue
		}
		c.done = true
		tr := &abi.ToolRequest{Ref: c.ref, Name: s.names.Original(c.name)}
		if c.args.Len() <= maxStreamedArguments {
			tr.Input = parseArguments(c.args.String(), s.names.wrapped[c.name])
		}
		parts = append(parts, abi.NewToolRequestPart(tr))
	}
	return s.send(parts)
}

// send emits a chunk of parts and adds it to the whole response.
func (s *streamReader) send(parts []*abi.Part) error {
	if len(parts) == 0 {
		return nil
	}
	chunk := &abi.GenerateResponseChunk{Role: abi.RoleModel, Content: parts}
	s.acc.Add(chunk)
	if s.emit == nil {
		return nil
	}
	return s.emit(chunk)
}

// response is the whole response once the stream has ended.
func (s *streamReader) response() (*abi.GenerateResponse, error) {
	if !s.finished && s.finish == nil {
		return nil, &abi.Error{Code: abi.CodeUnavailable, Message: fmt.Sprintf("openai: the stream from %s ended before the answer was complete", s.call.url)}
	}
	if err := s.completeCalls(); err != nil {
		return nil, err
	}
	parts := s.acc.Parts()
	// Arguments too long to stream were left out of the chunks: put them back.
	for _, p := range parts {
		if !p.IsToolRequest() {
			continue
		}
		for _, c := range s.calls {
			if c.ref == p.ToolRequest.Ref && c.args.Len() > maxStreamedArguments {
				p.ToolRequest.Input = parseArguments(c.args.String(), s.names.wrapped[c.name])
			}
		}
	}
	out := &abi.GenerateResponse{Message: abi.NewModelMessage(parts...), Usage: s.usage.toABI()}
	reason := ""
	if s.finish != nil {
		reason = *s.finish
	}
	out.FinishReason, out.FinishMessage = finishReason(reason)
	if s.refusal.Len() > 0 {
		out.FinishReason, out.FinishMessage = abi.FinishBlocked, "the model refused: "+s.refusal.String()
	}
	if cu := s.info.custom(); cu != nil {
		out.Custom = cu
	}
	return out, nil
}
