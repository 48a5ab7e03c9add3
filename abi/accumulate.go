package abi

import (
	"encoding/json"
	"strings"
)

// Accumulator builds whole content from streamed chunks: adjacent text and reasoning
// deltas are joined, and partial tool requests are gathered into whole ones.
//
// A partial tool request continues the earlier request with the same ref (or, when the
// provider assigns no refs, the latest still-partial request with the same name). Its
// input either replaces what has arrived (an object or array: the accumulated arguments)
// or, when it is a string, is appended as a fragment of the arguments' JSON text, which
// is parsed when the request completes. The zero Accumulator is ready to use.
type Accumulator struct {
	parts []*Part
	// fragments holds the JSON text streamed so far for partial tool requests whose
	// input arrives as string deltas, keyed by index in parts.
	fragments map[int]*strings.Builder
}

// Add folds one chunk into the content.
func (a *Accumulator) Add(c *GenerateResponseChunk) {
	if c == nil {
		return
	}
	if c.Aggregated {
		a.parts, a.fragments = nil, nil
	}
	for _, p := range c.Content {
		a.addPart(p)
	}
}

func (a *Accumulator) addPart(p *Part) {
	if p == nil {
		return
	}
	switch p.Kind {
	case PartText, PartReasoning:
		if n := len(a.parts); n > 0 {
			last := a.parts[n-1]
			if last.Kind == p.Kind && last.Metadata == nil && p.Metadata == nil {
				last.Text += p.Text
				return
			}
		}
	case PartToolRequest:
		if i, ok := a.findToolRequest(p.ToolRequest); ok {
			a.mergeToolRequest(i, p)
			return
		}
		a.parts = append(a.parts, p.Clone())
		if p.ToolRequest.Partial {
			a.mergeToolRequest(len(a.parts)-1, p)
		}
		return
	}
	a.parts = append(a.parts, p.Clone())
}

func (a *Accumulator) findToolRequest(tr *ToolRequest) (int, bool) {
	for i := len(a.parts) - 1; i >= 0; i-- {
		q := a.parts[i]
		if !q.IsToolRequest() {
			continue
		}
		if tr.Ref != "" && q.ToolRequest.Ref == tr.Ref {
			return i, true
		}
		if tr.Ref == "" && q.ToolRequest.Ref == "" && q.ToolRequest.Name == tr.Name && q.ToolRequest.Partial {
			return i, true
		}
	}
	return 0, false
}

func (a *Accumulator) mergeToolRequest(i int, p *Part) {
	cur := a.parts[i].ToolRequest
	in := p.ToolRequest
	if !in.Partial {
		// The complete request wins; parse streamed fragments only if it lacks input.
		whole := *in
		if whole.Input == nil {
			whole.Input = a.parseFragments(i)
		}
		a.parts[i].ToolRequest = &whole
		delete(a.fragments, i)
		return
	}
	if s, ok := in.Input.(string); ok {
		if a.fragments == nil {
			a.fragments = map[int]*strings.Builder{}
		}
		b := a.fragments[i]
		if b == nil {
			b = &strings.Builder{}
			a.fragments[i] = b
		}
		b.WriteString(s)
		next := *cur
		next.Input = nil
		next.Partial = true
		a.parts[i].ToolRequest = &next
		return
	}
	next := *cur
	next.Input = in.Input
	next.Partial = true
	if in.Name != "" {
		next.Name = in.Name
	}
	a.parts[i].ToolRequest = &next
}

func (a *Accumulator) parseFragments(i int) any {
	b := a.fragments[i]
	if b == nil || b.Len() == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(b.String()), &v); err != nil {
		// Keep the text rather than lose it; the tool's input validation reports it.
		return b.String()
	}
	return v
}

// Parts returns the content so far. Tool requests still partial are completed: their
// streamed fragments are parsed and their Partial flag cleared.
func (a *Accumulator) Parts() []*Part {
	out := make([]*Part, len(a.parts))
	for i, p := range a.parts {
		c := p.Clone()
		if c.IsToolRequest() && c.ToolRequest.Partial {
			c.ToolRequest.Partial = false
			if c.ToolRequest.Input == nil {
				c.ToolRequest.Input = a.parseFragments(i)
			}
		}
		out[i] = c
	}
	return out
}

// Message returns the content so far as a message with the given role.
func (a *Accumulator) Message(role Role) *Message { return NewMessage(role, a.Parts()...) }
