package server

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
)

// The guards every request passes before its route: what keeps a server of one
// deployment, which has no keys, from being driven by any web page its reader opens
// (docs/security.md), and what bounds a client's writes.

// guard wraps h, the public API or the reflection API, in the checks every request
// passes: its Host (on a server of one deployment), its origin (a cross-site request
// that changes anything is refused), its body's type (JSON only: a form or text/plain
// is what a page may send anywhere without asking), and a bound on each write.
func (s *Server) guard(h http.Handler) http.Handler {
	origins := http.NewCrossOriginProtection()
	origins.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, &abi.Error{Code: "cross_origin", Message: "cross-origin request refused: the API takes no request a web page of another site sends"})
	}))
	checked := origins.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) && !isJSON(r.Header.Get("Content-Type")) {
			writeError(w, r, fmt.Errorf("%w, not %q", ErrUnsupportedMediaType, r.Header.Get("Content-Type")))
			return
		}
		h.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = &boundedWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: s.timeouts.Write}
		if s.tenants == nil && !s.hostAllowed(r.Host) {
			s.log.WarnContext(r.Context(), "request refused: host not allowed", "host", r.Host, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			writeError(w, r, fmt.Errorf("%w: %q (a name the server answers under is given with -allowed-hosts)", ErrHostNotAllowed, r.Host))
			return
		}
		checked.ServeHTTP(w, r)
	})
}

// hasBody reports whether a request carries a body.
func hasBody(r *http.Request) bool {
	return r.ContentLength > 0 || r.ContentLength == -1 && r.Body != nil && r.Body != http.NoBody
}

// isJSON reports whether a Content-Type is JSON's.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// hostAllowed reports whether a server of one deployment answers under host (a Host
// header): a loopback name, an IP address (which no page's DNS can make name the
// server), or a host of WithAllowedHosts.
func (s *Server) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || net.ParseIP(host) != nil || slices.Contains(s.hosts, host)
}

// boundedWriter bounds each write of a response, and each flush of a stream, by d
// from the write: a client that stops reading fails the write, rather than holding
// its handler (and the turn feeding it) for ever.
type boundedWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

// arm sets the write deadline; a writer without one (a test's recorder) has none.
func (w *boundedWriter) arm() { w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *boundedWriter) WriteHeader(status int) {
	w.arm()
	w.ResponseWriter.WriteHeader(status)
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

// FlushError flushes, within the bound: http.ResponseController finds it.
func (w *boundedWriter) FlushError() error {
	w.arm()
	return w.rc.Flush()
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *boundedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
