package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/sdk"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// apiResponse is a GenerateContentResponse: the answer of generateContent, and each
// event of streamGenerateContent.
type apiResponse struct {
	Candidates     []apiCandidate  `json:"candidates"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata"`
	ModelVersion   string          `json:"modelVersion"`
	ResponseID     string          `json:"responseId"`
	// Error is set by an error event in a stream.
	Error *apiError `json:"error"`
}

type apiCandidate struct {
	Content *struct {
		Role  string           `json:"role"`
		Parts []map[string]any `json:"parts"`
	} `json:"content"`
	FinishReason       string `json:"finishReason"`
	FinishMessage      string `json:"finishMessage"`
	Index              int    `json:"index"`
	SafetyRatings      any    `json:"safetyRatings"`
	CitationMetadata   any    `json:"citationMetadata"`
	GroundingMetadata  any    `json:"groundingMetadata"`
	URLContextMetadata any    `json:"urlContextMetadata"`
}

type promptFeedback struct {
	BlockReason        string `json:"blockReason,omitempty"`
	BlockReasonMessage string `json:"blockReasonMessage,omitempty"`
	SafetyRatings      any    `json:"safetyRatings,omitempty"`
}

type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
}

// collector turns Gemini responses (one, or a stream's events) into a model response.
// add converts each into the parts it brings, which a streaming model forwards as a
// chunk; response builds the whole.
type collector struct {
	names *provider.ToolNames
	acc   abi.Accumulator
	// calls counts the function calls begun, for the refs of calls without an id.
	calls int
	// open is a function call whose arguments are still streaming.
	open *openCall

	finishReason, finishMessage string
	blockReason, blockMessage   string
	usage                       *usageMetadata
	custom                      map[string]any
}

// openCall is a function call whose arguments arrive in pieces (partialArgs).
type openCall struct {
	id, ref, name string
	args          any
	metadata      map[string]any
	// continuing holds the JSON paths whose string value the next piece extends.
	continuing map[string]bool
}

func newCollector(n *provider.ToolNames) *collector {
	return &collector{names: n, custom: map[string]any{}}
}

// add folds one response in and returns the parts it adds.
func (c *collector) add(r *apiResponse) ([]*abi.Part, error) {
	if r.UsageMetadata != nil {
		c.usage = r.UsageMetadata
	}
	if r.ModelVersion != "" {
		c.custom["modelVersion"] = r.ModelVersion
	}
	if r.ResponseID != "" {
		c.custom["responseId"] = r.ResponseID
	}
	if pf := r.PromptFeedback; pf != nil {
		c.custom["promptFeedback"] = pf
		if pf.BlockReason != "" {
			c.blockReason, c.blockMessage = pf.BlockReason, pf.BlockReasonMessage
		}
	}
	var out []*abi.Part
	for i := range r.Candidates {
		cand := &r.Candidates[i]
		if cand.Index != 0 {
			continue // only the first candidate is the answer
		}
		if cand.FinishReason != "" {
			c.finishReason = cand.FinishReason
			c.custom["finishReason"] = cand.FinishReason // Gemini's own, finer than ours
		}
		if cand.FinishMessage != "" {
			c.finishMessage = cand.FinishMessage
		}
		for k, v := range map[string]any{
			"groundingMetadata": cand.GroundingMetadata, "urlContextMetadata": cand.URLContextMetadata,
			"citationMetadata": cand.CitationMetadata, "safetyRatings": cand.SafetyRatings,
		} {
			if v != nil {
				c.custom[k] = v
			}
		}
		if cand.Content == nil {
			continue
		}
		for _, gp := range cand.Content.Parts {
			parts, err := c.part(gp)
			if err != nil {
				return nil, err
			}
			out = append(out, parts...)
		}
	}
	c.acc.Add(&abi.GenerateResponseChunk{Content: out})
	return out, nil
}

// part converts one Gemini part; it may bring no part (an empty text, a piece of a
// function call that changes nothing).
func (c *collector) part(gp map[string]any) ([]*abi.Part, error) {
	var md map[string]any
	if sig, ok := gp[mdThoughtSignature]; ok && sig != nil {
		md = map[string]any{mdThoughtSignature: sig}
	}
	if fc, ok := gp["functionCall"].(map[string]any); ok {
		return c.functionCall(fc, md)
	}
	if text, ok := gp["text"].(string); ok {
		if text == "" && md == nil {
			return nil, nil
		}
		p := abi.NewTextPart(text)
		if thought, _ := gp["thought"].(bool); thought {
			p = abi.NewReasoningPart(text)
		}
		p.Metadata = md
		return []*abi.Part{p}, nil
	}
	if d, ok := gp["inlineData"].(map[string]any); ok {
		mime, _ := d["mimeType"].(string)
		data, _ := d["data"].(string)
		p := abi.NewMediaPart(mime, "data:"+mime+";base64,"+data)
		p.Metadata = md
		return []*abi.Part{p}, nil
	}
	if d, ok := gp["fileData"].(map[string]any); ok {
		uri, _ := d["fileUri"].(string)
		if uri != "" {
			mime, _ := d["mimeType"].(string)
			p := abi.NewMediaPart(mime, uri)
			p.Metadata = md
			return []*abi.Part{p}, nil
		}
	}
	// executableCode, codeExecutionResult and anything else: as Gemini sent it.
	custom := make(map[string]any, len(gp))
	for k, v := range gp {
		if k != mdThoughtSignature {
			custom[k] = v
		}
	}
	if len(custom) == 0 {
		return nil, nil
	}
	p := abi.NewCustomPart(custom)
	p.Metadata = md
	return []*abi.Part{p}, nil
}

// functionCall converts a function call, whole or (Gemini 3) streamed in pieces: a call
// with willContinue starts or continues a partial tool request whose partialArgs
// accumulate, and the piece without willContinue completes it.
func (c *collector) functionCall(fc map[string]any, md map[string]any) ([]*abi.Part, error) {
	name, _ := fc["name"].(string)
	id, _ := fc["id"].(string)
	more, _ := fc["willContinue"].(bool)
	partial, _ := fc["partialArgs"].([]any)
	args := fc["args"]

	if o := c.open; o != nil && (name == "" || c.names.Original(name) == o.name) && (id == "" || id == o.id) {
		if md != nil && o.metadata[mdThoughtSignature] == nil {
			o.metadata = mergeMD(o.metadata, md)
		}
		return c.stepOpen(args, partial, more)
	}
	if c.open != nil {
		// A new call begins while one is still open: the open one is complete.
		done := c.closeOpen()
		next, err := c.functionCall(fc, md)
		return append(done, next...), err
	}
	if name == "" {
		// The end of a streamed call that is not open (or garbage): nothing to add.
		sdk.Logf(plugin.LogWarn, "gemini: ignoring a function call without a name: %v", fc)
		return nil, nil
	}
	index := c.calls
	c.calls++
	original := c.names.Original(name)
	ref := id
	if ref == "" {
		ref = original + "-" + strconv.Itoa(index)
		md = mergeMD(md, map[string]any{mdSyntheticRef: true})
	}
	if more || len(partial) > 0 {
		c.open = &openCall{id: id, ref: ref, name: original, metadata: md, continuing: map[string]bool{}}
		return c.stepOpen(args, partial, more)
	}
	p := abi.NewToolRequestPart(&abi.ToolRequest{Ref: ref, Name: original, Input: objectOrEmpty(args)})
	p.Metadata = md
	return []*abi.Part{p}, nil
}

// stepOpen applies a piece of the open call; when no more pieces follow, it completes.
func (c *collector) stepOpen(args any, partial []any, more bool) ([]*abi.Part, error) {
	o := c.open
	if m, ok := args.(map[string]any); ok {
		o.args = m
	}
	for _, raw := range partial {
		pa, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		if err := o.apply(pa); err != nil {
			return nil, abi.Errorf(abi.CodeUnavailable, "gemini sent a malformed partial argument: %v", err)
		}
	}
	if !more {
		return c.closeOpen(), nil
	}
	p := abi.NewToolRequestPart(&abi.ToolRequest{Ref: o.ref, Name: o.name, Input: deepCopy(objectOrEmpty(o.args)), Partial: true})
	p.Metadata = o.metadata
	return []*abi.Part{p}, nil
}

// closeOpen completes the open call.
func (c *collector) closeOpen() []*abi.Part {
	o := c.open
	c.open = nil
	p := abi.NewToolRequestPart(&abi.ToolRequest{Ref: o.ref, Name: o.name, Input: objectOrEmpty(o.args)})
	p.Metadata = o.metadata
	return []*abi.Part{p}
}

// apply sets one partial argument: {jsonPath, stringValue | numberValue | boolValue |
// nullValue, willContinue}. A string continues the previous piece of its path when
// that one said willContinue.
func (o *openCall) apply(pa map[string]any) error {
	path, _ := pa["jsonPath"].(string)
	elems, err := parseJSONPath(path)
	if err != nil {
		return err
	}
	more, _ := pa["willContinue"].(bool)
	var set func(old any) any
	switch {
	case pa["stringValue"] != nil:
		s, _ := pa["stringValue"].(string)
		cont := o.continuing[path]
		set = func(old any) any {
			if prev, ok := old.(string); ok && cont {
				return prev + s
			}
			return s
		}
	case pa["numberValue"] != nil:
		v := pa["numberValue"]
		set = func(any) any { return v }
	case pa["boolValue"] != nil:
		v := pa["boolValue"]
		set = func(any) any { return v }
	case pa["nullValue"] != nil:
		set = func(any) any { return nil }
	default:
		// A piece without a value: only willContinue changes.
		o.continuing[path] = more
		return nil
	}
	root, err := setPath(o.args, elems, set)
	if err != nil {
		return err
	}
	o.args = root
	o.continuing[path] = more
	return nil
}

// pathElem is one step of a JSON path: an object key, or an array index.
type pathElem struct {
	key   string
	index int
	isKey bool
}

// maxIndex bounds array indexes in partial arguments.
const maxIndex = 1 << 16

// parseJSONPath parses the simple JSON paths of partial arguments (RFC 9535 without
// wildcards or filters): "$", then ".name", "[0]", "['name']" or "[\"name\"]" steps.
func parseJSONPath(p string) ([]pathElem, error) {
	rest, ok := strings.CutPrefix(p, "$")
	if !ok {
		return nil, fmt.Errorf("json path %q does not start with $", p)
	}
	var out []pathElem
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, fmt.Errorf("json path %q: empty name", p)
			}
			out = append(out, pathElem{key: rest[:end], isKey: true})
			rest = rest[end:]
		case '[':
			if len(rest) > 1 && (rest[1] == '\'' || rest[1] == '"') {
				// A quoted name, which may hold ']' itself.
				q := rest[1]
				end := strings.IndexByte(rest[2:], q)
				if end < 0 || len(rest) < end+4 || rest[end+3] != ']' {
					return nil, fmt.Errorf("json path %q: bad quoted name", p)
				}
				out = append(out, pathElem{key: rest[2 : end+2], isKey: true})
				rest = rest[end+4:]
				continue
			}
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("json path %q: unclosed [", p)
			}
			i, err := strconv.Atoi(strings.TrimSpace(rest[1:end]))
			if err != nil || i < 0 || i > maxIndex {
				return nil, fmt.Errorf("json path %q: bad index %q", p, rest[1:end])
			}
			out = append(out, pathElem{index: i})
			rest = rest[end+1:]
		default:
			return nil, fmt.Errorf("json path %q: unexpected %q", p, rest[0])
		}
	}
	return out, nil
}

// setPath sets the value at path inside root, creating objects and arrays on the way,
// and returns the new root.
func setPath(root any, path []pathElem, set func(old any) any) (any, error) {
	if len(path) == 0 {
		return set(root), nil
	}
	e := path[0]
	if e.isKey {
		m, ok := root.(map[string]any)
		if !ok {
			m = map[string]any{}
		}
		v, err := setPath(m[e.key], path[1:], set)
		if err != nil {
			return nil, err
		}
		m[e.key] = v
		return m, nil
	}
	s, _ := root.([]any)
	for len(s) <= e.index {
		s = append(s, nil)
	}
	v, err := setPath(s[e.index], path[1:], set)
	if err != nil {
		return nil, err
	}
	s[e.index] = v
	return s, nil
}

// response builds the model response from everything added.
func (c *collector) response() *abi.GenerateResponse {
	var parts []*abi.Part
	if c.open != nil {
		parts = c.closeOpen()
		c.acc.Add(&abi.GenerateResponseChunk{Content: parts})
	}
	resp := &abi.GenerateResponse{
		Message:       c.acc.Message(abi.RoleModel),
		FinishReason:  finishReason(c.finishReason),
		FinishMessage: c.finishMessage,
		Usage:         toUsage(c.usage),
	}
	if c.blockReason != "" {
		resp.FinishReason = abi.FinishBlocked
		resp.FinishMessage = "the prompt was blocked: " + c.blockReason
		if c.blockMessage != "" {
			resp.FinishMessage += ": " + c.blockMessage
		}
	}
	if len(c.custom) > 0 {
		resp.Custom = c.custom
	}
	return resp
}

// finishReason maps Gemini's finish reasons.
func finishReason(r string) abi.FinishReason {
	switch r {
	case "STOP":
		return abi.FinishStop
	case "MAX_TOKENS":
		return abi.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return abi.FinishBlocked
	case "OTHER", "MALFORMED_FUNCTION_CALL":
		return abi.FinishOther
	}
	return abi.FinishUnknown
}

// toUsage maps usageMetadata.
func toUsage(u *usageMetadata) *abi.GenerationUsage {
	if u == nil {
		return nil
	}
	out := &abi.GenerationUsage{
		InputTokens:         u.PromptTokenCount,
		OutputTokens:        u.CandidatesTokenCount,
		TotalTokens:         u.TotalTokenCount,
		ThoughtsTokens:      u.ThoughtsTokenCount,
		CachedContentTokens: u.CachedContentTokenCount,
	}
	if u.ToolUsePromptTokenCount > 0 {
		out.Custom = map[string]float64{"toolUsePromptTokens": float64(u.ToolUsePromptTokenCount)}
	}
	return out
}

func objectOrEmpty(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}

func mergeMD(a, b map[string]any) map[string]any {
	if a == nil && b == nil {
		return nil
	}
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// deepCopy copies JSON objects and arrays, so that a streamed partial input does not
// change with later pieces.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}
