package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// chatMessage is a message of the Chat Completions API.
type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, a list of contentParts, or null (an assistant message that
	// only calls tools).
	Content    any        `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// toolCall is a function call in an assistant message of a request.
type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments.
	Arguments string `json:"arguments"`
}

// contentPart is one part of a message's content.
type contentPart struct {
	Type       string      `json:"type"`
	Text       *string     `json:"text,omitempty"`
	ImageURL   *imageURL   `json:"image_url,omitempty"`
	InputAudio *inputAudio `json:"input_audio,omitempty"`
	File       *fileData   `json:"file,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type inputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

type fileData struct {
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data"`
}

func textPart(s string) contentPart { return contentPart{Type: "text", Text: &s} }

// Config keys the plugin handles itself; every other key of a request's config goes
// into the request body untouched.
const (
	cfgTemperature    = "temperature"
	cfgTopP           = "topP"
	cfgTopK           = "topK"
	cfgMaxTokens      = "maxOutputTokens"
	cfgStop           = "stopSequences"
	cfgVersion        = "version"
	cfgTools          = "tools"
	cfgMaxTokensField = "maxTokensField"
)

// reservedBody are body keys config cannot set: the plugin owns them.
var reservedBody = map[string]bool{"messages": true, "stream": true}

// buildRequest turns a generate request into the body of POST /chat/completions for
// the model, streaming or not. It returns the body and the tool names it used.
func buildRequest(model string, req *abi.GenerateRequest, stream bool) (map[string]any, *toolNames, error) {
	if req == nil {
		return nil, nil, abi.Errorf(abi.CodeInvalidInput, "openai: no request")
	}
	cfg, err := provider.ConfigObject("openai", req.Config)
	if err != nil {
		return nil, nil, err
	}
	names := newToolNames()
	tools := make([]any, 0, len(req.Tools))
	for _, def := range req.Tools {
		if def == nil {
			continue
		}
		t, err := convertTool(def, names)
		if err != nil {
			return nil, nil, err
		}
		tools = append(tools, t)
	}
	msgs, err := convertMessages(req.Messages, names)
	if err != nil {
		return nil, nil, err
	}
	body := map[string]any{"model": model, "messages": msgs}

	if v, ok := cfg[cfgVersion].(string); ok && v != "" {
		body["model"] = v
	}
	for key, apiKey := range map[string]string{cfgTemperature: "temperature", cfgTopP: "top_p", cfgTopK: "top_k", cfgStop: "stop"} {
		if v := cfg[key]; v != nil {
			body[apiKey] = v
		}
	}
	if v := cfg[cfgMaxTokens]; v != nil {
		field := "max_tokens"
		if reasoningModel(body["model"]) {
			field = "max_completion_tokens"
		}
		if f, ok := cfg[cfgMaxTokensField].(string); ok && f != "" {
			if f != "max_tokens" && f != "max_completion_tokens" {
				return nil, nil, abi.Errorf(abi.CodeInvalidInput, "openai: config %s is %q: want max_tokens or max_completion_tokens", cfgMaxTokensField, f)
			}
			field = f
		}
		body[field] = v
	}
	if v := cfg[cfgTools]; v != nil {
		extra, ok := v.([]any)
		if !ok {
			return nil, nil, abi.Errorf(abi.CodeInvalidInput, "openai: config tools is %T: want a list of tools in the API's format", v)
		}
		tools = append(tools, extra...)
	}
	if len(tools) > 0 {
		body["tools"] = tools
		switch req.ToolChoice {
		case "":
		case abi.ToolChoiceAuto, abi.ToolChoiceRequired, abi.ToolChoiceNone:
			body["tool_choice"] = string(req.ToolChoice)
		default:
			return nil, nil, abi.Errorf(abi.CodeInvalidInput, "openai: tool choice %q: want auto, required or none", req.ToolChoice)
		}
	}
	if rf := responseFormat(req.Output); rf != nil {
		body["response_format"] = rf
	}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	for k, v := range cfg {
		switch k {
		case cfgTemperature, cfgTopP, cfgTopK, cfgMaxTokens, cfgStop, cfgVersion, cfgTools, cfgMaxTokensField:
			continue
		}
		if reservedBody[k] {
			continue
		}
		body[k] = v
	}
	return body, names, nil
}

// toolNames maps the tool names of a request to the names sent to the API,
// ^[a-zA-Z0-9_-]{1,64}$, and back.
type toolNames struct {
	*provider.ToolNames
	// wrapped holds the API names of tools whose input schema is not an object: the API
	// only takes object parameters, so their input travels as {"input": ...}.
	wrapped map[string]bool
}

func newToolNames() *toolNames {
	return &toolNames{ToolNames: provider.NewToolNames(provider.NameRule{}), wrapped: map[string]bool{}}
}

// reasoningModel reports whether a model is one of OpenAI's reasoning models, which
// take max_completion_tokens and refuse max_tokens.
func reasoningModel(model any) bool {
	name, _ := model.(string)
	for _, prefix := range []string{"o1", "o3", "o4", "gpt-5"} {
		if name == prefix || strings.HasPrefix(name, prefix+"-") {
			return true
		}
	}
	return false
}

// responseFormat is the API's response_format for an output config: json_schema when
// the output is JSON with a schema to enforce, json_object for other JSON.
func responseFormat(out *abi.OutputConfig) map[string]any {
	if out == nil || out.Format != "json" {
		return nil
	}
	if out.Constrained && out.Schema != nil {
		return map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "output", "schema": out.Schema, "strict": false,
		}}
	}
	return map[string]any{"type": "json_object"}
}

// convertTool turns a tool definition into the API's function tool. A tool whose input
// is not an object gets parameters {"input": <its schema>}.
func convertTool(def *abi.ToolDefinition, names *toolNames) (map[string]any, error) {
	name := names.API(def.Name)
	params := def.InputSchema
	switch {
	case params == nil:
		params = map[string]any{"type": "object", "properties": map[string]any{}}
	case !objectSchema(params):
		names.wrapped[name] = true
		params = map[string]any{
			"type":       "object",
			"properties": map[string]any{"input": params},
			"required":   []any{"input"},
		}
	}
	fn := map[string]any{"name": name, "parameters": params}
	if def.Description != "" {
		fn["description"] = def.Description
	}
	return map[string]any{"type": "function", "function": fn}, nil
}

// objectSchema reports whether a JSON Schema describes objects only.
func objectSchema(s map[string]any) bool {
	switch t := s["type"].(type) {
	case string:
		return t == "object"
	case nil:
		_, hasProps := s["properties"]
		return hasProps
	}
	return false
}

// convertMessages turns the conversation into the API's messages: system messages
// with role system, model messages with role assistant (their tool requests as
// tool_calls, the request's ref as the call's id), and each tool response as a
// message with role tool answering the call of the same id. Reasoning parts are not
// sent back; media in a tool response follow its tool messages in a user message.
func convertMessages(msgs []*abi.Message, names *toolNames) ([]chatMessage, error) {
	out := make([]chatMessage, 0, len(msgs))
	// pending holds the ids of the last assistant message's calls by API name, for tool
	// responses without a ref.
	pending := map[string][]string{}
	synthesized := 0
	for i, m := range msgs {
		if m == nil {
			return nil, abi.Errorf(abi.CodeInvalidInput, "openai: message %d is null", i)
		}
		switch m.Role {
		case abi.RoleSystem:
			out = append(out, chatMessage{Role: "system", Content: m.Text()})
		case abi.RoleUser:
			content, err := userContent(m.Content)
			if err != nil {
				return nil, atMessage(i, err)
			}
			out = append(out, chatMessage{Role: "user", Content: content})
		case abi.RoleModel:
			pending = map[string][]string{}
			var text strings.Builder
			var calls []toolCall
			for _, p := range m.Content {
				switch p.Kind {
				case abi.PartText:
					text.WriteString(p.Text)
				case abi.PartToolRequest:
					tr := p.ToolRequest
					id := tr.Ref
					if id == "" {
						synthesized++
						id = fmt.Sprintf("call_%d", synthesized)
					}
					name := names.API(tr.Name)
					args, err := arguments(tr.Input, names.wrapped[name])
					if err != nil {
						return nil, abi.Errorf(abi.CodeInvalidInput, "openai: message %d: tool request %q: %v", i, tr.Name, err)
					}
					calls = append(calls, toolCall{ID: id, Type: "function", Function: functionCall{Name: name, Arguments: args}})
					pending[name] = append(pending[name], id)
				}
			}
			msg := chatMessage{Role: "assistant", ToolCalls: calls}
			if text.Len() > 0 || len(calls) == 0 {
				msg.Content = text.String()
			}
			out = append(out, msg)
		case abi.RoleTool:
			var media []contentPart
			for _, p := range m.Content {
				if !p.IsToolResponse() {
					continue
				}
				r := p.ToolResponse
				name := names.API(r.Name)
				id := r.Ref
				if id == "" {
					ids := pending[name]
					if len(ids) == 0 {
						return nil, abi.Errorf(abi.CodeInvalidInput, "openai: message %d: the response of tool %q has no ref and answers no earlier request", i, r.Name)
					}
					id, pending[name] = ids[0], ids[1:]
				}
				content, parts, err := toolResult(r)
				if err != nil {
					return nil, atMessage(i, err)
				}
				media = append(media, parts...)
				out = append(out, chatMessage{Role: "tool", ToolCallID: id, Content: content})
			}
			if len(media) > 0 {
				parts := append([]contentPart{textPart("The tools returned these files:")}, media...)
				out = append(out, chatMessage{Role: "user", Content: parts})
			}
		default:
			return nil, abi.Errorf(abi.CodeInvalidInput, "openai: message %d has role %q", i, m.Role)
		}
	}
	return out, nil
}

// atMessage puts the index of the message at fault in an error's message.
func atMessage(i int, err error) error {
	e := abi.AsError(err)
	return &abi.Error{Code: e.Code, Message: fmt.Sprintf("openai: message %d: %s", i, strings.TrimPrefix(e.Message, "openai: "))}
}

// arguments is the JSON text of a tool request's input.
func arguments(input any, wrapped bool) (string, error) {
	if wrapped {
		input = map[string]any{"input": input}
	}
	if input == nil {
		return "{}", nil
	}
	if s, ok := input.(string); ok && json.Valid([]byte(s)) {
		return s, nil // arguments kept as text because they did not parse as an object
	}
	b, err := json.Marshal(input)
	return string(b), err
}

// toolResult is the content of a tool message: the output (a string as is, anything
// else as JSON) and the text of the response's content parts; its media parts are
// returned apart.
func toolResult(r *abi.ToolResponse) (string, []contentPart, error) {
	var texts []string
	switch o := r.Output.(type) {
	case nil:
	case string:
		texts = append(texts, o)
	default:
		b, err := json.Marshal(o)
		if err != nil {
			return "", nil, abi.Errorf(abi.CodeInvalidInput, "openai: the output of tool %q: %v", r.Name, err)
		}
		texts = append(texts, string(b))
	}
	var media []contentPart
	for _, p := range r.Content {
		switch p.Kind {
		case abi.PartText:
			texts = append(texts, p.Text)
		case abi.PartMedia:
			cp, err := mediaPart(p.Media)
			if err != nil {
				return "", nil, err
			}
			media = append(media, cp)
		}
	}
	if len(texts) == 0 {
		return "null", media, nil
	}
	return strings.Join(texts, "\n"), media, nil
}

// userContent is the content of a user message: a string when it is one text part, a
// list of parts otherwise (images as image_url, audio as input_audio, other files as
// file; data parts as their JSON text).
func userContent(parts []*abi.Part) (any, error) {
	if len(parts) == 1 && parts[0].IsText() {
		return parts[0].Text, nil
	}
	out := make([]contentPart, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case abi.PartText:
			if p.Text != "" {
				out = append(out, textPart(p.Text))
			}
		case abi.PartMedia:
			cp, err := mediaPart(p.Media)
			if err != nil {
				return nil, err
			}
			out = append(out, cp)
		case abi.PartData:
			b, err := json.Marshal(p.Data)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidInput, "openai: data part: %v", err)
			}
			out = append(out, textPart(string(b)))
		case abi.PartResource:
			out = append(out, textPart(p.Resource.URI))
		}
	}
	if len(out) == 0 {
		return "", nil
	}
	if len(out) == 1 && out[0].Type == "text" {
		return *out[0].Text, nil
	}
	return out, nil
}

// mediaPart turns a media part into a content part: audio data as input_audio, other
// non-image data (PDFs...) as file, images and URLs as image_url.
func mediaPart(m *abi.Media) (contentPart, error) {
	if m == nil || m.URL == "" {
		return contentPart{}, abi.Errorf(abi.CodeInvalidInput, "openai: media part without a url")
	}
	d, isData, err := provider.ParseDataURI(m.URL)
	if err != nil {
		return contentPart{}, abi.Errorf(abi.CodeInvalidInput, "openai: media: %v", err)
	}
	if !isData {
		return contentPart{Type: "image_url", ImageURL: &imageURL{URL: m.URL}}, nil
	}
	ct, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(m.ContentType)), ";")
	if ct == "" {
		ct = d.Type()
	}
	switch {
	case strings.HasPrefix(ct, "audio/"):
		format := strings.TrimPrefix(ct, "audio/")
		switch format {
		case "mpeg", "mp3":
			format = "mp3"
		case "wav", "x-wav", "wave", "vnd.wave":
			format = "wav"
		}
		return contentPart{Type: "input_audio", InputAudio: &inputAudio{Data: d.Base64(), Format: format}}, nil
	case ct != "" && !strings.HasPrefix(ct, "image/"):
		name := "file"
		if _, sub, ok := strings.Cut(ct, "/"); ok && sub != "" {
			name += "." + sub
		}
		return contentPart{Type: "file", File: &fileData{Filename: name, FileData: "data:" + ct + ";base64," + d.Base64()}}, nil
	}
	return contentPart{Type: "image_url", ImageURL: &imageURL{URL: m.URL}}, nil
}
