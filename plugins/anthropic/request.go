package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// block is one content block of the Messages API, in its JSON form.
type block = map[string]any

// apiMessage is one message of the Messages API request.
type apiMessage struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// defaultMaxTokens is max_tokens when the config sets none: the API requires it.
const defaultMaxTokens = 4096

// nameRule is the rule of the API's tool names, ^[a-zA-Z0-9_-]{1,64}$.
var nameRule = provider.NameRule{}

// buildRequest converts a generate request into the body of a Messages API request for
// the given model, and returns the tool names it used (sanitized, with their
// originals).
func buildRequest(model string, req *abi.GenerateRequest, stream bool) (map[string]any, *provider.ToolNames, error) {
	if req == nil {
		return nil, nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: no request")
	}
	config, err := provider.ConfigObject("anthropic", req.Config)
	if err != nil {
		return nil, nil, err
	}
	names := provider.NewToolNames(nameRule)
	for _, t := range req.Tools {
		if t != nil {
			names.API(t.Name)
		}
	}
	body := map[string]any{}
	for k, v := range config {
		switch k {
		case "temperature", "topP", "topK", "maxOutputTokens", "stopSequences", "version", "apiKey", "tools":
		default:
			body[k] = v // passthrough, "thinking" and snake_case keys included
		}
	}
	if v, ok := config["version"].(string); ok && v != "" {
		model = v
	}
	body["model"] = model
	for from, to := range map[string]string{"temperature": "temperature", "topP": "top_p", "topK": "top_k", "stopSequences": "stop_sequences"} {
		if v, ok := config[from]; ok && v != nil {
			body[to] = v
		}
	}
	if v, ok := config["maxOutputTokens"]; ok && v != nil {
		body["max_tokens"] = v
	} else if _, ok := body["max_tokens"]; !ok {
		body["max_tokens"] = defaultMaxTokens
	}

	system, rest := abi.SplitSystem(req.Messages)
	if sys, err := systemField(system); err != nil {
		return nil, nil, err
	} else if sys != nil {
		body["system"] = sys
	}
	msgs, err := convertMessages(rest, names)
	if err != nil {
		return nil, nil, err
	}
	body["messages"] = msgs

	var tools []any
	for _, t := range req.Tools {
		if t == nil {
			continue
		}
		schema := t.InputSchema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		tool := map[string]any{"name": names.API(t.Name), "input_schema": schema}
		if t.Description != "" {
			tool["description"] = t.Description
		}
		tools = append(tools, tool)
	}
	if extra, ok := config["tools"]; ok && extra != nil {
		list, ok := extra.([]any)
		if !ok {
			return nil, nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: config.tools must be an array of tool objects")
		}
		tools = append(tools, list...)
	}
	if len(tools) > 0 {
		body["tools"] = tools
		if _, set := body["tool_choice"]; !set {
			switch req.ToolChoice {
			case abi.ToolChoiceAuto:
				body["tool_choice"] = map[string]any{"type": "auto"}
			case abi.ToolChoiceRequired:
				body["tool_choice"] = map[string]any{"type": "any"}
			case abi.ToolChoiceNone:
				body["tool_choice"] = map[string]any{"type": "none"}
			}
		}
	}
	if stream {
		body["stream"] = true
	} else {
		delete(body, "stream")
	}
	return body, names, nil
}

// systemField converts the system messages' parts: a string, or text blocks when a part
// asks for cache_control; nil when there is no system text.
func systemField(parts []*abi.Part) (any, error) {
	var texts []string
	var blocks []block
	cached := false
	for _, p := range parts {
		switch {
		case p == nil:
			continue
		case p.IsText() || p.Kind == abi.PartData:
			t := p.Text
			if p.Kind == abi.PartData {
				b, _ := json.Marshal(p.Data)
				t = string(b)
			}
			if t == "" {
				continue
			}
			texts = append(texts, t)
			b := block{"type": "text", "text": t}
			if cc, ok := p.Metadata["cache_control"]; ok {
				b["cache_control"] = cc
				cached = true
			}
			blocks = append(blocks, b)
		case p.IsReasoning():
			continue
		default:
			return nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: a system message holds a %s part; only text is supported there", p.Kind)
		}
	}
	if len(texts) == 0 {
		return nil, nil
	}
	if cached {
		return blocks, nil
	}
	return strings.Join(texts, "\n\n"), nil
}

// convertMessages converts the conversation (system messages removed) into alternating
// user and assistant messages.
func convertMessages(msgs []*abi.Message, names *provider.ToolNames) ([]*apiMessage, error) {
	refs := newRefs()
	var out []*apiMessage
	for i, m := range msgs {
		if m == nil {
			continue
		}
		role := "user"
		if m.Role == abi.RoleModel {
			role = "assistant"
		}
		var content []block
		for j, p := range m.Content {
			b, err := convertPart(p, m.Role, names, refs, fmt.Sprintf("%d_%d", i, j))
			if err != nil {
				return nil, fmt.Errorf("%w (message %d, part %d)", err, i, j)
			}
			if b != nil {
				content = append(content, b)
			}
		}
		if len(content) == 0 {
			continue // the API refuses empty messages
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, content...)
			continue
		}
		out = append(out, &apiMessage{Role: role, Content: content})
	}
	for _, m := range out {
		if m.Role == "user" {
			toolResultsFirst(m.Content)
		}
	}
	// A last assistant message is a prefill, which may not end with white space.
	if n := len(out); n > 0 && out[n-1].Role == "assistant" {
		c := out[n-1].Content
		if last := c[len(c)-1]; last["type"] == "text" {
			t := strings.TrimRight(last["text"].(string), " \t\r\n")
			if t == "" {
				out[n-1].Content = c[:len(c)-1]
				if len(out[n-1].Content) == 0 {
					out = out[:n-1]
				}
			} else {
				last["text"] = t
			}
		}
	}
	return out, nil
}

// toolResultsFirst moves tool_result blocks before the other blocks of a user message,
// keeping their order, as the API requires.
func toolResultsFirst(c []block) {
	var results, others []block
	for _, b := range c {
		if b["type"] == "tool_result" {
			results = append(results, b)
		} else {
			others = append(others, b)
		}
	}
	copy(c, append(results, others...))
}

// convertPart converts one part of a message with the given role into a content
// block; nil means the part is not sent.
func convertPart(p *abi.Part, role abi.Role, names *provider.ToolNames, refs *refs, pos string) (block, error) {
	if p == nil {
		return nil, nil
	}
	var b block
	switch p.Kind {
	case abi.PartText:
		if p.Text == "" {
			return nil, nil // the API refuses empty text blocks
		}
		b = block{"type": "text", "text": p.Text}
	case abi.PartData:
		data, err := json.Marshal(p.Data)
		if err != nil {
			return nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: data part: %v", err)
		}
		b = block{"type": "text", "text": string(data)}
	case abi.PartMedia:
		var err error
		if b, err = mediaBlock(p.Media); err != nil {
			return nil, err
		}
	case abi.PartToolRequest:
		tr := p.ToolRequest
		if tr == nil {
			return nil, nil
		}
		b = block{
			"type":  "tool_use",
			"id":    refs.request(tr.Name, tr.Ref, pos),
			"name":  names.API(tr.Name),
			"input": toolInput(tr.Input),
		}
	case abi.PartToolResponse:
		tr := p.ToolResponse
		if tr == nil {
			return nil, nil
		}
		var err error
		if b, err = toolResultBlock(tr, p.Metadata, refs.response(tr.Name, tr.Ref, pos)); err != nil {
			return nil, err
		}
	case abi.PartReasoning:
		sig, _ := p.Metadata["signature"].(string)
		if role != abi.RoleModel || sig == "" {
			return nil, nil // the API accepts only the thinking it signed
		}
		b = block{"type": "thinking", "thinking": p.Text, "signature": sig}
	case abi.PartCustom:
		raw, ok := p.Custom["anthropic"].(map[string]any)
		if !ok || raw["type"] == nil {
			return nil, nil // another provider's content
		}
		b = block{}
		for k, v := range raw {
			b[k] = v
		}
	default:
		return nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: %s parts are not supported", p.Kind)
	}
	if cc, ok := p.Metadata["cache_control"]; ok {
		b["cache_control"] = cc
	}
	return b, nil
}

// toolInput returns a tool request's input as the object the API wants.
func toolInput(in any) any {
	switch v := in.(type) {
	case nil:
		return map[string]any{}
	case map[string]any:
		return v
	case string:
		var m map[string]any
		if json.Unmarshal([]byte(v), &m) == nil && m != nil {
			return m
		}
	}
	return map[string]any{"input": in}
}

// toolResultBlock converts a tool response into a tool_result block.
func toolResultBlock(tr *abi.ToolResponse, md map[string]any, id string) (block, error) {
	var content []block
	if tr.Output != nil {
		text, ok := tr.Output.(string)
		if !ok {
			b, err := json.Marshal(tr.Output)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: tool %q output: %v", tr.Name, err)
			}
			text = string(b)
		}
		if text != "" {
			content = append(content, block{"type": "text", "text": text})
		}
	}
	for _, p := range tr.Content {
		if p == nil {
			continue
		}
		switch p.Kind {
		case abi.PartText:
			if p.Text != "" {
				content = append(content, block{"type": "text", "text": p.Text})
			}
		case abi.PartMedia:
			b, err := mediaBlock(p.Media)
			if err != nil {
				return nil, err
			}
			content = append(content, b)
		case abi.PartData:
			b, _ := json.Marshal(p.Data)
			content = append(content, block{"type": "text", "text": string(b)})
		}
	}
	b := block{"type": "tool_result", "tool_use_id": id}
	if len(content) > 0 {
		b["content"] = content
	}
	if isError(md) {
		b["is_error"] = true
	}
	return b, nil
}

// isError reports whether a tool response part's metadata marks a failed tool.
func isError(md map[string]any) bool {
	for _, k := range []string{"isError", "is_error"} {
		if v, ok := md[k].(bool); ok {
			return v
		}
	}
	v, ok := md["error"]
	return ok && v != nil && v != false && v != ""
}

// mediaBlock converts media into an image or document block.
func mediaBlock(m *abi.Media) (block, error) {
	if m == nil || m.URL == "" {
		return nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: media part has no url")
	}
	contentType, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(m.ContentType)), ";")
	var source block
	d, isData, err := provider.ParseDataURI(m.URL)
	switch {
	case err != nil:
		return nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: %v", err)
	case isData:
		if contentType == "" {
			contentType = d.Type()
		}
		if contentType == "text/plain" {
			source = block{"type": "text", "media_type": "text/plain", "data": string(d.Data)}
		} else {
			source = block{"type": "base64", "media_type": contentType, "data": d.Base64()}
		}
	default:
		source = block{"type": "url", "url": m.URL}
	}
	switch {
	case strings.HasPrefix(contentType, "image/"):
		return block{"type": "image", "source": source}, nil
	case contentType == "application/pdf", contentType == "text/plain":
		return block{"type": "document", "source": source}, nil
	case contentType == "" && source["type"] == "url":
		// A URL without a content type: guess from its extension.
		if strings.HasSuffix(strings.ToLower(m.URL), ".pdf") {
			return block{"type": "document", "source": source}, nil
		}
		return block{"type": "image", "source": source}, nil
	}
	return nil, abi.Errorf(abi.CodeInvalidInput, "anthropic: media of type %q is not supported (images, PDF and plain text are)", contentType)
}

// refs assigns tool_use ids to tool requests that have no ref (from a provider that
// assigns none) and matches tool responses without a ref to them, by tool name in
// order.
type refs struct {
	pending map[string][]string // tool name -> ids of unanswered ref-less requests
}

func newRefs() *refs { return &refs{pending: map[string][]string{}} }

func (r *refs) request(name, ref, pos string) string {
	if ref != "" {
		return sanitizeID(ref)
	}
	id := "toolu_terrarium_" + pos
	r.pending[name] = append(r.pending[name], id)
	return id
}

func (r *refs) response(name, ref, pos string) string {
	if ref != "" {
		return sanitizeID(ref)
	}
	if q := r.pending[name]; len(q) > 0 {
		r.pending[name] = q[1:]
		return q[0]
	}
	return "toolu_terrarium_" + pos
}

// sanitizeID makes a ref a valid tool_use id (^[a-zA-Z0-9_-]+$): any other byte
// becomes '_'.
func sanitizeID(ref string) string {
	var b strings.Builder
	for _, c := range []byte(ref) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
