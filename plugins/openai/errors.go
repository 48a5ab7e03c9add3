package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
)

// apiError is the error object of OpenAI's API, {"error": {...}}. Compatible servers
// vary: Ollama answers {"error": "text"}, others {"message": ...} or {"detail": ...}.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	// Code is a string ("invalid_api_key", "model_not_found") at OpenAI, a number (the
	// HTTP status) at OpenRouter.
	Code any `json:"code"`
}

// UnmarshalJSON accepts the object and a bare string.
func (e *apiError) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*e = apiError{Message: s}
		return nil
	}
	type plain apiError
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = apiError(p)
	return nil
}

// maxErrorText bounds the text of a provider's message quoted in an error.
const maxErrorText = 1000

// providerError reads the provider's error out of an error response body.
func providerError(body []byte) apiError {
	var env struct {
		Error   *apiError `json:"error"`
		Message string    `json:"message"`
		Detail  any       `json:"detail"`
	}
	if json.Unmarshal(body, &env) == nil {
		switch {
		case env.Error != nil && env.Error.Message != "":
			return *env.Error
		case env.Message != "":
			return apiError{Message: env.Message}
		case env.Detail != nil:
			if s, ok := env.Detail.(string); ok {
				return apiError{Message: s}
			}
			b, _ := json.Marshal(env.Detail)
			return apiError{Message: string(b)}
		}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > maxErrorText {
		text = text[:maxErrorText] + "..."
	}
	return apiError{Message: text}
}

// text is the provider's message with its error code, for our messages.
func (e apiError) text() string {
	msg := e.Message
	if msg == "" {
		msg = "(no message)"
	}
	if code := e.codeString(); code != "" && !strings.Contains(msg, code) {
		msg += " (" + code + ")"
	}
	return msg
}

func (e apiError) codeString() string {
	switch c := e.Code.(type) {
	case string:
		return c
	case nil:
		if e.Type != "" {
			return e.Type
		}
	}
	return ""
}

// httpError maps an error response of the API to the protocol's error, its HTTP
// status kept: 401 and 403 (and 402, payment required) permission_denied, 404
// not_found, 429 limit_exceeded, 413 limit_exceeded, 408, 409 and 425 unavailable,
// other 4xx invalid_input, 5xx unavailable. A delay the provider asks for
// (Retry-After, retry-after-ms) becomes RetryAfter.
func httpError(status int, header map[string]string, body []byte, c *callInfo, now time.Time) *abi.Error {
	pe := providerError(body)
	e := &abi.Error{Status: status, RetryAfter: retryAfter(header, now)}
	switch {
	case status == 401 || status == 403:
		e.Code = abi.CodePermissionDenied
		hint := fmt.Sprintf("check the API key in the secret %s", c.keySecret)
		if c.keySecret == "" {
			hint = "no API key was sent (the config apiKeySecret is empty)"
		}
		e.Message = fmt.Sprintf("openai: %s refused the request for model %q: %s; %s", c.url, c.model, pe.text(), hint)
	case status == 402:
		e.Code = abi.CodePermissionDenied
		e.Message = fmt.Sprintf("openai: %s wants payment: %s", c.url, pe.text())
	case status == 404:
		e.Code = abi.CodeNotFound
		if aboutModel(pe, c.model) {
			e.Message = fmt.Sprintf("openai: model %q not found at %s: %s", c.model, c.baseURL, pe.text())
		} else {
			e.Message = fmt.Sprintf("openai: %s not found (check the config baseURL, %s): %s", c.url, c.baseURL, pe.text())
		}
	case status == 429:
		e.Code = abi.CodeLimitExceeded
		e.Message = fmt.Sprintf("openai: rate limited by %s for model %q: %s", c.url, c.model, pe.text())
	case status == 413:
		e.Code = abi.CodeLimitExceeded
		e.Message = fmt.Sprintf("openai: the request is too large for %s: %s", c.url, pe.text())
	case status == 408 || status == 409 || status == 425 || status >= 500:
		e.Code = abi.CodeUnavailable
		e.Message = fmt.Sprintf("openai: %s failed for model %q: %s", c.url, c.model, pe.text())
	default:
		e.Code = abi.CodeInvalidInput
		e.Message = fmt.Sprintf("openai: %s rejected the request for model %q: %s", c.url, c.model, pe.text())
	}
	return e
}

// aboutModel reports whether a 404's message is about the model rather than the URL.
func aboutModel(e apiError, model string) bool {
	if e.codeString() == "model_not_found" {
		return true
	}
	msg := strings.ToLower(e.Message)
	return model != "" && strings.Contains(msg, strings.ToLower(model)) || strings.Contains(msg, "model")
}

// streamError maps an error object a server sends inside a response (OpenRouter sends
// {"error": {"code": 502, "message": ...}} mid-stream) to the protocol's error.
func streamError(e *apiError, c *callInfo, now time.Time) *abi.Error {
	if code, ok := e.Code.(float64); ok && code >= 400 && code < 600 {
		body, _ := json.Marshal(map[string]any{"error": e})
		return httpError(int(code), nil, body, c, now)
	}
	return &abi.Error{Code: abi.CodeUnavailable, Message: fmt.Sprintf("openai: %s failed during the response for model %q: %s", c.url, c.model, e.text())}
}

// retryAfter reads the delay a response asks for, in seconds: retry-after-ms (OpenAI),
// else Retry-After as seconds or an HTTP date. Zero when there is none.
func retryAfter(header map[string]string, now time.Time) float64 {
	if v := strings.TrimSpace(header["retry-after-ms"]); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return ms / 1000
		}
	}
	v := strings.TrimSpace(header["retry-after"])
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return max(s, 0)
	}
	// The three date formats HTTP allows (RFC 9110, section 5.6.7).
	for _, layout := range []string{"Mon, 02 Jan 2006 15:04:05 GMT", "Monday, 02-Jan-06 15:04:05 GMT", "Mon Jan _2 15:04:05 2006"} {
		if t, err := time.Parse(layout, v); err == nil {
			return max(t.Sub(now).Seconds(), 0)
		}
	}
	return 0
}

// transportError wraps an error of the host's HTTP function (the server could not be
// reached, the call's time ran out, the host is not granted), keeping its code.
func transportError(err error, what string) *abi.Error {
	e := abi.AsError(err)
	return &abi.Error{Code: e.Code, Status: e.Status, RetryAfter: e.RetryAfter, Message: fmt.Sprintf("openai: %s: %s", what, e.Message)}
}
