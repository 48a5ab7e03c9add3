package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// secret holds the characters that make its forms differ from one another: "/" and
// "+" (URL-escaped, JSON-escaped by some), "?", "&" and "=" (escaped in a query), a
// space ("+" in a query, "%20" in a path), "<" and ">" (JSON-escaped by Go), quotes,
// and "~~~" and "???", whose base64 has "+" and "/" (URL: "-" and "_").
const secret = `sk-live_4f?/+&=<a b>"q"~~~???`

var secrets = []Secret{{Name: "TOKEN", Value: secret}}

const placeholder = "{{secret:TOKEN}}"

// echoes are the ways a service may write the secret back, each as a whole text, and
// how many characters of that text may be left beside the placeholder: those the
// text holds besides the secret's own, and at most three of base64's characters
// after it that mix its last bits with what follows (and the padding).
func echoes(t *testing.T) map[string]struct {
	text string
	rest int
} {
	t.Helper()
	v := []byte(secret)
	e := map[string]struct {
		text string
		rest int
	}{
		"raw":                {secret, 0},
		"json":               {`"sk-live_4f?/+\u0026=\u003ca b\u003e\"q\"~~~???"`, 2},
		"json-slashes":       {`sk-live_4f?\/+&=<a b>\"q\"~~~???`, 0},
		"query":              {url.QueryEscape(secret), 0},
		"path":               {url.PathEscape(secret), 0},
		"query-lowercase":    {lowerEscapes(url.QueryEscape(secret)), 0},
		"hex":                {hex.EncodeToString(v), 0},
		"HEX":                {strings.ToUpper(hex.EncodeToString(v)), 0},
		"base64":             {base64.StdEncoding.EncodeToString(v), 3},
		"base64-unpadded":    {base64.RawStdEncoding.EncodeToString(v), 1},
		"base64url":          {base64.URLEncoding.EncodeToString(v), 3},
		"base64url-unpadded": {base64.RawURLEncoding.EncodeToString(v), 1},
	}
	if e["query"].text == e["path"].text || e["base64"].text == e["base64url"].text || e["json"].text[1:len(e["json"].text)-1] == secret {
		t.Fatal("the secret's forms do not differ: the test proves little")
	}
	// Within a longer encoded text: the header it was sent in, echoed whole, and
	// prefixes of each length modulo 3.
	for _, prefix := range []string{"Bearer ", "x", "xy", "xyz"} {
		for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding} {
			text := enc.EncodeToString([]byte(prefix + secret + " and more"))
			e[name+" after "+prefix] = struct {
				text string
				rest int
			}{text, len(text) - len(enc.EncodeToString(v)) + 3}
		}
	}
	return e
}

// lowerEscapes writes the hex digits of s's percent-escapes in lower case.
func lowerEscapes(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '%' && i+2 < len(b) {
			copy(b[i+1:], strings.ToLower(string(b[i+1:i+3])))
		}
	}
	return string(b)
}

// Every form of the secret, as a service writes it back, is replaced by the
// placeholder: nothing of the secret is left but the few characters of a base64 text
// that mix its last bits with what follows it.
func TestEchoesAreRedacted(t *testing.T) {
	r := New(secrets)
	for name, e := range echoes(t) {
		got := r.String("error: " + e.text + " is not a valid key")
		rest := strings.Replace(got, placeholder, "", 1)
		rest = strings.TrimPrefix(strings.TrimSuffix(rest, " is not a valid key"), "error: ")
		if !strings.Contains(got, placeholder) || len(rest) > e.rest {
			t.Errorf("%s: %q redacted to %q", name, e.text, got)
		}
	}
}

// A redactor without secrets, or whose secrets have no value, changes nothing.
func TestNoSecrets(t *testing.T) {
	for _, s := range [][]Secret{nil, {{Name: "EMPTY"}}} {
		r := New(s)
		if r != nil {
			t.Errorf("New(%v) = %v, want nil", s, r)
		}
		if got := r.String("text"); got != "text" {
			t.Errorf("a nil Redactor's String: %q", got)
		}
		src := strings.NewReader("text")
		if r.Reader(src) != io.Reader(src) {
			t.Error("a nil Redactor's Reader is not its source")
		}
	}
}

// Of two secrets, each is replaced by its own placeholder, and of two forms found at
// one place, the longer.
func TestTwoSecrets(t *testing.T) {
	r := New([]Secret{{Name: "A", Value: "abc"}, {Name: "AB", Value: "abcdef"}})
	if got := r.String("abcdef abc abcde"); got != "{{secret:AB}} {{secret:A}} {{secret:A}}de" {
		t.Errorf("got %q", got)
	}
	// However short: a secret of one byte has no pair of bytes to be found by.
	r = New([]Secret{{Name: "X", Value: "x"}})
	if got := r.String("axbx"); got != "a{{secret:X}}b{{secret:X}}" {
		t.Errorf("a secret of one byte: got %q", got)
	}
}

// readAll reads r through iotest.OneByteReader's way of asking: a byte at a time.
func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(iotest.OneByteReader(r))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A stream is redacted as the whole text is, whatever its reads: the secret split
// across two of them, read a byte at a time, asked for a byte at a time.
func TestStreamStraddlingReads(t *testing.T) {
	r := New(secrets)
	for name, e := range echoes(t) {
		text := "data: " + e.text + "\n\ndata: " + e.text + e.text + "\n\n"
		want := r.String(text)
		for _, split := range []int{1, 7, 6 + len(e.text)/2, len(text) - 1} {
			src := io.MultiReader(strings.NewReader(text[:split]), strings.NewReader(text[split:]))
			if got := readAll(t, r.Reader(src)); got != want {
				t.Errorf("%s split at %d: %q, want %q", name, split, got, want)
			}
		}
		if got := readAll(t, r.Reader(iotest.OneByteReader(strings.NewReader(text)))); got != want {
			t.Errorf("%s a byte at a time: %q, want %q", name, got, want)
		}
	}
}

// A stream hands on at once what cannot begin a secret (a server-sent event is not
// held back waiting for the next), and holds back only what may, until it can tell.
func TestStreamHoldsBackOnlyWhatMayBeginASecret(t *testing.T) {
	r := New(secrets)
	pr, pw := io.Pipe()
	defer pw.Close()
	rd := r.Reader(pr)
	read := func(want string) {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			buf := make([]byte, 100)
			n, _ := rd.Read(buf)
			got <- string(buf[:n])
		}()
		select {
		case s := <-got:
			if s != want {
				t.Errorf("read %q, want %q", s, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no read of %q: held back", want)
		}
	}
	go pw.Write([]byte("data: {\"error\": \"bad key\"}\n\n"))
	read("data: {\"error\": \"bad key\"}\n\n")
	// "sk-li" may begin the secret: it waits for what follows.
	go func() {
		pw.Write([]byte("data: sk-li"))
		pw.Write([]byte("ght\n\n"))
	}()
	read("data: ")
	read("sk-light\n\n")
}

// An error of the source ends the stream after what was read before it, all of it.
func TestStreamError(t *testing.T) {
	r := New(secrets)
	boom := io.ErrClosedPipe
	rd := r.Reader(io.MultiReader(strings.NewReader("sk-li"), iotest.ErrReader(boom)))
	b, err := io.ReadAll(rd)
	if string(b) != "sk-li" || err != boom {
		t.Errorf("read %q, %v; want %q, %v", b, err, "sk-li", boom)
	}
}

// FuzzReader: a stream, read in pieces of any sizes, gives what the whole text gives,
// and no form of the secret is left in it.
func FuzzReader(f *testing.F) {
	f.Add([]byte("data: "+secret+"\n\n"), []byte{3, 1, 200})
	f.Add([]byte(base64.StdEncoding.EncodeToString([]byte("Bearer "+secret))), []byte{5})
	f.Add([]byte(secret[:10]+secret+secret[3:]), []byte{1, 1, 1, 7})
	r := New(secrets)
	forms := forms(secret)
	f.Fuzz(func(t *testing.T, text, sizes []byte) {
		want := r.String(string(text))
		src := &pieces{text: text, sizes: sizes}
		got, err := io.ReadAll(r.Reader(src))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("read in pieces %v: %q, want %q", sizes, got, want)
		}
		for piece := range strings.SplitSeq(want, placeholder) {
			for _, form := range forms {
				if len(form) >= minForm && strings.Contains(piece, form) {
					t.Fatalf("%q is left in %q", form, want)
				}
			}
		}
	})
}

// pieces reads text in pieces of the sizes given, in turn (0 read as 1).
type pieces struct {
	text, sizes []byte
	i           int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.text) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(p.sizes) > 0 {
		n = max(1, int(p.sizes[p.i%len(p.sizes)]))
		p.i++
	}
	n = copy(b, p.text[:min(n, len(p.text))])
	p.text = p.text[n:]
	return n, nil
}

// BenchmarkReader measures a large streamed body read through the redactor, against
// reading it as it is: 4 MiB of server-sent events, read 32 KiB at a time (as the
// SDK's http_read asks), echoing the secret once every 64 KiB.
func BenchmarkReader(b *testing.B) {
	var body bytes.Buffer
	for body.Len() < 4<<20 {
		body.WriteString(`data: {"choices":[{"delta":{"content":"a token, and another"}}]}` + "\n\n")
		if body.Len()%(64<<10) < 70 {
			body.WriteString("data: {\"error\":\"" + secret + "\"}\n\n")
		}
	}
	r := New(secrets)
	buf := make([]byte, 32<<10)
	for _, c := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"plain", func(src io.Reader) io.Reader { return src }},
		{"redacted", r.Reader},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(body.Len()))
			b.ReportAllocs()
			for b.Loop() {
				rd := c.wrap(bytes.NewReader(body.Bytes()))
				for {
					if _, err := rd.Read(buf); err == io.EOF {
						break
					}
				}
			}
		})
	}
}
