package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
)

// newFakeGemini returns a loopback server that answers Gemini's generateContent and
// streamGenerateContent (?alt=sse) methods, at any base path ending in
// /models/{model}:{method}, plausibly and deterministically, in Gemini's wire format:
//
//   - a request without an x-goog-api-key header (or key query parameter) gets 403
//     PERMISSION_DENIED; a malformed one (bad JSON, no contents, an unknown role, an
//     empty part) 400 INVALID_ARGUMENT; another path or method 404 NOT_FOUND;
//   - when the last content holds function responses, the answer is "Tool results: "
//     and each response's name and JSON;
//   - else, when function declarations are offered (and functionCallingConfig.mode is
//     not NONE) and the last user text says "use <tool>" (the declared name, or its
//     "__" written "/"), the answer is a functionCall of that tool (no id, a
//     thoughtSignature) whose args are the JSON object following the name, if any, or
//     an instance of its parameters' schema; with mode ANY and no such text, the first
//     function is called;
//   - else, with responseMimeType application/json, a JSON instance of
//     responseJsonSchema (or responseSchema) filled with every property;
//   - else "echo: " and the last user text.
//
// thinkingConfig.includeThoughts adds a thought part first ("Thinking about: ...").
// maxOutputTokens cuts the answer's text to that many words, with finish reason
// MAX_TOKENS; otherwise it is STOP. Token counts are word counts. Streaming sends the
// thought, then the text word by word, then the function call, each as one event, the
// last event carrying the finish reason and usage.
func newFakeGemini(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(serveFakeGemini))
	t.Cleanup(srv.Close)
	return srv
}

// fakeRequest is the part of a GenerateContentRequest the fake reads.
type fakeRequest struct {
	Contents          []fakeContent `json:"contents"`
	SystemInstruction *fakeContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string         `json:"name"`
			Parameters           map[string]any `json:"parameters"`
			ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig *struct {
			Mode string `json:"mode"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig struct {
		ResponseMimeType   string         `json:"responseMimeType"`
		ResponseSchema     map[string]any `json:"responseSchema"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		MaxOutputTokens    int            `json:"maxOutputTokens"`
		ThinkingConfig     *struct {
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

type fakeContent struct {
	Role  string           `json:"role"`
	Parts []map[string]any `json:"parts"`
}

// fakePartKeys are the data fields of a Gemini part; a part needs one.
var fakePartKeys = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"}

func serveFakeGemini(w http.ResponseWriter, r *http.Request) {
	i := strings.LastIndex(r.URL.Path, "/models/")
	if i < 0 || r.Method != http.MethodPost {
		fakeError(w, 404, "NOT_FOUND", "Requested entity was not found.")
		return
	}
	model, method, ok := strings.Cut(r.URL.Path[i+len("/models/"):], ":")
	if !ok || model == "" || (method != "generateContent" && method != "streamGenerateContent") {
		fakeError(w, 404, "NOT_FOUND", "Requested entity was not found.")
		return
	}
	if r.Header.Get("x-goog-api-key") == "" && r.URL.Query().Get("key") == "" {
		fakeError(w, 403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fakeError(w, 400, "INVALID_ARGUMENT", "cannot read the request")
		return
	}
	var req fakeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		fakeError(w, 400, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	if msg := fakeValidate(&req); msg != "" {
		fakeError(w, 400, "INVALID_ARGUMENT", msg)
		return
	}
	sum := sha256.Sum256(body)
	ans := fakeAnswer(&req)
	usage := map[string]any{
		"promptTokenCount":     fakePromptWords(&req),
		"candidatesTokenCount": fakeWords(ans.text),
		"totalTokenCount":      fakePromptWords(&req) + fakeWords(ans.text) + fakeWords(ans.thought),
	}
	if ans.thought != "" {
		usage["thoughtsTokenCount"] = fakeWords(ans.thought)
	}
	final := map[string]any{
		"usageMetadata": usage,
		"modelVersion":  model,
		"responseId":    hex.EncodeToString(sum[:8]),
	}
	candidate := func(parts []any, finish bool) map[string]any {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish {
			c["finishReason"] = ans.finish
		}
		return c
	}

	if method == "generateContent" {
		final["candidates"] = []any{candidate(ans.parts(), true)}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		json.NewEncoder(w).Encode(final)
		return
	}
	if r.URL.Query().Get("alt") != "sse" {
		// Without alt=sse the API streams one JSON array; the fake sends it whole.
		final["candidates"] = []any{candidate(ans.parts(), true)}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		json.NewEncoder(w).Encode([]any{final})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	var events []map[string]any
	if ans.thought != "" {
		events = append(events, map[string]any{"candidates": []any{candidate([]any{ans.thoughtPart()}, false)}})
	}
	for _, word := range fakeSplitWords(ans.text) {
		events = append(events, map[string]any{"candidates": []any{candidate([]any{map[string]any{"text": word}}, false)}})
	}
	if ans.call != nil {
		events = append(events, map[string]any{"candidates": []any{candidate([]any{ans.call}, false)}})
	}
	// The last event carries the finish reason and usage (with no parts of its own, as
	// Gemini often sends it, unless there is nothing else).
	last := final
	if len(events) > 0 {
		last["candidates"] = []any{candidate([]any{map[string]any{"text": ""}}, true)}
	} else {
		last["candidates"] = []any{candidate(ans.parts(), true)}
	}
	events = append(events, last)
	for _, ev := range events {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// fakeReply is what the fake model says.
type fakeReply struct {
	thought string
	text    string
	call    map[string]any // a functionCall part
	finish  string
}

func (a *fakeReply) thoughtPart() map[string]any {
	return map[string]any{"text": a.thought, "thought": true}
}

func (a *fakeReply) parts() []any {
	var out []any
	if a.thought != "" {
		out = append(out, a.thoughtPart())
	}
	if a.text != "" {
		out = append(out, map[string]any{"text": a.text})
	}
	if a.call != nil {
		out = append(out, a.call)
	}
	return out
}

// fakeSignature is the thoughtSignature of the fake's function calls.
var fakeSignature = base64.StdEncoding.EncodeToString([]byte("fake-signature"))

func fakeAnswer(req *fakeRequest) *fakeReply {
	last := req.Contents[len(req.Contents)-1]
	userText := fakeLastUserText(req.Contents)
	ans := &fakeReply{finish: "STOP"}
	if tc := req.GenerationConfig.ThinkingConfig; tc != nil && tc.IncludeThoughts {
		ans.thought = "Thinking about: " + userText
	}
	var results []string
	for _, p := range last.Parts {
		if fr, ok := p["functionResponse"].(map[string]any); ok {
			b, _ := json.Marshal(fr["response"])
			results = append(results, fmt.Sprintf("%v returned %s", fr["name"], b))
		}
	}
	switch {
	case len(results) > 0:
		ans.text = "Tool results: " + strings.Join(results, "; ")
	case fakeCall(req, userText, ans):
	case req.GenerationConfig.ResponseMimeType == "application/json":
		schema := req.GenerationConfig.ResponseJSONSchema
		if schema == nil {
			schema = req.GenerationConfig.ResponseSchema
		}
		var v any = map[string]any{"echo": userText}
		if schema != nil {
			v = fakeInstance(schema, userText, 0)
		}
		b, _ := json.Marshal(v)
		ans.text = string(b)
	default:
		ans.text = "echo: " + userText
	}
	if n := req.GenerationConfig.MaxOutputTokens; n > 0 && ans.call == nil && fakeWords(ans.text) > n {
		ans.text = strings.Join(fakeSplitWords(ans.text)[:n], "")
		ans.finish = "MAX_TOKENS"
	}
	return ans
}

// fakeCall sets a function call in ans when the request asks for one.
func fakeCall(req *fakeRequest, userText string, ans *fakeReply) bool {
	mode := "AUTO"
	if tc := req.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil && tc.FunctionCallingConfig.Mode != "" {
		mode = tc.FunctionCallingConfig.Mode
	}
	if mode == "NONE" {
		return false
	}
	type decl struct {
		name   string
		schema map[string]any
	}
	var decls []decl
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			s := d.ParametersJSONSchema
			if s == nil {
				s = d.Parameters
			}
			decls = append(decls, decl{d.Name, s})
		}
	}
	if len(decls) == 0 {
		return false
	}
	lower := strings.ToLower(userText)
	chosen, rest := -1, ""
	best := -1
	for i, d := range decls {
		for _, form := range []string{d.name, strings.ReplaceAll(d.name, "__", "/")} {
			needle := "use " + strings.ToLower(form)
			at := strings.Index(lower, needle)
			if at < 0 {
				continue
			}
			after := userText[at+len(needle):]
			if after != "" && !strings.ContainsAny(after[:1], " \t\n,.!?;:{") {
				continue // a longer name
			}
			if len(form) > best { // the longest matching name wins
				chosen, rest, best = i, after, len(form)
			}
		}
	}
	if chosen < 0 {
		if mode != "ANY" {
			return false
		}
		chosen = 0
	}
	var args any
	if i := strings.IndexByte(rest, '{'); i >= 0 {
		var m map[string]any
		if json.NewDecoder(strings.NewReader(rest[i:])).Decode(&m) == nil {
			args = m
		}
	}
	if args == nil {
		args = fakeInstance(decls[chosen].schema, userText, 0)
		if args == nil {
			args = map[string]any{}
		}
	}
	ans.call = map[string]any{
		"functionCall":     map[string]any{"name": decls[chosen].name, "args": args},
		"thoughtSignature": fakeSignature,
	}
	return true
}

// fakeValidate returns what is wrong with a request, or "".
func fakeValidate(req *fakeRequest) string {
	if len(req.Contents) == 0 {
		return "* GenerateContentRequest.contents: contents is not specified"
	}
	for i, c := range req.Contents {
		if c.Role != "user" && c.Role != "model" {
			return fmt.Sprintf("Please use a valid role: user, model. (contents[%d].role %q)", i, c.Role)
		}
		if len(c.Parts) == 0 {
			return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i)
		}
		for j, p := range c.Parts {
			found := false
			for _, k := range fakePartKeys {
				if _, ok := p[k]; ok {
					found = true
				}
			}
			if !found {
				return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].data: required oneof field 'data' must have one initialized field", i, j)
			}
		}
	}
	return ""
}

func fakeLastUserText(contents []fakeContent) string {
	for i := len(contents) - 1; i >= 0; i-- {
		if contents[i].Role != "user" {
			continue
		}
		var b strings.Builder
		for _, p := range contents[i].Parts {
			if s, ok := p["text"].(string); ok {
				b.WriteString(s)
			}
		}
		if b.Len() > 0 {
			return b.String()
		}
	}
	return ""
}

func fakePromptWords(req *fakeRequest) int {
	n := 0
	all := req.Contents
	if req.SystemInstruction != nil {
		all = append([]fakeContent{*req.SystemInstruction}, all...)
	}
	for _, c := range all {
		for _, p := range c.Parts {
			if s, ok := p["text"].(string); ok {
				n += fakeWords(s)
			}
		}
	}
	return n
}

func fakeWords(s string) int { return len(strings.Fields(s)) }

// fakeSplitWords splits text into words that keep their following spaces.
func fakeSplitWords(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] != ' ' && text[i-1] == ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// fakeInstance returns a value of a JSON Schema (or Gemini's OpenAPI-style schema, whose
// types are upper case) with every property filled; strings say text, cut or padded to
// the length bounds.
func fakeInstance(schema map[string]any, text string, depth int) any {
	if schema == nil || depth > 12 {
		return nil
	}
	if c, ok := schema["const"]; ok {
		return c
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := schema[k].([]any); ok && len(alts) > 0 {
			if s, ok := alts[0].(map[string]any); ok {
				return fakeInstance(s, text, depth+1)
			}
		}
	}
	typ := ""
	switch t := schema["type"].(type) {
	case string:
		typ = strings.ToLower(t)
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				typ = strings.ToLower(s)
				break
			}
		}
	}
	if typ == "" {
		if _, ok := schema["properties"]; ok {
			typ = "object"
		}
	}
	num := func(k string) (float64, bool) { f, ok := schema[k].(float64); return f, ok }
	switch typ {
	case "object":
		obj := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, _ := props[k].(map[string]any)
			obj[k] = fakeInstance(p, text, depth+1)
		}
		return obj
	case "array":
		n, _ := num("minItems")
		items, _ := schema["items"].(map[string]any)
		arr := make([]any, int(min(max(n, 1), 8)))
		if m, ok := num("maxItems"); ok && int(m) < len(arr) {
			arr = arr[:int(m)]
		}
		for i := range arr {
			arr[i] = fakeInstance(items, text, depth+1)
		}
		return arr
	case "string":
		switch schema["format"] {
		case "date-time":
			return "2025-01-01T00:00:00Z"
		case "date":
			return "2025-01-01"
		}
		s := text
		if s == "" {
			s = "fake"
		}
		if m, ok := num("maxLength"); ok && len(s) > int(m) {
			s = s[:int(m)]
		}
		if m, ok := num("minLength"); ok && len(s) < int(m) {
			s += strings.Repeat("x", int(m)-len(s))
		}
		return s
	case "integer", "number":
		v := 1.0
		if m, ok := num("minimum"); ok && v < m {
			v = m
		}
		if m, ok := num("exclusiveMinimum"); ok && v <= m {
			v = m + 1
		}
		if m, ok := num("maximum"); ok && v > m {
			v = m
		}
		if m, ok := num("exclusiveMaximum"); ok && v >= m {
			v = m - 1
		}
		if typ == "integer" {
			v = math.Ceil(v)
		}
		return v
	case "boolean":
		return true
	case "null":
		return nil
	}
	return nil
}

// fakeError answers with Gemini's error envelope.
func fakeError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
