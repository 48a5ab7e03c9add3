package providertest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A Codec is a provider's API as a server sees it: it reads the plugin's requests and
// writes answers and errors in the API's wire format. It is all a provider's tests
// write for the fake server; it should check what the API checks, so that a request
// the API would refuse fails in the tests too.
type Codec interface {
	// Decode reads a request the plugin sent, with its body. An error refuses it: an
	// *HTTPError with its status, another error with 400.
	Decode(r *http.Request, body []byte) (*Request, error)
	// Write writes a whole answer.
	Write(w http.ResponseWriter, req *Request, a *Answer)
	// Stream starts writing an answer as server-sent events (the headers, the events
	// that open a stream) and returns what writes the rest; the server flushes w after
	// Stream and after each call of the Events.
	Stream(w http.ResponseWriter, req *Request, a *Answer) Events
	// Error writes an error response: its status, the message and the delay a client
	// should wait before it retries (0: none).
	Error(w http.ResponseWriter, status int, message string, retryAfter time.Duration)
}

// Events writes the events of a streamed answer, in the order the server calls them:
// the reasoning and the text in pieces (see Words), or a tool call and its arguments'
// JSON in pieces, then End; or, after a piece, Error instead of the rest.
type Events interface {
	Reasoning(piece string)
	Text(piece string)
	Call(c *Call)
	Args(piece string)
	// Error ends the stream with an error event of the given status.
	Error(status int, message string)
	// End writes the finish reason and the usage, and ends the stream.
	End()
}

// HTTPError is an error of Codec.Decode that refuses a request with a status other
// than 400 (401 without a key, 404 on another path).
type HTTPError struct {
	Status  int
	Message string
}

// Error returns the message.
func (e *HTTPError) Error() string { return e.Message }

// RetryAfter is the delay the fake server asks for with its 429, 503 and 529 errors.
const RetryAfter = 10 * time.Millisecond

// Server is a loopback server of a provider's API answering with the fake model
// (Reply), in the wire format of the provider's Codec. Before the model, it answers
// by the model the request names:
//
//   - "http-<status>" (e.g. "http-429"): an error of that status, with the message
//     ErrorMessage(model, status) and, for 429, 503 and 529, a Retry-After of
//     RetryAfter;
//   - "midstream-<status>": a streamed answer whose first piece of text is followed by
//     an error event of that status, with the same message;
//   - "hang": no answer until the client gives up.
//
// Every request must carry TestKey in the provider's key header (401 otherwise), and
// is recorded (Requests).
type Server struct {
	*httptest.Server
	t     testing.TB
	p     *Provider
	noKey bool // requests must carry no key instead

	mu       sync.Mutex
	requests []*Request
	holds    map[string]chan struct{}
}

// FakeServer starts a Server of the provider's API, closed when the test ends.
func (p *Provider) FakeServer(t testing.TB) *Server {
	return p.fakeServer(t, false)
}

func (p *Provider) fakeServer(t testing.TB, noKey bool) *Server {
	s := &Server{t: t, p: p, noKey: noKey, holds: map[string]chan struct{}{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// ErrorMessage is the message of the errors the fake server answers model with.
func ErrorMessage(model string, status int) string {
	return fmt.Sprintf("the fake server fails model %s with HTTP %d", model, status)
}

// Requests returns the requests the server answered (or refused for their model), in
// order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// Count returns how many requests named model.
func (s *Server) Count(model string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Model == model {
			n++
		}
	}
	return n
}

// Hold makes the streamed answers to prompt (see Request.Prompt) stop after their first
// piece of text until release is called, so that a test can see that piece arrive
// before the rest is written. A client that gives up ends the wait.
func (s *Server) Hold(prompt string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.holds[prompt] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	codec := s.p.Codec
	key := r.Header.Get(s.p.KeyHeader)
	switch {
	case s.noKey && key != "":
		s.t.Errorf("the request carries a key in %s: %q", s.p.KeyHeader, key)
	case !s.noKey && !strings.Contains(key, TestKey):
		codec.Error(w, http.StatusUnauthorized, fmt.Sprintf("no API key in %s", s.p.KeyHeader), 0)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		codec.Error(w, http.StatusBadRequest, "reading the body: "+err.Error(), 0)
		return
	}
	req, err := codec.Decode(r, body)
	if err != nil {
		var he *HTTPError
		if !errors.As(err, &he) {
			he = &HTTPError{Status: http.StatusBadRequest, Message: err.Error()}
		}
		codec.Error(w, he.Status, he.Message, 0)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	failAt := 0 // the status of an error event after the first piece of text
	if rule, code, ok := strings.Cut(req.Model, "-"); ok && (rule == "http" || rule == "midstream") {
		if status, err := strconv.Atoi(code); err == nil && status >= 400 && status <= 599 {
			if rule == "midstream" {
				failAt = status
			} else {
				var wait time.Duration
				if status == 429 || status == 503 || status == 529 {
					wait = RetryAfter
				}
				codec.Error(w, status, ErrorMessage(req.Model, status), wait)
				return
			}
		}
	}
	if req.Model == "hang" {
		<-r.Context().Done()
		return
	}
	a := Reply(req)
	if !req.Stream {
		codec.Write(w, req, a)
		return
	}
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	ev := codec.Stream(w, req, a)
	flush()
	for _, piece := range Words(a.Reasoning) {
		ev.Reasoning(piece)
		flush()
	}
	for i, piece := range Words(a.Text) {
		ev.Text(piece)
		flush()
		if i > 0 {
			continue
		}
		if failAt != 0 {
			ev.Error(failAt, ErrorMessage(req.Model, failAt))
			flush()
			return
		}
		s.mu.Lock()
		hold := s.holds[req.Prompt()]
		s.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
	}
	if c := a.Call; c != nil {
		ev.Call(c)
		flush()
		for i := 0; i < len(c.Args); i += 8 {
			ev.Args(c.Args[i:min(i+8, len(c.Args))])
			flush()
		}
	}
	ev.End()
	flush()
}
