package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// PartKind names the one kind of content a Part carries. Its value is the JSON key of
// that content in Genkit's format.
type PartKind string

// The kinds of Part.
const (
	PartText         PartKind = "text"
	PartMedia        PartKind = "media"
	PartToolRequest  PartKind = "toolRequest"
	PartToolResponse PartKind = "toolResponse"
	PartReasoning    PartKind = "reasoning"
	PartCustom       PartKind = "custom"
	PartData         PartKind = "data"
	PartResource     PartKind = "resource"
)

// partKinds lists every kind in the order used by error messages.
var partKinds = []PartKind{PartText, PartMedia, PartToolRequest, PartToolResponse, PartReasoning, PartCustom, PartData, PartResource}

// Part is one piece of a message's content. Exactly one kind of content is set, named
// by Kind; Metadata may accompany any kind.
//
// Text holds the text of a text part and the text of a reasoning part.
type Part struct {
	Kind         PartKind
	Text         string
	Media        *Media
	ToolRequest  *ToolRequest
	ToolResponse *ToolResponse
	Custom       map[string]any
	Data         any
	Resource     *Resource
	Metadata     map[string]any
}

// Media is inline (a data: URI) or referenced (any other URL) media content.
type Media struct {
	URL         string `json:"url"`
	ContentType string `json:"contentType,omitempty"`
}

// ToolRequest is a model's request to run a tool.
type ToolRequest struct {
	// Ref correlates the request with its response; providers that assign call IDs put
	// them here.
	Ref  string `json:"ref,omitempty"`
	Name string `json:"name"`
	// Input is the tool's argument, usually a JSON object decoded into Go values.
	Input any `json:"input,omitempty"`
	// Partial marks a request still being streamed; its Input holds what has arrived.
	Partial bool `json:"partial,omitempty"`
}

// ToolResponse is the result of running a tool, sent back to the model.
type ToolResponse struct {
	Ref    string `json:"ref,omitempty"`
	Name   string `json:"name"`
	Output any    `json:"output,omitempty"`
	// Content carries rich results (images, files) next to or instead of Output.
	Content []*Part `json:"content,omitempty"`
}

// UnmarshalJSON decodes a tool response, refusing a null part of its content.
func (r *ToolResponse) UnmarshalJSON(b []byte) error {
	type plain ToolResponse
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	return NoNulls("tool response content", r.Content)
}

// Resource references content by URI.
type Resource struct {
	URI string `json:"uri"`
}

// NewTextPart returns a text part.
func NewTextPart(text string) *Part { return &Part{Kind: PartText, Text: text} }

// NewReasoningPart returns a part holding a model's reasoning text.
func NewReasoningPart(text string) *Part { return &Part{Kind: PartReasoning, Text: text} }

// NewMediaPart returns a media part; url is a data: URI or any other URL.
func NewMediaPart(contentType, url string) *Part {
	return &Part{Kind: PartMedia, Media: &Media{URL: url, ContentType: contentType}}
}

// NewToolRequestPart returns a part asking for a tool to run.
func NewToolRequestPart(req *ToolRequest) *Part {
	return &Part{Kind: PartToolRequest, ToolRequest: req}
}

// NewToolResponsePart returns a part answering a tool request.
func NewToolResponsePart(resp *ToolResponse) *Part {
	return &Part{Kind: PartToolResponse, ToolResponse: resp}
}

// NewCustomPart returns a part with provider-specific content.
func NewCustomPart(custom map[string]any) *Part { return &Part{Kind: PartCustom, Custom: custom} }

// NewDataPart returns a part with structured data.
func NewDataPart(data any) *Part { return &Part{Kind: PartData, Data: data} }

// NewResourcePart returns a part referencing a resource by URI.
func NewResourcePart(uri string) *Part {
	return &Part{Kind: PartResource, Resource: &Resource{URI: uri}}
}

// IsText reports whether p is a text part.
func (p *Part) IsText() bool { return p != nil && p.Kind == PartText }

// IsReasoning reports whether p is a reasoning part.
func (p *Part) IsReasoning() bool { return p != nil && p.Kind == PartReasoning }

// IsMedia reports whether p is a media part.
func (p *Part) IsMedia() bool { return p != nil && p.Kind == PartMedia }

// IsToolRequest reports whether p is a tool request part.
func (p *Part) IsToolRequest() bool { return p != nil && p.Kind == PartToolRequest }

// IsToolResponse reports whether p is a tool response part.
func (p *Part) IsToolResponse() bool { return p != nil && p.Kind == PartToolResponse }

// Clone returns a copy of p whose pointers (media, tool request, tool response, resource)
// and maps are its own, so that changing the copy's fields or metadata keys leaves p
// untouched. Values inside Input, Output, Data and Custom are shared.
func (p *Part) Clone() *Part {
	if p == nil {
		return nil
	}
	c := *p
	if p.Media != nil {
		m := *p.Media
		c.Media = &m
	}
	if p.ToolRequest != nil {
		r := *p.ToolRequest
		c.ToolRequest = &r
	}
	if p.ToolResponse != nil {
		r := *p.ToolResponse
		r.Content = cloneParts(p.ToolResponse.Content)
		c.ToolResponse = &r
	}
	if p.Resource != nil {
		r := *p.Resource
		c.Resource = &r
	}
	c.Custom = cloneMap(p.Custom)
	c.Metadata = cloneMap(p.Metadata)
	return &c
}

func cloneParts(parts []*Part) []*Part {
	if parts == nil {
		return nil
	}
	out := make([]*Part, len(parts))
	for i, p := range parts {
		out[i] = p.Clone()
	}
	return out
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// MarshalJSON encodes p in Genkit's format: an object with the key of its kind and,
// when set, "metadata".
func (p Part) MarshalJSON() ([]byte, error) {
	return p.AppendJSON(make([]byte, 0, 32))
}

// AppendJSON appends p's encoding, MarshalJSON's, to b.
func (p *Part) AppendJSON(b []byte) ([]byte, error) {
	// Written as its one key and value, each encoded alone: parts are what messages,
	// and so snapshots, streams and traces, hold most.
	var key string
	var value any
	switch p.Kind {
	case PartText, PartReasoning:
		b = append(b, `{"`...)
		b = append(b, p.Kind...)
		b = append(b, `":`...)
		b = AppendJSONString(b, p.Text)
		return closeWithMetadata(b, p.Metadata)
	case PartMedia:
		if p.Media == nil {
			return nil, fmt.Errorf("abi: media part has no media")
		}
		key, value = "media", p.Media
	case PartToolRequest:
		if p.ToolRequest == nil {
			return nil, fmt.Errorf("abi: tool request part has no tool request")
		}
		key, value = "toolRequest", p.ToolRequest
	case PartToolResponse:
		if p.ToolResponse == nil {
			return nil, fmt.Errorf("abi: tool response part has no tool response")
		}
		key, value = "toolResponse", p.ToolResponse
	case PartCustom:
		custom := p.Custom
		if custom == nil {
			custom = map[string]any{}
		}
		key, value = "custom", custom
	case PartData:
		if p.Data == nil {
			return nil, fmt.Errorf("abi: data part has no data")
		}
		key, value = "data", p.Data
	case PartResource:
		if p.Resource == nil {
			return nil, fmt.Errorf("abi: resource part has no resource")
		}
		key, value = "resource", p.Resource
	default:
		return nil, fmt.Errorf("abi: part has unknown kind %q", p.Kind)
	}
	b = append(b, `{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b, err := appendJSON(b, value)
	if err != nil {
		return nil, err
	}
	return closeWithMetadata(b, p.Metadata)
}

// UnmarshalJSON decodes a part in Genkit's format. It fails when the object sets no
// kind of content, more than one, or a key Genkit's schema does not define.
func (p *Part) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return fmt.Errorf("abi: part: %w", err)
	}
	if fields == nil {
		return fmt.Errorf("abi: part is null, want an object with one of %s", kindList())
	}
	var kinds []string
	for key, raw := range fields {
		if key == "metadata" {
			continue
		}
		if !isKind(key) {
			return fmt.Errorf("abi: part has unknown field %q (want one of %s, and metadata)", key, kindList())
		}
		if isNull(raw) {
			continue
		}
		kinds = append(kinds, key)
	}
	switch len(kinds) {
	case 0:
		return fmt.Errorf("abi: part has no content: want exactly one of %s", kindList())
	case 1:
	default:
		sort.Strings(kinds)
		return fmt.Errorf("abi: part has %d kinds of content (%s): want exactly one", len(kinds), strings.Join(kinds, ", "))
	}
	*p = Part{Kind: PartKind(kinds[0])}
	raw := fields[kinds[0]]
	var err error
	switch p.Kind {
	case PartText, PartReasoning:
		err = json.Unmarshal(raw, &p.Text)
	case PartMedia:
		err = json.Unmarshal(raw, &p.Media)
		if err == nil && p.Media.URL == "" {
			err = fmt.Errorf("media has no url")
		}
	case PartToolRequest:
		err = json.Unmarshal(raw, &p.ToolRequest)
		if err == nil && p.ToolRequest.Name == "" {
			err = fmt.Errorf("tool request has no name")
		}
	case PartToolResponse:
		err = json.Unmarshal(raw, &p.ToolResponse)
		if err == nil && p.ToolResponse.Name == "" {
			err = fmt.Errorf("tool response has no name")
		}
	case PartCustom:
		err = json.Unmarshal(raw, &p.Custom)
	case PartData:
		err = json.Unmarshal(raw, &p.Data)
	case PartResource:
		err = json.Unmarshal(raw, &p.Resource)
	}
	if err != nil {
		return fmt.Errorf("abi: %s part: %w", p.Kind, err)
	}
	if md, ok := fields["metadata"]; ok && !isNull(md) {
		if err := json.Unmarshal(md, &p.Metadata); err != nil {
			return fmt.Errorf("abi: part metadata: %w", err)
		}
	}
	return nil
}

func isKind(key string) bool {
	for _, k := range partKinds {
		if string(k) == key {
			return true
		}
	}
	return false
}

func kindList() string {
	s := make([]string, len(partKinds))
	for i, k := range partKinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }
