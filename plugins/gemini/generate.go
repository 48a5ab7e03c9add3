package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/sdk"
	"github.com/terrarium-ai/terrarium/sdk/provider"
	"github.com/terrarium-ai/terrarium/sdk/sse"
)

// generate serves one model request.
func generate(ctx context.Context, s provider.Settings, model string, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
	if err := s.Validate("gemini"); err != nil {
		return nil, err
	}
	start := time.Now()
	ar, err := buildRequest(req)
	if err != nil {
		return nil, asInvalid(err)
	}
	if ar.model != "" {
		model = ar.model
	}
	stream := sdk.Streaming(ctx)
	headers := map[string]string{"Content-Type": "application/json"}
	if key := s.KeyPlaceholder(); key != "" {
		headers["x-goog-api-key"] = key
	}
	resp, err := provider.Post("gemini", endpoint(s.BaseURL, model, stream), headers, ar.body, httpError)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	c := newCollector(ar.names)
	if stream && provider.IsEventStream(resp.Header) {
		err = readStream(resp.Body, c)
	} else {
		err = readWhole(resp.Body, c, stream)
	}
	if err != nil {
		return nil, err
	}
	out := c.response()
	out.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
	return out, nil
}

// endpoint returns the URL of the model's generateContent method, or of its
// streamGenerateContent method with alt=sse. A model name holding '/' is a resource
// path of its own (tunedModels/...).
func endpoint(base, model string, stream bool) string {
	path := model
	if !strings.Contains(model, "/") {
		path = "models/" + model
	}
	u := strings.TrimRight(base, "/") + "/" + path
	if stream {
		return u + ":streamGenerateContent?alt=sse"
	}
	return u + ":generateContent"
}

// readStream forwards each server-sent event as a chunk the moment it arrives.
func readStream(body io.Reader, c *collector) error {
	r := sse.NewReader(body)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return provider.TransportError("gemini", "reading the stream", err)
		}
		data := strings.TrimSpace(ev.Data)
		if data == "" || data == "[DONE]" {
			continue
		}
		if err := emit(c, []byte(data), true); err != nil {
			return err
		}
	}
}

// readWhole reads a whole JSON answer: one GenerateContentResponse, or an array of them
// (streamGenerateContent without alt=sse).
func readWhole(body io.Reader, c *collector, stream bool) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return provider.TransportError("gemini", "reading the response", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(b, &list); err != nil {
			return abi.Errorf(abi.CodeUnavailable, "gemini sent an invalid response: %v", err)
		}
		for _, raw := range list {
			if err := emit(c, raw, stream); err != nil {
				return err
			}
		}
		return nil
	}
	return emit(c, b, stream)
}

// emit decodes one GenerateContentResponse, folds it in, and streams the parts it
// brings when the caller listens.
func emit(c *collector, data []byte, stream bool) error {
	var r apiResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return abi.Errorf(abi.CodeUnavailable, "gemini sent an invalid response: %v", err)
	}
	if r.Error != nil {
		return r.Error.toABI(r.Error.Code, nil)
	}
	parts, err := c.add(&r)
	if err != nil {
		return err
	}
	if !stream || len(parts) == 0 {
		return nil
	}
	chunk := &abi.GenerateResponseChunk{Role: abi.RoleModel, Content: parts}
	if b, err := json.Marshal(chunk); err == nil && len(b) > maxChunk {
		// A chunk may not exceed 1 MiB (a generated image can): it is left out of the
		// stream, and reaches the caller with the whole response.
		sdk.Logf(plugin.LogWarn, "gemini: a chunk of %d bytes is too large to stream; it is only in the final response", len(b))
		return nil
	}
	return sdk.StreamChunk(chunk)
}

// maxChunk is the largest chunk a plugin may stream (ABI.md, section 4).
const maxChunk = 1 << 20

// apiError is the error object of Gemini's error responses, {"error": {...}}.
type apiError struct {
	Code    int              `json:"code"`
	Message string           `json:"message"`
	Status  string           `json:"status"`
	Details []map[string]any `json:"details"`
}

// httpError converts an HTTP error response into a protocol error with its status, the
// API's message and the delay the API asks for.
func httpError(status int, header map[string]string, body []byte) *abi.Error {
	var env struct {
		Error *apiError `json:"error"`
	}
	// Some proxies answer with a list holding the error.
	if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
		var list []struct {
			Error *apiError `json:"error"`
		}
		if json.Unmarshal(body, &list) == nil && len(list) > 0 {
			env.Error = list[0].Error
		}
	}
	e := env.Error
	if e == nil {
		e = &apiError{Message: provider.ErrorText(body)}
	}
	return e.toABI(status, header)
}

// toABI converts the error for an HTTP status (0: the one its canonical status says)
// and the response's headers, whose Retry-After wins over the details' RetryInfo.
func (e *apiError) toABI(status int, header map[string]string) *abi.Error {
	if status == 0 {
		status = statusOf(e.Status)
	}
	msg := e.Message
	if msg == "" {
		msg = e.Status
	}
	out := provider.HTTPError("gemini", status, msg, header)
	if out.RetryAfter == 0 {
		if d, ok := retryInfo(e.Details); ok {
			out.RetryAfter = d
		}
	}
	return out
}

// statusOf maps the canonical status of an error event to its HTTP status.
func statusOf(s string) int {
	switch s {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return 400
	case "UNAUTHENTICATED":
		return 401
	case "PERMISSION_DENIED":
		return 403
	case "NOT_FOUND":
		return 404
	case "RESOURCE_EXHAUSTED":
		return 429
	case "CANCELLED":
		return 499
	case "UNAVAILABLE":
		return 503
	case "DEADLINE_EXCEEDED":
		return 504
	}
	return 500
}

// retryInfo finds the retryDelay of a google.rpc.RetryInfo among error details: a
// duration like "15s" or "0.5s" (or {"seconds", "nanos"}).
func retryInfo(details []map[string]any) (float64, bool) {
	for _, d := range details {
		t, _ := d["@type"].(string)
		if !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		switch v := d["retryDelay"].(type) {
		case string:
			if dur, err := time.ParseDuration(strings.TrimSpace(v)); err == nil && dur >= 0 {
				return dur.Seconds(), true
			}
		case map[string]any:
			s, _ := v["seconds"].(float64)
			if str, ok := v["seconds"].(string); ok {
				s, _ = strconv.ParseFloat(str, 64)
			}
			n, _ := v["nanos"].(float64)
			return s + n/1e9, true
		}
	}
	return 0, false
}

// asInvalid reports a request that cannot be converted as invalid input.
func asInvalid(err error) error {
	var e *abi.Error
	if errors.As(err, &e) {
		return e
	}
	return abi.Errorf(abi.CodeInvalidInput, "%v", err)
}
