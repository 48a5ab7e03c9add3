// Package redact hides secrets in what a plugin reads of the services it calls: a
// secret's value, and the forms a service may echo it in (base64, standard and URL,
// also within a longer encoded text; percent-encoding; hex; a JSON string), are each
// replaced by the secret's placeholder, {{secret:NAME}}, in a text as a whole or in a
// stream, where a secret may straddle two reads.
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Secret is a value to hide, and the name its placeholder shows instead.
type Secret struct {
	Name, Value string
}

// Redactor replaces the forms of a set of secrets. A nil Redactor replaces nothing.
//
// It looks for all of them in one pass: at each byte, whether a form begins with it,
// and with it and the next (most bytes of a text begin none), before comparing the
// forms that may begin there. A search of the text once per form (bytes.Index), a
// secret having up to 18, had a twelfth of the throughput.
type Redactor struct {
	forms   []form // the longest first: of two forms found at one place, the longer goes
	longest int
	first   [256]bool // the bytes a form begins with
	// pairs is a set of the first two bytes of the forms, a bit per pair; short is
	// whether a form has one byte only, and so no pair.
	pairs [1 << 16 / 64]uint64
	short bool
}

// form is one way a secret may be written, and what replaces it.
type form struct {
	text, placeholder []byte
}

// minForm is the length under which an encoded form is left out: its few characters
// would be found in unrelated text, and say next to nothing of the value. The value
// itself is always a form, however short.
const minForm = 4

// New returns the Redactor of secrets, nil if none has a value.
func New(secrets []Secret) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, s := range secrets {
		if s.Value == "" {
			continue
		}
		placeholder := []byte("{{secret:" + s.Name + "}}")
		for i, text := range forms(s.Value) {
			if seen[text] || text == "" || i > 0 && len(text) < minForm {
				continue
			}
			seen[text] = true
			r.forms = append(r.forms, form{[]byte(text), placeholder})
			r.longest = max(r.longest, len(text))
			r.first[text[0]] = true
			if len(text) == 1 {
				r.short = true
			} else {
				pair := uint16(text[0])<<8 | uint16(text[1])
				r.pairs[pair/64] |= 1 << (pair % 64)
			}
		}
	}
	if len(r.forms) == 0 {
		return nil
	}
	slices.SortStableFunc(r.forms, func(a, b form) int { return len(b.text) - len(a.text) })
	return r
}

var percentEscape = regexp.MustCompile(`%[0-9A-F]{2}`)

// forms returns the ways value, not empty, may be written back by a service, the
// value first.
func forms(value string) []string {
	v := []byte(value)
	out := []string{value}
	// A JSON string's contents: with only what must be escaped escaped (as
	// JavaScript's JSON.stringify writes it), "/" too (as PHP's json_encode does), and
	// <, > and & too (as Go's encoding/json does).
	var j bytes.Buffer
	enc := json.NewEncoder(&j)
	enc.SetEscapeHTML(false)
	enc.Encode(value)
	minimal := strings.TrimSuffix(j.String(), "\n")
	minimal = minimal[1 : len(minimal)-1]
	html, _ := json.Marshal(value)
	out = append(out, minimal, strings.ReplaceAll(minimal, "/", `\/`), string(html[1:len(html)-1]))
	// Percent-encoding, of a query (a space is "+") and of a path, with upper- and
	// lower-case hex digits.
	for _, p := range []string{url.QueryEscape(value), url.PathEscape(value)} {
		out = append(out, p, percentEscape.ReplaceAllStringFunc(p, strings.ToLower))
	}
	out = append(out, hex.EncodeToString(v), strings.ToUpper(hex.EncodeToString(v)))
	// base64: the value encoded alone, and the characters that encode its bits alone
	// wherever it starts in a longer encoded text (a header echoed whole, "Bearer "
	// and the secret), for each of the three ways its bytes fall on the encoding's
	// groups of three. Padding is left out: what follows the value's characters
	// differs with what follows the value.
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString(v))
		for lead := range 3 {
			s := enc.EncodeToString(append(make([]byte, lead), v...))
			from, to := (8*lead+5)/6, (8*lead+8*len(v))/6 // the characters whose 6 bits are all the value's
			out = append(out, s[from:to])
		}
	}
	return out
}

// String returns s with every form of the secrets replaced.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	b := []byte(s)
	out, _, _ := r.redact(nil, b, len(b))
	return string(out)
}

// redact returns b[:cut] with the forms that start before limit replaced, appended to
// dst if any was (then replaced is true; b[:cut] itself otherwise), and cut: limit, or
// the end of the last form replaced if that is past it.
func (r *Redactor) redact(dst, b []byte, limit int) (out []byte, cut int, replaced bool) {
	pos := 0
	for {
		start, f := r.find(b, pos, limit)
		if f < 0 {
			break
		}
		dst = append(dst, b[pos:start]...)
		dst = append(dst, r.forms[f].placeholder...)
		pos, replaced = start+len(r.forms[f].text), true
	}
	cut = max(pos, limit)
	if !replaced {
		return b[:cut], cut, false
	}
	return append(dst, b[pos:cut]...), cut, true
}

// find returns the form found first in b from pos on, starting before limit (of
// those starting there, the longest), and where it starts; f is -1 if there is none.
func (r *Redactor) find(b []byte, pos, limit int) (start, f int) {
	for i := pos; i < limit; i++ {
		if !r.first[b[i]] {
			continue
		}
		if i+1 < len(b) && !r.short {
			pair := uint16(b[i])<<8 | uint16(b[i+1])
			if r.pairs[pair/64]&(1<<(pair%64)) == 0 {
				continue
			}
		}
		for f := range r.forms {
			if bytes.HasPrefix(b[i:], r.forms[f].text) {
				return i, f
			}
		}
	}
	return limit, -1
}

// held returns where the longest tail of b that may be the beginning of a form
// starts, len(b) if there is none: what a stream must not hand on before it has read
// further.
func (r *Redactor) held(b []byte) int {
	for p := max(0, len(b)-r.longest+1); p < len(b); p++ {
		if !r.first[b[p]] {
			continue
		}
		tail := b[p:]
		for _, f := range r.forms {
			if len(tail) < len(f.text) && bytes.HasPrefix(f.text, tail) {
				return p
			}
		}
	}
	return len(b)
}

// Reader returns a reader of what src reads, with every form of the secrets replaced,
// one straddling src's reads included. It holds back only a tail of what it has read
// that may begin a form, until it reads on (a stream of events is not delayed unless
// an event ends like the beginning of a secret), and hands on everything at the end
// of src or at its error.
func (r *Redactor) Reader(src io.Reader) io.Reader {
	if r == nil {
		return src
	}
	return &reader{r: r, src: src}
}

type reader struct {
	r   *Redactor
	src io.Reader
	buf []byte // what was read: raw is its tail
	raw []byte // read, not yet handed on: it may begin a form
	out []byte // redacted, not yet handed on
	dst []byte // where out is built when a form was replaced
	err error  // src's, once it returned one
}

func (rd *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(rd.out) == 0 {
		if rd.err != nil {
			return 0, rd.err
		}
		// out is all read: nothing refers to buf but raw, which goes to its start.
		if need := len(rd.raw) + len(p); cap(rd.buf) < need {
			buf := make([]byte, need)
			copy(buf, rd.raw)
			rd.buf = buf
		} else {
			rd.buf = rd.buf[:cap(rd.buf)]
			copy(rd.buf, rd.raw)
		}
		n := len(rd.raw)
		k, err := rd.src.Read(rd.buf[n : n+len(p)])
		rd.err = err
		b := rd.buf[:n+k]
		limit := len(b)
		if err == nil {
			limit = rd.r.held(b)
		}
		out, cut, replaced := rd.r.redact(rd.dst[:0], b, limit)
		if replaced {
			rd.dst = out[:0] // its array, grown, for the next time
		}
		rd.out, rd.raw = out, b[cut:]
	}
	n := copy(p, rd.out)
	rd.out = rd.out[n:]
	return n, nil
}
