package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host/internal/redact"
)

// httpState holds the responses a call opened; they are closed when the call ends.
type httpState struct {
	open map[int64]*openResponse
	next int64
}

type openResponse struct {
	body io.Reader // the response's body, its plugin's secrets hidden
	io.Closer
	read int64
}

// closeHTTP closes the responses the call left open.
func (b *binding) closeHTTP() {
	for h, r := range b.http.open {
		r.Close()
		delete(b.http.open, h)
	}
}

var secretRef = regexp.MustCompile(`\{\{secret:([A-Za-z0-9_.-]+)\}\}`)

// errRedirectDenied marks a redirect to a host the plugin may not call.
var errRedirectDenied = errors.New("redirect to a host that is not granted")

// client returns the client of one request: every hop of a redirect chain is checked
// against the grants, and a hop to another origin than the request's loses the
// headers that carry secrets (Go's client drops only its own few, such as
// Authorization and Cookie, and only for other domains).
func (p *Plugin) client(secretHeaders []string) *http.Client {
	return &http.Client{Transport: p.host.transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if !allowsURL(p.manifest.HTTP, req.URL) {
			return fmt.Errorf("%w: %s", errRedirectDenied, req.URL.Host)
		}
		if origin(req.URL) != origin(via[0].URL) {
			for _, h := range secretHeaders {
				req.Header.Del(h)
			}
		}
		return nil
	}}
}

// withSecrets replaces the {{secret:NAME}} placeholders in a header's value, each
// only where its secret is bound: this header, and the host of u.
func (m Manifest) withSecrets(header, value string, u *url.URL) (string, error) {
	var denied error
	value = secretRef.ReplaceAllStringFunc(value, func(ref string) string {
		name := secretRef.FindStringSubmatch(ref)[1]
		s, granted := m.Secrets[name]
		switch {
		case denied != nil:
		case !granted:
			denied = abi.Errorf(abi.CodePermissionDenied, "secret %q is not granted", name)
		case http.CanonicalHeaderKey(s.Header) != http.CanonicalHeaderKey(header):
			denied = abi.Errorf(abi.CodePermissionDenied, "secret %q may be sent in the %s header only, not in %s", name, s.Header, header)
		case !allowsURL(s.Hosts, u):
			denied = abi.Errorf(abi.CodePermissionDenied, "secret %q may not be sent to %s (it is bound to %v)", name, u.Host, s.Hosts)
		}
		return s.Value
	})
	return value, denied
}

// redactor returns what hides the values of m's secrets in what the plugin reads of
// responses: all of them but those granted readable, which it may read anyway. Every
// response is searched, whatever its host and whichever secrets its request carried:
// a service may also hand back later what an earlier request sent it.
func (m Manifest) redactor() *redact.Redactor {
	var secrets []redact.Secret
	for _, name := range slices.Sorted(maps.Keys(m.Secrets)) {
		if s := m.Secrets[name]; !s.Readable {
			secrets = append(secrets, redact.Secret{Name: name, Value: s.Value})
		}
	}
	return redact.New(secrets)
}

// httpRequest implements http_request(request, body): it sends the request through the
// host and returns the response head; the body is read with http_read. A plugin with
// secrets reads neither in the head nor in the body any secret's value, nor its
// common encodings (package redact): a service may echo the key it was sent (an API
// error quoting it). So that the body can be searched, its encoding is left to the
// transport (which asks for gzip and decodes it), and a body encoded otherwise is
// refused.
func (h *Host) httpRequest(ctx context.Context, c hostCall, args []uint64) []byte {
	b := bindingOf(ctx)
	m := b.plugin.manifest
	raw, err := c.Read(args[0])
	if err != nil {
		return fail(abi.CodeInvalidInput, "reading the request: %v", err)
	}
	var r plugin.HTTPRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return fail(abi.CodeInvalidInput, "request: %v", err)
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail(abi.CodeInvalidInput, "url %q: want an absolute http or https URL", r.URL)
	}
	if !allowsURL(m.HTTP, u) {
		return fail(abi.CodePermissionDenied, "host %q is not granted", u.Host)
	}
	if len(b.http.open) >= maxOpenHTTP {
		return fail(abi.CodeLimitExceeded, "%d responses are open; close one first", maxOpenHTTP)
	}
	var body io.Reader
	if args[1] != 0 {
		data, err := c.Read(args[1])
		if err != nil {
			return fail(abi.CodeInvalidInput, "reading the body: %v", err)
		}
		body = bytes.NewReader(data)
	}
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fail(abi.CodeInvalidInput, "request: %v", err)
	}
	var secretHeaders []string
	for k, v := range r.Headers {
		withSecrets, err := m.withSecrets(k, v, u)
		if err != nil {
			return failErr(err)
		}
		if secretRef.MatchString(v) {
			secretHeaders = append(secretHeaders, k)
		}
		req.Header.Set(k, withSecrets)
	}
	hide := b.plugin.redact
	if hide != nil {
		req.Header.Del("Accept-Encoding")
	}
	resp, err := b.plugin.client(secretHeaders).Do(req)
	if err != nil {
		if errors.Is(err, errRedirectDenied) {
			return fail(abi.CodePermissionDenied, "%v", errors.Unwrap(err))
		}
		if ctx.Err() != nil {
			return fail(abi.CodeLimitExceeded, "the call's time ran out during the request to %s", u.Host)
		}
		// The error may quote a URL: a redirect's, which the service chose (and may
		// have put a secret in).
		return fail(abi.CodeUnavailable, "%s", hide.String(err.Error()))
	}
	if ce := resp.Header.Get("Content-Encoding"); hide != nil && ce != "" && !strings.EqualFold(ce, "identity") {
		resp.Body.Close()
		return fail(abi.CodeUnavailable, "the response from %s is encoded (Content-Encoding %q), which the host cannot search for the plugin's secrets", u.Host, ce)
	}
	if b.http.open == nil {
		b.http.open = map[int64]*openResponse{}
	}
	b.http.next++
	b.http.open[b.http.next] = &openResponse{body: hide.Reader(resp.Body), Closer: resp.Body}
	head := plugin.HTTPResponse{Handle: b.http.next, Status: resp.StatusCode, Headers: map[string]string{}}
	for k, v := range resp.Header {
		head.Headers[strings.ToLower(k)] = hide.String(strings.Join(v, ", "))
	}
	out, _ := json.Marshal(head)
	return ok(out)
}

// httpRead implements http_read(handle, max): the next bytes of a response body, at
// least one unless the body has ended.
func (h *Host) httpRead(ctx context.Context, c hostCall, args []uint64) []byte {
	b := bindingOf(ctx)
	r := b.http.open[int64(args[0])]
	if r == nil {
		return fail(abi.CodeNotFound, "no open response with handle %d", int64(args[0]))
	}
	n := int64(args[1])
	if n <= 0 || n > maxChunkBytes {
		n = maxChunkBytes
	}
	buf := make([]byte, n)
	for {
		k, err := r.body.Read(buf)
		r.read += int64(k)
		if r.read > b.plugin.manifest.MaxResponseBytes {
			return fail(abi.CodeLimitExceeded, "the response body exceeds %d bytes", b.plugin.manifest.MaxResponseBytes)
		}
		if k > 0 {
			return ok(buf[:k])
		}
		if errors.Is(err, io.EOF) {
			return ok(nil)
		}
		if err != nil {
			if ctx.Err() != nil {
				return fail(abi.CodeLimitExceeded, "the call's time ran out while reading the response")
			}
			return fail(abi.CodeUnavailable, "reading the response: %v", err)
		}
	}
}

// httpClose implements http_close(handle).
func (h *Host) httpClose(ctx context.Context, c hostCall, args []uint64) []byte {
	b := bindingOf(ctx)
	r := b.http.open[int64(args[0])]
	if r == nil {
		return fail(abi.CodeNotFound, "no open response with handle %d", int64(args[0]))
	}
	r.Close()
	delete(b.http.open, int64(args[0]))
	return ok(nil)
}
