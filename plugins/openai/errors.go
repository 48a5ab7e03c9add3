package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk/provider"
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
	return apiError{Message: provider.ErrorText(body)}
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

// httpError maps an error response of the API to the protocol's error: the code, the
// status and the delay the provider asks for as provider.HTTPError has them, with a
// message saying what failed. A 429 for an exhausted quota (insufficient_quota) is
// permission_denied: retrying does not help.
func httpError(status int, header map[string]string, body []byte, c *callInfo) *abi.Error {
	pe := providerError(body)
	quota := status == 429 && pe.codeString() == "insufficient_quota"
	var msg string
	switch {
	case status == 401 || status == 403:
		hint := fmt.Sprintf("check the API key in the secret %s", c.KeySecret)
		if c.KeySecret == "" {
			hint = "no API key was sent (the config apiKeySecret is empty)"
		}
		msg = fmt.Sprintf("%s refused the request for model %q: %s; %s", c.url, c.model, pe.text(), hint)
	case status == 402:
		msg = fmt.Sprintf("%s wants payment: %s", c.url, pe.text())
	case status == 404 && aboutModel(pe, c.model):
		msg = fmt.Sprintf("model %q not found at %s: %s", c.model, c.BaseURL, pe.text())
	case status == 404:
		msg = fmt.Sprintf("%s not found (check the config baseURL, %s): %s", c.url, c.BaseURL, pe.text())
	case quota:
		msg = fmt.Sprintf("%s refused the request for model %q: the account's quota is used up: %s", c.url, c.model, pe.text())
	case status == 429:
		msg = fmt.Sprintf("rate limited by %s for model %q: %s", c.url, c.model, pe.text())
	case status == 413:
		msg = fmt.Sprintf("the request is too large for %s: %s", c.url, pe.text())
	case provider.StatusCode(status) == abi.CodeUnavailable:
		msg = fmt.Sprintf("%s failed for model %q: %s", c.url, c.model, pe.text())
	default:
		msg = fmt.Sprintf("%s rejected the request for model %q: %s", c.url, c.model, pe.text())
	}
	e := provider.HTTPError("openai", status, msg, header)
	if quota {
		e.Code, e.RetryAfter = abi.CodePermissionDenied, 0
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
func streamError(e *apiError, c *callInfo) *abi.Error {
	if code, ok := e.Code.(float64); ok && code >= 400 && code < 600 {
		body, _ := json.Marshal(map[string]any{"error": e})
		return httpError(int(code), nil, body, c)
	}
	return &abi.Error{Code: abi.CodeUnavailable, Message: fmt.Sprintf("openai: %s failed during the response for model %q: %s", c.url, c.model, e.text())}
}
