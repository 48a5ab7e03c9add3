package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// Metadata keys of parts this plugin reads and writes.
const (
	// mdThoughtSignature holds a part's thoughtSignature, which Gemini wants back.
	mdThoughtSignature = "thoughtSignature"
	// mdSyntheticRef marks a tool request whose ref the plugin made up because Gemini
	// gave the call no id: the ref is not sent back to Gemini as an id.
	mdSyntheticRef = "syntheticRef"
)

// generationKeys are the config keys that go into generationConfig.
var generationKeys = map[string]bool{
	"temperature": true, "topP": true, "topK": true, "maxOutputTokens": true,
	"stopSequences": true, "candidateCount": true, "presencePenalty": true,
	"frequencyPenalty": true, "seed": true, "responseLogprobs": true, "logprobs": true,
	"responseMimeType": true, "responseSchema": true, "responseJsonSchema": true,
	"responseModalities": true, "thinkingConfig": true, "speechConfig": true,
	"imageConfig": true, "mediaResolution": true, "enableEnhancedCivicAnswers": true,
}

// serverTools are the config keys naming tools Gemini runs itself; each becomes an
// entry of tools, {key: value}.
var serverTools = map[string]bool{
	"googleSearch": true, "googleSearchRetrieval": true, "codeExecution": true,
	"urlContext": true, "googleMaps": true, "fileSearch": true, "computerUse": true,
}

// partFields are the part-level fields of Gemini parts that parts' metadata carries.
var partFields = []string{mdThoughtSignature, "videoMetadata", "mediaResolution"}

// apiRequest is a GenerateContentRequest ready to send.
type apiRequest struct {
	// body is the request's JSON object.
	body map[string]any
	// model replaces the model's name in the URL when the config names a version.
	model string
	// names maps the request's tool names to Gemini's and back.
	names *provider.ToolNames
}

// buildRequest converts a model request into a Gemini GenerateContentRequest.
func buildRequest(req *abi.GenerateRequest) (*apiRequest, error) {
	cfg, err := provider.ConfigObject("gemini", req.Config)
	if err != nil {
		return nil, err
	}
	out := &apiRequest{body: map[string]any{}, names: newNames(req.Tools)}
	msgs := make([]*abi.Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		if m != nil {
			msgs = append(msgs, m)
		}
	}
	system, rest := abi.SplitSystem(msgs)
	contents, err := toContents(rest, out.names)
	if err != nil {
		return nil, err
	}
	out.body["contents"] = contents
	if len(system) > 0 {
		parts, err := toParts(system, out.names, nil)
		if err != nil {
			return nil, fmt.Errorf("system message: %w", err)
		}
		if len(parts) > 0 {
			out.body["systemInstruction"] = map[string]any{"parts": parts}
		}
	}

	var tools []any
	if len(req.Tools) > 0 {
		decls := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			d := map[string]any{"name": out.names.API(t.Name), "description": t.Description}
			if t.InputSchema != nil {
				d["parametersJsonSchema"] = cleanSchema(t.InputSchema)
			}
			decls[i] = d
		}
		tools = append(tools, map[string]any{"functionDeclarations": decls})
	}
	gen := map[string]any{}
	var genOverride, fcOverride map[string]any
	for k, v := range cfg {
		switch {
		case generationKeys[k]:
			gen[k] = v
		case serverTools[k]:
			switch v := v.(type) {
			case nil:
			case bool:
				if v {
					tools = append(tools, map[string]any{k: map[string]any{}})
				}
			default:
				tools = append(tools, map[string]any{k: v})
			}
		case k == "tools":
			list, ok := v.([]any)
			if !ok {
				return nil, abi.Errorf(abi.CodeInvalidInput, "config.tools: want an array of Gemini tools, got %T", v)
			}
			tools = append(tools, list...)
		case k == "generationConfig":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, abi.Errorf(abi.CodeInvalidInput, "config.generationConfig: want an object, got %T", v)
			}
			genOverride = m
		case k == "functionCallingConfig":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, abi.Errorf(abi.CodeInvalidInput, "config.functionCallingConfig: want an object, got %T", v)
			}
			fcOverride = m
		case k == "version":
			s, ok := v.(string)
			if !ok {
				return nil, abi.Errorf(abi.CodeInvalidInput, "config.version: want a model name, got %T", v)
			}
			out.model = strings.TrimPrefix(strings.TrimSpace(s), "models/")
		default:
			out.body[k] = v
		}
	}
	if len(tools) > 0 {
		out.body["tools"] = tools
	}
	if err := out.toolConfig(req.ToolChoice, fcOverride); err != nil {
		return nil, err
	}
	if o := req.Output; o != nil && o.Format == "json" && len(req.Tools) == 0 {
		// Gemini refuses a JSON response type together with function calling; with
		// tools the format instructions in the prompt do the job.
		if _, set := gen["responseMimeType"]; !set {
			gen["responseMimeType"] = "application/json"
		}
		_, s1 := gen["responseSchema"]
		_, s2 := gen["responseJsonSchema"]
		if o.Constrained && o.Schema != nil && !s1 && !s2 {
			gen["responseJsonSchema"] = cleanSchema(o.Schema)
		}
	}
	for k, v := range genOverride {
		gen[k] = v
	}
	if len(gen) > 0 {
		out.body["generationConfig"] = gen
	}
	return out, nil
}

// toolConfig sets toolConfig.functionCallingConfig: the mode the tool choice asks for,
// then what config.toolConfig and config.functionCallingConfig say.
func (r *apiRequest) toolConfig(choice abi.ToolChoice, override map[string]any) error {
	fc := map[string]any{}
	switch choice {
	case "":
	case abi.ToolChoiceAuto:
		fc["mode"] = "AUTO"
	case abi.ToolChoiceRequired:
		fc["mode"] = "ANY"
	case abi.ToolChoiceNone:
		fc["mode"] = "NONE"
	default:
		return abi.Errorf(abi.CodeInvalidInput, "toolChoice %q: want auto, required or none", choice)
	}
	tc := map[string]any{}
	if v, ok := r.body["toolConfig"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			return abi.Errorf(abi.CodeInvalidInput, "config.toolConfig: want an object, got %T", v)
		}
		for k, v := range m {
			tc[k] = v
		}
		if inner, ok := m["functionCallingConfig"].(map[string]any); ok {
			for k, v := range inner {
				fc[k] = v
			}
		}
	}
	for k, v := range override {
		fc[k] = v
	}
	if len(fc) > 0 {
		tc["functionCallingConfig"] = fc
	}
	if len(tc) > 0 {
		r.body["toolConfig"] = tc
	}
	return nil
}

// cleanSchema returns a copy of a JSON Schema without the keys Gemini does not take at
// its top ($schema).
func cleanSchema(s map[string]any) map[string]any {
	c := make(map[string]any, len(s))
	for k, v := range s {
		if k != "$schema" {
			c[k] = v
		}
	}
	return c
}

// toContents converts the conversation (system messages removed) into Gemini
// contents: user and model messages keep their role, tool messages become user
// contents of function responses. Messages without content are dropped.
func toContents(msgs []*abi.Message, n *provider.ToolNames) ([]any, error) {
	// Refs the plugin made up are not sent back as ids.
	synthetic := map[string]bool{}
	for _, m := range msgs {
		if m == nil || m.Role != abi.RoleModel {
			continue
		}
		for _, p := range m.Content {
			if p.IsToolRequest() && p.Metadata[mdSyntheticRef] == true {
				synthetic[p.ToolRequest.Ref] = true
			}
		}
	}
	contents := []any{}
	for i, m := range msgs {
		if m == nil {
			continue
		}
		var role string
		switch m.Role {
		case abi.RoleUser, abi.RoleTool:
			role = "user"
		case abi.RoleModel:
			role = "model"
		default:
			return nil, abi.Errorf(abi.CodeInvalidInput, "message %d: role %q", i, m.Role)
		}
		parts, err := toParts(m.Content, n, synthetic)
		if err != nil {
			return nil, abi.Errorf(abi.CodeInvalidInput, "message %d: %v", i, err)
		}
		if len(parts) == 0 {
			continue
		}
		contents = append(contents, map[string]any{"role": role, "parts": parts})
	}
	return contents, nil
}

// toParts converts parts into Gemini parts.
func toParts(parts []*abi.Part, n *provider.ToolNames, synthetic map[string]bool) ([]any, error) {
	out := make([]any, 0, len(parts))
	for i, p := range parts {
		if p == nil {
			continue
		}
		gp, err := toPart(p, n, synthetic)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		if gp != nil {
			out = append(out, gp)
		}
	}
	return out, nil
}

// toPart converts one part; nil means the part has nothing to send.
func toPart(p *abi.Part, n *provider.ToolNames, synthetic map[string]bool) (map[string]any, error) {
	var gp map[string]any
	switch p.Kind {
	case abi.PartText:
		gp = map[string]any{"text": p.Text}
	case abi.PartReasoning:
		gp = map[string]any{"text": p.Text, "thought": true}
	case abi.PartMedia:
		if p.Media == nil {
			return nil, fmt.Errorf("media part without media")
		}
		var err error
		if gp, err = mediaPart(p.Media.URL, p.Media.ContentType); err != nil {
			return nil, err
		}
	case abi.PartToolRequest:
		tr := p.ToolRequest
		if tr == nil {
			return nil, fmt.Errorf("tool request part without a request")
		}
		fc := map[string]any{"name": n.API(tr.Name)}
		if tr.Input != nil {
			fc["args"] = objectOf(tr.Input, "input")
		}
		if tr.Ref != "" && !synthetic[tr.Ref] {
			fc["id"] = tr.Ref
		}
		gp = map[string]any{"functionCall": fc}
	case abi.PartToolResponse:
		tr := p.ToolResponse
		if tr == nil {
			return nil, fmt.Errorf("tool response part without a response")
		}
		fr, err := functionResponse(tr, n, synthetic)
		if err != nil {
			return nil, err
		}
		gp = map[string]any{"functionResponse": fr}
	case abi.PartCustom:
		// Provider content (executableCode, codeExecutionResult, ...) goes back as it
		// came.
		gp = make(map[string]any, len(p.Custom))
		for k, v := range p.Custom {
			gp[k] = v
		}
		if len(gp) == 0 {
			return nil, nil
		}
	case abi.PartData:
		b, err := json.Marshal(p.Data)
		if err != nil {
			return nil, fmt.Errorf("data part: %v", err)
		}
		gp = map[string]any{"text": string(b)}
	case abi.PartResource:
		if p.Resource == nil {
			return nil, fmt.Errorf("resource part without a resource")
		}
		gp = map[string]any{"fileData": map[string]any{"fileUri": p.Resource.URI}}
	default:
		return nil, fmt.Errorf("unknown part kind %q", p.Kind)
	}
	for _, k := range partFields {
		if v, ok := p.Metadata[k]; ok && v != nil {
			gp[k] = v
		}
	}
	return gp, nil
}

// functionResponse converts a tool response: its output is the response object itself
// when it is an object, else {"output": output}; media in its content goes into parts
// (Gemini 3's multimodal function responses), text into the output when there is none
// and beside it ({"output", "content"}) when there is one.
func functionResponse(tr *abi.ToolResponse, n *provider.ToolNames, synthetic map[string]bool) (map[string]any, error) {
	output := tr.Output
	var media []any
	var text strings.Builder
	for _, c := range tr.Content {
		switch {
		case c.IsMedia() && c.Media != nil:
			mp, err := mediaPart(c.Media.URL, c.Media.ContentType)
			if err != nil {
				return nil, fmt.Errorf("tool response content: %w", err)
			}
			media = append(media, mp)
		case c.IsText():
			text.WriteString(c.Text)
		}
	}
	response := objectOf(output, "output")
	switch {
	case text.Len() == 0:
	case output == nil:
		response = map[string]any{"output": text.String()}
	default:
		// A response has no parts for text: it goes beside the output, wrapped so that
		// an object output's own keys are left alone.
		response = map[string]any{"output": output, "content": text.String()}
	}
	fr := map[string]any{"name": n.API(tr.Name), "response": response}
	if tr.Ref != "" && !synthetic[tr.Ref] {
		fr["id"] = tr.Ref
	}
	if len(media) > 0 {
		fr["parts"] = media
	}
	return fr, nil
}

// objectOf returns v when it is a JSON object, else {key: v}: Gemini's function call
// arguments and responses are objects.
func objectOf(v any, key string) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	if v == nil {
		return map[string]any{}
	}
	return map[string]any{key: v}
}

// mediaPart converts a media URL: a data: URI becomes inlineData, any other URL
// fileData.
func mediaPart(u, contentType string) (map[string]any, error) {
	d, isData, err := provider.ParseDataURI(u)
	if err != nil {
		return nil, err
	}
	if isData {
		// The media type keeps its parameters ("audio/L16;codec=pcm;rate=24000"), as
		// Gemini gives them.
		mime := d.MediaType
		if contentType != "" {
			mime = contentType
		}
		if mime == "" {
			mime = "application/octet-stream"
		}
		return map[string]any{"inlineData": map[string]any{"mimeType": mime, "data": d.Base64()}}, nil
	}
	if u == "" {
		return nil, fmt.Errorf("media without a url")
	}
	fd := map[string]any{"fileUri": u}
	if contentType != "" {
		fd["mimeType"] = contentType
	}
	return map[string]any{"fileData": fd}, nil
}

// nameRule is the rule of Gemini's function names: letters, digits, '_', '.', ':' and
// '-', starting with a letter or '_', at most 64 bytes.
var nameRule = provider.NameRule{Extra: ".:", LetterFirst: true}

// newNames assigns Gemini names to the request's tools, in order.
func newNames(tools []*abi.ToolDefinition) *provider.ToolNames {
	n := provider.NewToolNames(nameRule)
	for _, t := range tools {
		if t != nil {
			n.API(t.Name)
		}
	}
	return n
}
