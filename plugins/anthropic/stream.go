package main

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
	"github.com/terrarium-ai/terrarium/sdk/sse"
)

// streamEvent is the data of one server-sent event of a streamed message.
type streamEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	Message      *apiResponse    `json:"message"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        *streamDelta    `json:"delta"`
	Usage        *apiUsage       `json:"usage"`
	Error        *apiErrorDetail `json:"error"`
}

// streamDelta is the delta of a content_block_delta or message_delta event.
type streamDelta struct {
	Type         string `json:"type"`
	Text         string `json:"text"`
	PartialJSON  string `json:"partial_json"`
	Thinking     string `json:"thinking"`
	Signature    string `json:"signature"`
	Citation     any    `json:"citation"`
	StopReason   string `json:"stop_reason"`
	StopSequence string `json:"stop_sequence"`
}

// streamBlock is a content block being streamed. Its chunks are gathered by an
// abi.Accumulator of its own, so that the blocks' boundaries (and each thinking
// block's signature) survive in the final message.
type streamBlock struct {
	typ       string
	acc       abi.Accumulator
	ref, name string          // tool_use
	json      strings.Builder // tool_use input, or a custom block's streamed input
	signature string          // thinking
	citations []any           // text
	raw       map[string]any  // another kind of block, sent whole at its end
	stopped   bool
}

// streamer turns the events of a streamed message into chunks and, at its end, the
// response.
type streamer struct {
	names   *provider.ToolNames
	emit    func(*abi.GenerateResponseChunk) error
	msg     apiResponse
	usage   apiUsage
	blocks  map[int]*streamBlock
	started bool
	stopped bool
}

// readStream reads a streamed message from body, passing each delta to emit as it
// arrives, and returns the whole response.
func readStream(body io.Reader, names *provider.ToolNames, emit func(*abi.GenerateResponseChunk) error) (*abi.GenerateResponse, error) {
	s := &streamer{names: names, emit: emit, blocks: map[int]*streamBlock{}}
	r := sse.NewReader(body)
	for !s.stopped {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, provider.TransportError("anthropic", "reading the stream", err)
		}
		if err := s.event(ev); err != nil {
			return nil, err
		}
	}
	if !s.stopped {
		return nil, abi.Errorf(abi.CodeUnavailable, "anthropic: the stream ended before message_stop")
	}
	return s.response(), nil
}

// event handles one event.
func (s *streamer) event(ev *sse.Event) error {
	var e streamEvent
	if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
		return abi.Errorf(abi.CodeUnavailable, "anthropic: malformed %s event: %v", ev.Event, err)
	}
	if e.Type == "" {
		e.Type = ev.Event
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			s.msg = *e.Message
			s.usage.merge(e.Message.Usage)
		}
		s.started = true
	case "content_block_start":
		return s.blockStart(e.Index, e.ContentBlock)
	case "content_block_delta":
		if e.Delta != nil {
			return s.blockDelta(e.Index, e.Delta)
		}
	case "content_block_stop":
		return s.blockStop(e.Index)
	case "message_delta":
		if e.Delta != nil {
			if e.Delta.StopReason != "" {
				s.msg.StopReason = e.Delta.StopReason
			}
			if e.Delta.StopSequence != "" {
				s.msg.StopSequence = e.Delta.StopSequence
			}
		}
		s.usage.merge(e.Usage)
	case "message_stop":
		s.stopped = true
	case "error":
		d := e.Error
		if d == nil {
			d = &apiErrorDetail{Type: "error", Message: ev.Data}
		}
		return abi.Errorf(abi.CodeUnavailable, "anthropic: the stream failed: %s: %s", d.Type, d.Message)
	}
	// ping, and event types added after this plugin was written, need nothing.
	return nil
}

// send streams a part of a block and gathers it.
func (s *streamer) send(b *streamBlock, p *abi.Part) error {
	b.acc.Add(&abi.GenerateResponseChunk{Content: []*abi.Part{p}})
	return s.emit(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{p.Clone()}})
}

func (s *streamer) blockStart(i int, raw json.RawMessage) error {
	var ab apiBlock
	if err := json.Unmarshal(raw, &ab); err != nil {
		return abi.Errorf(abi.CodeUnavailable, "anthropic: malformed content_block_start: %v", err)
	}
	b := &streamBlock{typ: ab.Type}
	s.blocks[i] = b
	switch ab.Type {
	case "text":
		b.citations = ab.Citations
		if ab.Text != "" {
			return s.send(b, abi.NewTextPart(ab.Text))
		}
	case "thinking":
		b.signature = ab.Signature
		if ab.Thinking != "" {
			return s.send(b, abi.NewReasoningPart(ab.Thinking))
		}
	case "tool_use":
		b.ref, b.name = ab.ID, s.names.Original(ab.Name)
		return s.send(b, abi.NewToolRequestPart(&abi.ToolRequest{Ref: b.ref, Name: b.name, Partial: true}))
	default:
		if err := json.Unmarshal(raw, &b.raw); err != nil || b.raw == nil {
			return abi.Errorf(abi.CodeUnavailable, "anthropic: malformed content_block_start: %s", raw)
		}
	}
	return nil
}

func (s *streamer) blockDelta(i int, d *streamDelta) error {
	b := s.blocks[i]
	if b == nil {
		return abi.Errorf(abi.CodeUnavailable, "anthropic: content_block_delta for block %d, which has not started", i)
	}
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			return s.send(b, abi.NewTextPart(d.Text))
		}
	case "thinking_delta":
		if d.Thinking != "" {
			return s.send(b, abi.NewReasoningPart(d.Thinking))
		}
	case "signature_delta":
		b.signature += d.Signature
	case "citations_delta":
		if d.Citation != nil {
			b.citations = append(b.citations, d.Citation)
		}
	case "input_json_delta":
		if d.PartialJSON == "" {
			return nil
		}
		b.json.WriteString(d.PartialJSON)
		if b.typ != "tool_use" {
			return nil
		}
		input, ok := provider.RepairJSON(b.json.String())
		if !ok {
			return nil // nothing whole enough to show yet
		}
		return s.send(b, abi.NewToolRequestPart(&abi.ToolRequest{Ref: b.ref, Name: b.name, Input: input, Partial: true}))
	}
	return nil
}

func (s *streamer) blockStop(i int) error {
	b := s.blocks[i]
	if b == nil || b.stopped {
		return nil
	}
	b.stopped = true
	switch b.typ {
	case "tool_use":
		var input any = map[string]any{}
		if t := strings.TrimSpace(b.json.String()); t != "" {
			if err := json.Unmarshal([]byte(t), &input); err != nil {
				return abi.Errorf(abi.CodeUnavailable, "anthropic: the input of tool_use %s is not JSON: %v", b.ref, err)
			}
		}
		return s.send(b, abi.NewToolRequestPart(&abi.ToolRequest{Ref: b.ref, Name: b.name, Input: input}))
	case "text", "thinking":
		return nil
	}
	if t := strings.TrimSpace(b.json.String()); t != "" {
		var input any
		if json.Unmarshal([]byte(t), &input) == nil {
			b.raw["input"] = input
		}
	}
	return s.send(b, abi.NewCustomPart(map[string]any{"anthropic": b.raw}))
}

// response assembles the whole response from the blocks, in index order.
func (s *streamer) response() *abi.GenerateResponse {
	idx := make([]int, 0, len(s.blocks))
	for i := range s.blocks {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	parts := []*abi.Part{}
	for _, i := range idx {
		b := s.blocks[i]
		for _, p := range b.acc.Parts() {
			switch {
			case p.IsReasoning() && b.signature != "":
				p.Metadata = map[string]any{"signature": b.signature}
			case p.IsText() && len(b.citations) > 0:
				p.Metadata = map[string]any{"citations": b.citations}
			}
			parts = append(parts, p)
		}
		if b.typ == "thinking" && len(b.acc.Parts()) == 0 && b.signature != "" {
			// Thinking whose text was omitted still carries the signature to send back.
			parts = append(parts, &abi.Part{Kind: abi.PartReasoning, Metadata: map[string]any{"signature": b.signature}})
		}
	}
	var u *apiUsage
	if s.started {
		u = &s.usage
	}
	return response(&s.msg, parts, u)
}
