package main

import (
	"encoding/json"
	"strconv"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// apiResponse is a Messages API response (and the message of a stream's
// message_start event).
type apiResponse struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"`
	Model        string            `json:"model"`
	Content      []json.RawMessage `json:"content"`
	StopReason   string            `json:"stop_reason"`
	StopSequence string            `json:"stop_sequence"`
	Usage        *apiUsage         `json:"usage"`
	Error        *apiErrorDetail   `json:"error"`
}

// apiUsage is the API's usage; pointers tell a count that is absent from zero, as
// a stream's message_delta repeats only some counts.
type apiUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
}

// merge overwrites u's counts with those present in v.
func (u *apiUsage) merge(v *apiUsage) {
	if v == nil {
		return
	}
	for _, f := range []struct{ dst, src **int }{
		{&u.InputTokens, &v.InputTokens},
		{&u.OutputTokens, &v.OutputTokens},
		{&u.CacheReadInputTokens, &v.CacheReadInputTokens},
		{&u.CacheCreationInputTokens, &v.CacheCreationInputTokens},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
}

// usage converts the API's usage; nil when it reported none.
func (u *apiUsage) usage() *abi.GenerationUsage {
	if u == nil {
		return nil
	}
	n := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	out := &abi.GenerationUsage{
		InputTokens:         n(u.InputTokens),
		OutputTokens:        n(u.OutputTokens),
		CachedContentTokens: n(u.CacheReadInputTokens),
	}
	out.TotalTokens = out.InputTokens + out.OutputTokens
	if u.CacheCreationInputTokens != nil {
		out.Custom = map[string]float64{"cacheCreationInputTokens": float64(*u.CacheCreationInputTokens)}
	}
	return out
}

// apiErrorDetail is the "error" object of an error response or event.
type apiErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// apiBlock is the typed view of a response content block.
type apiBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Citations []any           `json:"citations"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
}

// parseResponse converts a (non-streamed) Messages API response.
func parseResponse(b []byte, names *provider.ToolNames) (*abi.GenerateResponse, error) {
	var r apiResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "anthropic: the response is not a message: %v", err)
	}
	if r.Type == "error" && r.Error != nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "anthropic: %s: %s", r.Error.Type, r.Error.Message)
	}
	parts := []*abi.Part{}
	for _, raw := range r.Content {
		p, err := blockPart(raw, names)
		if err != nil {
			return nil, err
		}
		if p != nil {
			parts = append(parts, p)
		}
	}
	return response(&r, parts, r.Usage), nil
}

// response assembles the generate response of a message with the given parts.
func response(r *apiResponse, parts []*abi.Part, u *apiUsage) *abi.GenerateResponse {
	fr, msg := finishReason(r.StopReason, r.StopSequence)
	custom := map[string]any{}
	if r.ID != "" {
		custom["id"] = r.ID
	}
	if r.Model != "" {
		custom["model"] = r.Model
	}
	if r.StopReason != "" {
		custom["stopReason"] = r.StopReason
	}
	out := &abi.GenerateResponse{
		Message:       abi.NewModelMessage(parts...),
		FinishReason:  fr,
		FinishMessage: msg,
		Usage:         u.usage(),
	}
	if len(custom) > 0 {
		out.Custom = custom
	}
	return out
}

// blockPart converts one complete content block into a part; nil for an empty block.
func blockPart(raw json.RawMessage, names *provider.ToolNames) (*abi.Part, error) {
	var b apiBlock
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "anthropic: a content block is malformed: %v", err)
	}
	switch b.Type {
	case "text":
		if b.Text == "" {
			return nil, nil
		}
		p := abi.NewTextPart(b.Text)
		if len(b.Citations) > 0 {
			p.Metadata = map[string]any{"citations": b.Citations}
		}
		return p, nil
	case "thinking":
		p := abi.NewReasoningPart(b.Thinking)
		if b.Signature != "" {
			p.Metadata = map[string]any{"signature": b.Signature}
		}
		return p, nil
	case "tool_use":
		var input any
		if len(b.Input) > 0 {
			if err := json.Unmarshal(b.Input, &input); err != nil {
				return nil, abi.Errorf(abi.CodeUnavailable, "anthropic: tool_use input: %v", err)
			}
		}
		if input == nil {
			input = map[string]any{}
		}
		return abi.NewToolRequestPart(&abi.ToolRequest{Ref: b.ID, Name: names.Original(b.Name), Input: input}), nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "anthropic: a content block is malformed: %v", err)
	}
	return abi.NewCustomPart(map[string]any{"anthropic": m}), nil
}

// finishReason maps a stop_reason, with a message for people where one helps.
func finishReason(stop, sequence string) (abi.FinishReason, string) {
	switch stop {
	case "end_turn", "tool_use":
		return abi.FinishStop, ""
	case "stop_sequence":
		return abi.FinishStop, "stop sequence " + strconv.Quote(sequence)
	case "max_tokens":
		return abi.FinishLength, "max_tokens reached"
	case "model_context_window_exceeded":
		return abi.FinishLength, "the model's context window is full"
	case "refusal":
		return abi.FinishBlocked, "the model refused"
	case "pause_turn":
		return abi.FinishOther, "pause_turn: the API paused a long turn; send the response back to continue it"
	case "":
		return abi.FinishUnknown, ""
	}
	return abi.FinishUnknown, "stop_reason " + stop
}

// apiError converts an HTTP error response into the protocol's error, with the API's
// message ("type: message").
func apiError(status int, header map[string]string, body []byte) *abi.Error {
	var r apiResponse
	msg := provider.ErrorText(body)
	if json.Unmarshal(body, &r) == nil && r.Error != nil && r.Error.Message != "" {
		msg = r.Error.Message
		if r.Error.Type != "" {
			msg = r.Error.Type + ": " + msg
		}
	}
	return provider.HTTPError("anthropic", status, msg, header)
}
