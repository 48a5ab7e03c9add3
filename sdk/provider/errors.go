package provider

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/terrarium-ai/terrarium/abi"
)

// StatusCode maps the HTTP status of an API's error response to the protocol's error
// code: 401, 402 (payment required) and 403 permission_denied; 404 not_found; 413 and
// 429 limit_exceeded; 408, 409, 425 and every 5xx (Anthropic's 529 overloaded
// included) unavailable, worth retrying; any other 4xx invalid_input; anything else
// internal.
func StatusCode(status int) abi.ErrorCode {
	switch {
	case status == 401 || status == 402 || status == 403:
		return abi.CodePermissionDenied
	case status == 404:
		return abi.CodeNotFound
	case status == 413 || status == 429:
		return abi.CodeLimitExceeded
	case status == 408 || status == 409 || status == 425 || status >= 500 && status <= 599:
		return abi.CodeUnavailable
	case status >= 400 && status <= 499:
		return abi.CodeInvalidInput
	}
	return abi.CodeInternal
}

// HTTPError is the protocol's error for an API's error response: its code from
// StatusCode, the status kept, the message (the provider's own, which the plugin reads
// out of the body; "HTTP status N" when empty) after the provider's name, and the
// delay the response's headers ask for (RetryAfter). A plugin may change the code of
// a case its API marks apart.
func HTTPError(provider string, status int, message string, headers map[string]string) *abi.Error {
	if message = strings.TrimSpace(message); message == "" {
		message = fmt.Sprintf("HTTP status %d", status)
	}
	return &abi.Error{
		Code:       StatusCode(status),
		Status:     status,
		Message:    prefix(provider) + message,
		RetryAfter: RetryAfter(headers, time.Now()),
	}
}

// maxErrorText bounds the text of an error body quoted in a message.
const maxErrorText = 1000

// ErrorText is the text of an error response's body for a message, when the body holds
// no error the plugin can read: trimmed, and cut after 1000 bytes.
func ErrorText(body []byte) string {
	text := strings.TrimSpace(string(body))
	if len(text) <= maxErrorText {
		return text
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + "..."
}

// httpDates are the three date formats of HTTP (RFC 9110, section 5.6.7).
var httpDates = []string{"Mon, 02 Jan 2006 15:04:05 GMT", "Monday, 02-Jan-06 15:04:05 GMT", "Mon Jan _2 15:04:05 2006"}

// RetryAfter returns the delay, in seconds, a response's headers ask for before the
// next attempt: retry-after-ms (OpenAI's, in milliseconds), else Retry-After in
// seconds or as an HTTP date (counted from now). Zero when there is none, it is not
// understood or it is past.
func RetryAfter(headers map[string]string, now time.Time) float64 {
	if v := header(headers, "retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return ms / 1000
		}
	}
	v := header(headers, "retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return max(s, 0)
	}
	for _, layout := range httpDates {
		if t, err := time.Parse(layout, v); err == nil {
			return max(t.Sub(now).Seconds(), 0)
		}
	}
	return 0
}

// header returns the trimmed value of a header; the host gives names in lower case,
// other case is found too.
func header(headers map[string]string, name string) string {
	if v, ok := headers[name]; ok {
		return strings.TrimSpace(v)
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TransportError is the error of an exchange with the API that failed before an
// answer came whole (doing says what: "POST https://...", "reading the stream"): the
// code of the host's error is kept (permission_denied for a host the manifest does not
// grant, limit_exceeded when the call's time ran out), and a failure without one
// (the connection broke) is unavailable.
func TransportError(provider, doing string, err error) *abi.Error {
	e := abi.AsError(err)
	out := *e
	if out.Code == "" || out.Code == abi.CodeInternal {
		out.Code = abi.CodeUnavailable
	}
	out.Message = prefix(provider) + doing + ": " + e.Message
	return &out
}
