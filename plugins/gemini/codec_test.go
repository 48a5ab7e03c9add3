package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider/providertest"
)

// codec is the Gemini API's generateContent and streamGenerateContent?alt=sse methods
// as a server sees them (POST .../models/{model}:{method}), for providertest's fake
// server. It refuses with 400 INVALID_ARGUMENT what the API refuses: a body that is
// not JSON, no contents, a role other than user and model, a content without parts, a
// part without data. Its function calls carry no id and a thoughtSignature, as Gemini
// 2.5's do.
type codec struct{}

// partData are the data fields of a Gemini part; a part needs one.
var partData = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"}

// geminiContent is a content of a request.
type geminiContent struct {
	Role  string           `json:"role"`
	Parts []map[string]any `json:"parts"`
}

// contentRequest is what the codec reads of a GenerateContentRequest.
type contentRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string         `json:"name"`
			Description          string         `json:"description"`
			Parameters           map[string]any `json:"parameters"`
			ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig struct {
		FunctionCallingConfig struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig struct {
		ResponseMimeType   string         `json:"responseMimeType"`
		ResponseSchema     map[string]any `json:"responseSchema"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		MaxOutputTokens    int            `json:"maxOutputTokens"`
		StopSequences      []string       `json:"stopSequences"`
		ThinkingConfig     struct {
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

func (codec) Decode(r *http.Request, body []byte) (*providertest.Request, error) {
	notFound := &providertest.HTTPError{Status: 404, Message: "Requested entity was not found."}
	i := strings.LastIndex(r.URL.Path, "/models/")
	if i < 0 || r.Method != http.MethodPost {
		return nil, notFound
	}
	model, method, _ := strings.Cut(r.URL.Path[i+len("/models/"):], ":")
	stream := method == "streamGenerateContent"
	if model == "" || method != "generateContent" && !stream {
		return nil, notFound
	}
	if stream && r.URL.Query().Get("alt") != "sse" {
		return nil, fmt.Errorf("streamGenerateContent without alt=sse answers a JSON array, not server-sent events")
	}
	var c contentRequest
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("Invalid JSON payload received. %v", err)
	}
	if len(c.Contents) == 0 {
		return nil, fmt.Errorf("* GenerateContentRequest.contents: contents is not specified")
	}
	var raw map[string]any
	json.Unmarshal(body, &raw)
	g := c.GenerationConfig
	req := &providertest.Request{Model: model, Stream: stream, Header: r.Header, Body: raw,
		JSON: g.ResponseMimeType == "application/json", MaxTokens: g.MaxOutputTokens, StopSequences: g.StopSequences,
		Reasoning: g.ThinkingConfig.IncludeThoughts}
	if req.Schema = g.ResponseJSONSchema; req.Schema == nil {
		req.Schema = g.ResponseSchema
	}
	if s := c.SystemInstruction; s != nil {
		parts, err := decodeParts("systemInstruction", s.Parts)
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, &abi.Message{Role: abi.RoleSystem, Content: parts})
	}
	for i, content := range c.Contents {
		if content.Role != "user" && content.Role != "model" {
			return nil, fmt.Errorf("Please use a valid role: user, model. (contents[%d].role %q)", i, content.Role)
		}
		if len(content.Parts) == 0 {
			return nil, fmt.Errorf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i)
		}
		parts, err := decodeParts(fmt.Sprintf("contents[%d]", i), content.Parts)
		if err != nil {
			return nil, err
		}
		role := abi.RoleUser
		if content.Role == "model" {
			role = abi.RoleModel
		}
		req.Messages = append(req.Messages, &abi.Message{Role: role, Content: parts})
	}
	for _, t := range c.Tools {
		for _, d := range t.FunctionDeclarations {
			schema := d.ParametersJSONSchema
			if schema == nil {
				schema = d.Parameters
			}
			req.Tools = append(req.Tools, &abi.ToolDefinition{Name: d.Name, Description: d.Description, InputSchema: schema})
		}
	}
	switch fc := c.ToolConfig.FunctionCallingConfig; fc.Mode {
	case "AUTO":
		req.ToolChoice = abi.ToolChoiceAuto
	case "ANY":
		req.ToolChoice = abi.ToolChoiceRequired
		if len(fc.AllowedFunctionNames) == 1 {
			req.Tool = fc.AllowedFunctionNames[0]
		}
	case "NONE":
		req.ToolChoice = abi.ToolChoiceNone
	}
	return req, nil
}

// decodeParts reads the parts of the content at: text (a thought as reasoning), inline
// data as data: URLs, file data as URLs, function calls and responses (a response's
// media parts as its content).
func decodeParts(at string, parts []map[string]any) ([]*abi.Part, error) {
	var out []*abi.Part
	for j, p := range parts {
		var data string
		for _, k := range partData {
			if _, ok := p[k]; ok {
				data = k
			}
		}
		switch data {
		case "":
			return nil, fmt.Errorf("* GenerateContentRequest.%s.parts[%d].data: required oneof field 'data' must have one initialized field", at, j)
		case "text":
			text, _ := p["text"].(string)
			if p["thought"] == true {
				out = append(out, abi.NewReasoningPart(text))
			} else {
				out = append(out, abi.NewTextPart(text))
			}
		case "inlineData", "fileData":
			out = append(out, mediaOf(p))
		case "functionCall":
			id, _ := providertest.Field(p, "functionCall", "id").(string)
			name, _ := providertest.Field(p, "functionCall", "name").(string)
			out = append(out, abi.NewToolRequestPart(&abi.ToolRequest{Ref: id, Name: name, Input: providertest.Field(p, "functionCall", "args")}))
		case "functionResponse":
			fr, _ := p["functionResponse"].(map[string]any)
			id, _ := fr["id"].(string)
			name, _ := fr["name"].(string)
			tr := &abi.ToolResponse{Ref: id, Name: name, Output: fr["response"]}
			if o, ok := fr["response"].(map[string]any); ok && len(o) == 1 && o["output"] != nil {
				tr.Output = o["output"] // the plugin's wrapping of an output that is not an object
			}
			inner, _ := fr["parts"].([]any)
			for _, ip := range inner {
				if ip, ok := ip.(map[string]any); ok {
					tr.Content = append(tr.Content, mediaOf(ip))
				}
			}
			out = append(out, abi.NewToolResponsePart(tr))
		default:
			out = append(out, abi.NewCustomPart(p))
		}
	}
	return out, nil
}

// mediaOf reads an inlineData or fileData part.
func mediaOf(p map[string]any) *abi.Part {
	if d, ok := p["inlineData"]; ok {
		mime, _ := providertest.Field(d, "mimeType").(string)
		return abi.NewMediaPart(mime, fmt.Sprintf("data:%s;base64,%v", mime, providertest.Field(d, "data")))
	}
	mime, _ := providertest.Field(p, "fileData", "mimeType").(string)
	uri, _ := providertest.Field(p, "fileData", "fileUri").(string)
	return abi.NewMediaPart(mime, uri)
}

// fakeSignature is the thoughtSignature of the fake's function calls.
const fakeSignature = "ZmFrZS1zaWduYXR1cmU="

// callPart is the functionCall part of an answer's call.
func callPart(c *providertest.Call) map[string]any {
	var args any
	json.Unmarshal([]byte(c.Args), &args)
	return map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}, "thoughtSignature": fakeSignature}
}

// response is a GenerateContentResponse of one candidate with parts, ending the answer
// (with its finish reason and usage) when end.
func response(req *providertest.Request, a *providertest.Answer, parts []any, end bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	resp := map[string]any{"candidates": []any{cand}, "modelVersion": req.Model, "responseId": a.ID}
	if end {
		cand["finishReason"] = "STOP"
		if a.Finish == abi.FinishLength {
			cand["finishReason"] = "MAX_TOKENS"
		}
		usage := map[string]any{"promptTokenCount": a.InputTokens, "candidatesTokenCount": a.OutputTokens,
			"totalTokenCount": a.InputTokens + a.OutputTokens + a.ReasoningTokens}
		if a.ReasoningTokens > 0 {
			usage["thoughtsTokenCount"] = a.ReasoningTokens
		}
		resp["usageMetadata"] = usage
	}
	return resp
}

func (codec) Write(w http.ResponseWriter, req *providertest.Request, a *providertest.Answer) {
	var parts []any
	if a.Reasoning != "" {
		parts = append(parts, map[string]any{"text": a.Reasoning, "thought": true})
	}
	if a.Call != nil {
		parts = append(parts, callPart(a.Call))
	} else {
		parts = append(parts, map[string]any{"text": a.Text})
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	json.NewEncoder(w).Encode(response(req, a, parts, true))
}

func (codec) Stream(w http.ResponseWriter, req *providertest.Request, a *providertest.Answer) providertest.Events {
	w.Header().Set("Content-Type", "text/event-stream")
	return &streamWriter{w: w, req: req, a: a}
}

// streamWriter writes the events of a streamed answer: one per piece of reasoning or
// text, a function call whole (Gemini does not stream arguments unless asked to), and
// a last one with the finish reason and usage.
type streamWriter struct {
	w    http.ResponseWriter
	req  *providertest.Request
	a    *providertest.Answer
	call *providertest.Call
}

func (s *streamWriter) send(v any) {
	fmt.Fprintf(s.w, "data: %s\r\n\r\n", providertest.JSON(v))
}

func (s *streamWriter) Reasoning(piece string) {
	s.send(response(s.req, s.a, []any{map[string]any{"text": piece, "thought": true}}, false))
}

func (s *streamWriter) Text(piece string) {
	s.send(response(s.req, s.a, []any{map[string]any{"text": piece}}, false))
}

func (s *streamWriter) Call(c *providertest.Call) {
	s.call = &providertest.Call{ID: c.ID, Name: c.Name}
}
func (s *streamWriter) Args(piece string) { s.call.Args += piece }

func (s *streamWriter) Error(status int, message string) {
	s.send(errorBody(status, message, 0))
}

func (s *streamWriter) End() {
	if s.call != nil {
		s.send(response(s.req, s.a, []any{callPart(s.call)}, false))
	}
	// The last event carries no parts of its own, as Gemini often sends it.
	s.send(response(s.req, s.a, []any{map[string]any{"text": ""}}, true))
}

// canonical are the canonical statuses of HTTP statuses.
var canonical = map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}

// errorBody is Gemini's error envelope, the delay to wait in a RetryInfo detail.
func errorBody(status int, message string, retryAfter time.Duration) map[string]any {
	e := map[string]any{"code": status, "message": message, "status": canonical[status]}
	if e["status"] == "" {
		e["status"] = "UNKNOWN"
	}
	if retryAfter > 0 {
		e["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%gs", retryAfter.Seconds())}}
	}
	return map[string]any{"error": e}
}

func (codec) Error(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(errorBody(status, message, retryAfter))
}

// TestCodecRefuses checks that the fake refuses requests the API refuses, so that a
// plugin sending them fails its tests.
func TestCodecRefuses(t *testing.T) {
	decode := func(path, body string) error {
		_, err := (codec{}).Decode(httptest.NewRequest(http.MethodPost, path, nil), []byte(body))
		return err
	}
	const generate = "/v1beta/models/gemini-2.5-flash:generateContent"
	if err := decode(generate, `{"contents":[{"role":"user","parts":[{"text":"a"}]}]}`); err != nil {
		t.Fatalf("a valid request: %v", err)
	}
	for name, tc := range map[string]struct{ path, body string }{
		"no contents":      {generate, `{"contents":[]}`},
		"a bad role":       {generate, `{"contents":[{"role":"assistant","parts":[{"text":"a"}]}]}`},
		"no parts":         {generate, `{"contents":[{"role":"user","parts":[]}]}`},
		"a part, no data":  {generate, `{"contents":[{"role":"user","parts":[{"thought":true}]}]}`},
		"another method":   {"/v1beta/models/gemini-2.5-flash:countTokens", `{"contents":[{"role":"user","parts":[{"text":"a"}]}]}`},
		"a stream, no sse": {"/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"a"}]}]}`},
	} {
		if err := decode(tc.path, tc.body); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
