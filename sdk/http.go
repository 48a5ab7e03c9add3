package sdk

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// HTTPRequest is an outbound HTTP request: method, URL and headers. Header values may
// hold {{secret:NAME}} placeholders, which the host replaces with the granted secret.
type HTTPRequest = plugin.HTTPRequest

// HTTPResponse is the response to HTTP: its head, and a body read from the host as it
// arrives.
type HTTPResponse struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the response headers, names in lower case, repeated values joined
	// with ", ".
	Header map[string]string
	// Body reads the body in pieces as the host receives them, so a model can forward
	// server-sent events as they come. Close it when done (the host closes what is left
	// open when the call ends); reading to the end closes it too.
	Body io.ReadCloser
}

// httpReadSize is how much of a body one http_read asks for.
const httpReadSize = 32 << 10

// HTTP sends a request through the host, which checks the URL's host (and every
// redirect's) against the hosts the manifest grants. body may be nil. It returns as
// soon as the response head arrives.
func HTTP(req *HTTPRequest, body []byte) (*HTTPResponse, error) {
	if req == nil {
		return nil, abi.Errorf(abi.CodeInvalidInput, "sdk: HTTP: nil request")
	}
	head, err := json.Marshal(req)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInternal, "sdk: %s: encoding the request: %v", plugin.FnHTTPRequest, err)
	}
	b, err := callHost(plugin.FnHTTPRequest, blockArg(head), blockArg(body))
	if err != nil {
		return nil, err
	}
	var resp plugin.HTTPResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, abi.Errorf(abi.CodeInternal, "sdk: %s: decoding the response head: %v", plugin.FnHTTPRequest, err)
	}
	return &HTTPResponse{
		Status: resp.Status,
		Header: resp.Headers,
		Body:   &httpBody{handle: resp.Handle},
	}, nil
}

var errBodyClosed = errors.New("sdk: read on a closed HTTP body")

// httpBody reads a response body with http_read and closes it with http_close.
type httpBody struct {
	handle int64
	buf    []byte // bytes read from the host, not yet returned
	err    error  // sticky: io.EOF, errBodyClosed or the host's error
	closed bool   // http_close was called
}

func (b *httpBody) Read(p []byte) (int, error) {
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	data, err := callHost(plugin.FnHTTPRead, numArg(b.handle), numArg(httpReadSize))
	if err != nil {
		b.err = err
		return 0, err
	}
	if len(data) == 0 {
		b.err = io.EOF
		_ = b.close()
		return 0, io.EOF
	}
	n := copy(p, data)
	b.buf = data[n:]
	return n, nil
}

// Close releases the response on the host. Closing twice is harmless.
func (b *httpBody) Close() error {
	if b.err == nil {
		b.err = errBodyClosed
	}
	b.buf = nil
	return b.close()
}

func (b *httpBody) close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	_, err := callHost(plugin.FnHTTPClose, numArg(b.handle))
	return err
}
