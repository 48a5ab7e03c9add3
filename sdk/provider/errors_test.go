package provider

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
)

func TestStatusCode(t *testing.T) {
	for status, want := range map[int]abi.ErrorCode{
		400: abi.CodeInvalidInput, 422: abi.CodeInvalidInput, 418: abi.CodeInvalidInput,
		401: abi.CodePermissionDenied, 402: abi.CodePermissionDenied, 403: abi.CodePermissionDenied,
		404: abi.CodeNotFound,
		413: abi.CodeLimitExceeded, 429: abi.CodeLimitExceeded,
		408: abi.CodeUnavailable, 409: abi.CodeUnavailable, 425: abi.CodeUnavailable,
		500: abi.CodeUnavailable, 502: abi.CodeUnavailable, 503: abi.CodeUnavailable, 529: abi.CodeUnavailable,
		200: abi.CodeInternal, 302: abi.CodeInternal, 0: abi.CodeInternal, 600: abi.CodeInternal,
	} {
		if got := StatusCode(status); got != want {
			t.Errorf("StatusCode(%d) = %s, want %s", status, got, want)
		}
	}
}

func TestHTTPError(t *testing.T) {
	e := HTTPError("anthropic", 429, " rate_limit_error: slow down ", map[string]string{"retry-after": "7"})
	if *e != (abi.Error{Code: abi.CodeLimitExceeded, Status: 429, Message: "anthropic: rate_limit_error: slow down", RetryAfter: 7}) {
		t.Errorf("429 = %+v", *e)
	}
	e = HTTPError("anthropic", 503, "", map[string]string{"retry-after": "1.5"})
	if *e != (abi.Error{Code: abi.CodeUnavailable, Status: 503, Message: "anthropic: HTTP status 503", RetryAfter: 1.5}) {
		t.Errorf("503 = %+v", *e)
	}
	if e := HTTPError("", 400, "bad", nil); e.Message != "bad" || e.Code != abi.CodeInvalidInput {
		t.Errorf("no provider = %+v", *e)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    map[string]string
		want float64
	}{
		{nil, 0},
		{map[string]string{"retry-after": "7"}, 7},
		{map[string]string{"retry-after": " 1.5 "}, 1.5},
		{map[string]string{"retry-after": "-3"}, 0},
		{map[string]string{"retry-after-ms": "1500", "retry-after": "9"}, 1.5},
		{map[string]string{"retry-after-ms": "soon", "retry-after": "9"}, 9},
		{map[string]string{"Retry-After": "4"}, 4},
		{map[string]string{"retry-after": "Thu, 02 Jan 2025 03:04:35 GMT"}, 30},
		{map[string]string{"retry-after": "Thursday, 02-Jan-25 03:04:15 GMT"}, 10},
		{map[string]string{"retry-after": "Thu Jan  2 03:04:06 2025"}, 1},
		{map[string]string{"retry-after": "Thu, 02 Jan 2025 03:00:00 GMT"}, 0},
		{map[string]string{"retry-after": "soon"}, 0},
		{map[string]string{"retry-after": "yesterday"}, 0},
	} {
		if got := RetryAfter(tc.h, now); got != tc.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	if got := ErrorText([]byte("  <html>Bad Gateway</html>\n")); got != "<html>Bad Gateway</html>" {
		t.Errorf("short = %q", got)
	}
	long := strings.Repeat("a", 999) + "é" + strings.Repeat("b", 100)
	if got := ErrorText([]byte(long)); got != strings.Repeat("a", 999)+"..." {
		t.Errorf("long = %q...", got[990:])
	}
}

func TestTransportError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want abi.Error
	}{
		{abi.Errorf(abi.CodeUnavailable, "connection refused"), abi.Error{Code: abi.CodeUnavailable, Message: "p: POST u: connection refused"}},
		{&abi.Error{Code: abi.CodePermissionDenied, Message: "host api.x.com is not granted", Status: 0}, abi.Error{Code: abi.CodePermissionDenied, Message: "p: POST u: host api.x.com is not granted"}},
		{&abi.Error{Code: abi.CodeLimitExceeded, Message: "timeout", RetryAfter: 2}, abi.Error{Code: abi.CodeLimitExceeded, Message: "p: POST u: timeout", RetryAfter: 2}},
		{abi.Errorf(abi.CodeInternal, "read failed"), abi.Error{Code: abi.CodeUnavailable, Message: "p: POST u: read failed"}},
		{errors.New("connection reset"), abi.Error{Code: abi.CodeUnavailable, Message: "p: POST u: connection reset"}},
	} {
		if got := TransportError("p", "POST u", tc.err); *got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.err, *got, tc.want)
		}
	}
}

func TestPostOutsideAPlugin(t *testing.T) {
	// Outside a plugin the host's functions fail: the call never reaches an answer.
	_, err := Post("p", "http://x/v1", nil, map[string]any{"a": 1}, nil)
	if !isCode(err, abi.CodeUnavailable) || !strings.HasPrefix(abi.AsError(err).Message, "p: POST http://x/v1: ") {
		t.Errorf("Post = %v", err)
	}
	if _, err := Post("p", "http://x/v1", nil, func() {}, nil); !isCode(err, abi.CodeInvalidInput) {
		t.Errorf("Post(func) = %v", err)
	}
	for h, want := range map[string]bool{"text/event-stream": true, "Text/Event-Stream; charset=utf-8": true, "application/json": false, "": false} {
		if got := IsEventStream(map[string]string{"content-type": h}); got != want {
			t.Errorf("IsEventStream(%q) = %v", h, got)
		}
	}
}
