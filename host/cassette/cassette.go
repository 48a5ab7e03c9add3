// Package cassette records the HTTP exchanges of plugins and replays them, so that a
// plugin talking to an API (a model provider) can be tested offline: record once
// against the real API, commit the cassette, replay in CI. A Recorder or a Player is
// the HTTP transport of a host (host.WithHTTPTransport): every request a plugin makes
// through the http_request host function passes through it.
//
// Secrets never reach a cassette: every secret value given is replaced by its
// placeholder, {{secret:NAME}}, wherever it appears (URL, headers, bodies), and
// credential headers (Authorization, X-Api-Key, Cookie...) are dropped. A Player
// redacts the live requests the same way before matching them, so a replay works with
// any key, or a dummy one.
package cassette

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// ErrNoExchange is wrapped by the error of a replayed request that matches no unused
// recorded exchange.
var ErrNoExchange = errors.New("no recorded exchange for the request")

// Cassette is what a cassette file holds, as JSON.
type Cassette struct {
	Exchanges []Exchange `json:"exchanges"`
}

// Exchange is one request and the response it got.
type Exchange struct {
	Request  Request  `json:"request"`
	Response Response `json:"response"`
}

// Request is a recorded request: what a replayed request is matched on.
type Request struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Body   Body   `json:"body,omitzero"`
}

// Response is a recorded response.
type Response struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    Body              `json:"body,omitzero"`
}

// Body is a request's or a response's body: text as it is, anything else in base64.
type Body struct {
	Text   string `json:"text,omitempty"`
	Base64 []byte `json:"base64,omitempty"`
}

// Bytes returns the body's bytes.
func (b Body) Bytes() []byte {
	if b.Base64 != nil {
		return b.Base64
	}
	return []byte(b.Text)
}

// credentialHeaders are never recorded, whatever their value.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Cookie", "Set-Cookie"}

// redactor replaces secret values by their placeholders.
type redactor struct{ r *strings.Replacer }

// newRedactor redacts the non-empty values of secrets (name to value), longest first so
// that a secret containing another is replaced whole.
func newRedactor(secrets map[string]string) redactor {
	names := make([]string, 0, len(secrets))
	for name, v := range secrets {
		if v != "" {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return len(secrets[b]) - len(secrets[a]) })
	var pairs []string
	for _, name := range names {
		pairs = append(pairs, secrets[name], "{{secret:"+name+"}}")
	}
	return redactor{strings.NewReplacer(pairs...)}
}

func (r redactor) string(s string) string { return r.r.Replace(s) }

func (r redactor) body(b []byte) Body {
	if utf8.Valid(b) {
		return Body{Text: r.r.Replace(string(b))}
	}
	return Body{Base64: b}
}

// request reads and redacts a live request, leaving its body readable again.
func (r redactor) request(req *http.Request) (Request, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return Request{}, fmt.Errorf("cassette: reading the request body: %w", err)
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	return Request{Method: req.Method, URL: r.string(req.URL.String()), Body: r.body(body)}, nil
}

// Recorder is an HTTP transport that passes requests on and records each exchange,
// redacted. It is safe for concurrent use.
type Recorder struct {
	next   http.RoundTripper
	redact redactor

	mu       sync.Mutex
	cassette Cassette
}

// NewRecorder returns a Recorder sending requests through next (nil:
// http.DefaultTransport) and redacting the values of secrets (name to value).
func NewRecorder(next http.RoundTripper, secrets map[string]string) *Recorder {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Recorder{next: next, redact: newRedactor(secrets)}
}

// RoundTrip implements http.RoundTripper. The response body is read whole, to be
// recorded, before the response is returned.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	rec, err := r.redact.request(req)
	if err != nil {
		return nil, err
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("cassette: reading the response body: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	headers := map[string]string{}
	for k, v := range resp.Header {
		if !slices.Contains(credentialHeaders, http.CanonicalHeaderKey(k)) {
			headers[k] = r.redact.string(strings.Join(v, ", "))
		}
	}
	r.mu.Lock()
	r.cassette.Exchanges = append(r.cassette.Exchanges, Exchange{
		Request:  rec,
		Response: Response{Status: resp.StatusCode, Headers: headers, Body: r.redact.body(body)},
	})
	r.mu.Unlock()
	return resp, nil
}

// Cassette returns what was recorded so far.
func (r *Recorder) Cassette() Cassette {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Cassette{Exchanges: slices.Clone(r.cassette.Exchanges)}
}

// Save writes what was recorded to a cassette file.
func (r *Recorder) Save(path string) error {
	data, err := json.MarshalIndent(r.Cassette(), "", "  ")
	if err != nil {
		return fmt.Errorf("cassette: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("cassette: %w", err)
	}
	return nil
}

// Player is an HTTP transport that answers requests from a cassette and never touches
// the network. A request is answered by the first unused exchange with the same
// method, URL and body (both redacted); one matching none fails with ErrNoExchange.
// It is safe for concurrent use.
type Player struct {
	redact redactor

	mu        sync.Mutex
	exchanges []Exchange
	used      []bool
}

// NewPlayer returns a Player of c, redacting live requests' values of secrets (name to
// value) as they were when recorded.
func NewPlayer(c Cassette, secrets map[string]string) *Player {
	return &Player{redact: newRedactor(secrets), exchanges: c.Exchanges, used: make([]bool, len(c.Exchanges))}
}

// Load reads a cassette file into a Player. See NewPlayer.
func Load(path string, secrets map[string]string) (*Player, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cassette: %w", err)
	}
	var c Cassette
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("cassette %s: %w", path, err)
	}
	return NewPlayer(c, secrets), nil
}

// RoundTrip implements http.RoundTripper.
func (p *Player) RoundTrip(req *http.Request) (*http.Response, error) {
	live, err := p.redact.request(req)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range p.exchanges {
		r := e.Request
		if p.used[i] || r.Method != live.Method || r.URL != live.URL || !bytes.Equal(r.Body.Bytes(), live.Body.Bytes()) {
			continue
		}
		p.used[i] = true
		resp := &http.Response{
			Status:        fmt.Sprintf("%d %s", e.Response.Status, http.StatusText(e.Response.Status)),
			StatusCode:    e.Response.Status,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        http.Header{},
			Body:          io.NopCloser(bytes.NewReader(e.Response.Body.Bytes())),
			ContentLength: int64(len(e.Response.Body.Bytes())),
			Request:       req,
		}
		for k, v := range e.Response.Headers {
			resp.Header.Set(k, v)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("%w: %s %s (body %d bytes); re-record the cassette if the plugin's requests changed",
		ErrNoExchange, live.Method, live.URL, len(live.Body.Bytes()))
}

// Unused returns the exchanges no request has matched yet.
func (p *Player) Unused() []Exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Exchange
	for i, e := range p.exchanges {
		if !p.used[i] {
			out = append(out, e)
		}
	}
	return out
}
