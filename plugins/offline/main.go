// Command offline is a Terrarium plugin serving one model, echo (registered as
// /model/offline/echo): an offline, deterministic, rule-based stand-in for a model, for
// demos and tests. It is not a language model and understands nothing; it answers by
// these rules, in order:
//
//  1. when the last message is a tool message: "Tool results: " followed by the JSON
//     outputs of its tool responses (separated by "; ");
//  2. when the last user message's text is "/call <tool> <json-input>" and the request
//     offers that tool: a request to call it (ref "call-1") with that input; when the
//     text says "use <tool>" for an offered tool, or the request's tool choice is
//     "required": a request to call that tool (or the first offered) with a minimal
//     input of its schema;
//  3. when the request asks for JSON output with a schema: a minimal JSON value of the
//     schema (required properties only, filled with short values: "a", 1, 1.5, true,
//     the first enum value, nested values; lengths and bounds respected; see package
//     internal/schema/instance), as text;
//  4. otherwise: "echo: " followed by the last user message's text.
//
// It streams its text word by word before returning the whole response, whose usage
// counts input and output characters, and tokens as a word each (a tool request or
// response is one). It needs no capabilities.
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o offline.wasm .
package main

import (
	"context"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema/instance"
	"github.com/terrarium-ai/terrarium/sdk"
)

func main() {
	sdk.Plugin(sdk.Info{
		Name:    "offline",
		Version: "1.0.0",
		Description: "An offline, deterministic, rule-based stand-in for a model, for demos and tests. " +
			"Not a language model: it echoes, calls a tool when told \"/call <tool> <json>\" and fills JSON schemas with minimal values.",
	})
	sdk.Model("echo", &abi.ModelInfo{
		Label: "Offline echo (rule-based, not a language model)",
		Supports: &abi.ModelSupports{
			Multiturn:   true,
			Tools:       true,
			SystemRole:  true,
			Output:      []string{"text", "json"},
			Constrained: abi.ConstrainedNone,
		},
		Stage: abi.StageStable,
	}, generate)
}

func generate(_ context.Context, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
	msg := answer(req)
	for _, p := range msg.Content {
		if p.IsText() {
			for _, w := range words(p.Text) {
				if err := sdk.StreamChunk(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{abi.NewTextPart(w)}}); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := sdk.StreamChunk(&abi.GenerateResponseChunk{Role: abi.RoleModel, Content: []*abi.Part{p}}); err != nil {
			return nil, err
		}
	}
	return &abi.GenerateResponse{Message: msg, FinishReason: abi.FinishStop, Usage: usage(req, msg)}, nil
}

// usage counts what an answer used: characters, and tokens as a word each (a tool
// request is one), a stand-in for a tokenizer that shows usage adding up.
func usage(req *abi.GenerateRequest, msg *abi.Message) *abi.GenerationUsage {
	u := &abi.GenerationUsage{OutputCharacters: utf8.RuneCountInString(msg.Text()),
		OutputTokens: len(strings.Fields(msg.Text())) + len(msg.ToolRequests())}
	for _, m := range req.Messages {
		u.InputCharacters += utf8.RuneCountInString(m.Text())
		u.InputTokens += len(strings.Fields(m.Text())) + len(m.ToolRequests()) + len(m.ToolResponses())
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return u
}

// answer applies the rules of the package doc.
func answer(req *abi.GenerateRequest) *abi.Message {
	var last *abi.Message
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1]
	}
	// 1. Tool results.
	if last != nil && last.Role == abi.RoleTool {
		var outs []string
		for _, r := range last.ToolResponses() {
			b, err := json.Marshal(r.Output)
			if err != nil {
				b = []byte("null")
			}
			outs = append(outs, string(b))
		}
		return abi.NewModelTextMessage("Tool results: " + strings.Join(outs, "; "))
	}
	text := lastUserText(req.Messages)
	// 2. "/call <tool> <json-input>", "use <tool>", or a required tool choice.
	if tr := toolCall(text, req.Tools); tr != nil {
		return abi.NewModelMessage(abi.NewToolRequestPart(tr))
	}
	if t := toolToUse(text, req); t != nil {
		return abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Ref: "call-1", Name: t.Name, Input: instance.Minimal(t.InputSchema)}))
	}
	// 3. A minimal instance of the requested JSON schema.
	if o := req.Output; o != nil && o.Format == "json" && o.Schema != nil {
		b, err := json.Marshal(instance.Minimal(o.Schema))
		if err == nil {
			return abi.NewModelTextMessage(string(b))
		}
	}
	// 4. Echo.
	return abi.NewModelTextMessage("echo: " + text)
}

func lastUserText(msgs []*abi.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == abi.RoleUser {
			return msgs[i].Text()
		}
	}
	return ""
}

// toolCall parses "/call <tool> <json-input>" for a tool the request offers; nil when
// the text is not such a command, the tool is not offered or the input is not JSON.
func toolCall(text string, tools []*abi.ToolDefinition) *abi.ToolRequest {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), "/call ")
	if !ok {
		return nil
	}
	rest = strings.TrimSpace(rest)
	name, input := rest, ""
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		name, input = rest[:i], rest[i:]
	}
	offered := false
	for _, t := range tools {
		if t.Name == name {
			offered = true
			break
		}
	}
	if !offered {
		return nil
	}
	var v any
	if input = strings.TrimSpace(input); input != "" {
		if err := json.Unmarshal([]byte(input), &v); err != nil {
			return nil
		}
	}
	return &abi.ToolRequest{Ref: "call-1", Name: name, Input: v}
}

// toolToUse returns the offered tool the text names after "use", or the first offered
// tool when the request requires a tool call; nil otherwise.
func toolToUse(text string, req *abi.GenerateRequest) *abi.ToolDefinition {
	if len(req.Tools) == 0 || req.ToolChoice == abi.ToolChoiceNone {
		return nil
	}
	lower := strings.ToLower(text)
	for _, t := range req.Tools {
		if strings.Contains(lower, "use "+strings.ToLower(t.Name)) {
			return t
		}
	}
	if req.ToolChoice == abi.ToolChoiceRequired {
		return req.Tools[0]
	}
	return nil
}

// words splits text into words, each keeping the spaces after it, so that the words
// joined are the text.
func words(text string) []string {
	var out []string
	start := 0
	inSpace := false
	for i, r := range text {
		sp := unicode.IsSpace(r)
		if !sp && inSpace {
			out = append(out, text[start:i])
			start = i
		}
		inSpace = sp
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}
