package provider

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
)

// maxErrorBody bounds how much of an error response Post reads.
const maxErrorBody = 64 << 10

// Post sends body, encoded as JSON, to url with a POST through the host and returns
// the response once its head arrives, when its status is 2xx; the caller reads and
// closes its body. A body that cannot be encoded is invalid_input, and a request that
// fails before an answer comes a TransportError. An answer of another status fails
// with the error failed makes of it, given its status, its headers and at most 64 KiB
// of its body (typically HTTPError with the provider's message).
func Post(provider, url string, headers map[string]string, body any, failed func(status int, headers map[string]string, body []byte) *abi.Error) (*sdk.HTTPResponse, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%sencoding the request: %v", prefix(provider), err)
	}
	resp, err := sdk.HTTP(&sdk.HTTPRequest{Method: "POST", URL: url, Headers: headers}, data)
	if err != nil {
		return nil, TransportError(provider, "POST "+url, err)
	}
	if resp.Status >= 200 && resp.Status <= 299 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return nil, failed(resp.Status, resp.Header, b)
}

// IsEventStream reports whether a response's headers say its body is a stream of
// server-sent events (Content-Type text/event-stream).
func IsEventStream(headers map[string]string) bool {
	return strings.Contains(strings.ToLower(header(headers, "content-type")), "text/event-stream")
}
