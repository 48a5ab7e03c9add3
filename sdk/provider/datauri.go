package provider

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
)

// DataURI is the content of a data: URI (RFC 2397).
type DataURI struct {
	// MediaType is the media type with its parameters as the URI gives them
	// ("image/png", "audio/L16;codec=pcm;rate=24000"), without the base64 flag; empty
	// when the URI names none.
	MediaType string
	// Data is the content, decoded.
	Data []byte
}

// Type returns the media type without its parameters, in lower case ("audio/l16").
func (d *DataURI) Type() string {
	t, _, _ := strings.Cut(d.MediaType, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// Base64 returns the content in standard base64, padded: what APIs take as inline
// data.
func (d *DataURI) Base64() string { return base64.StdEncoding.EncodeToString(d.Data) }

// ParseDataURI parses a data: URI ("data:image/png;base64,iVBORw0KGgo="). It reports
// false when uri is not a data: URI (a URL to pass on as is), and an error when it is
// one that cannot be read (no comma, bad base64 or percent-encoding). Base64 content
// may be standard or URL-safe, padded or not, with white space; other content is
// percent-decoded.
func ParseDataURI(uri string) (*DataURI, bool, error) {
	if len(uri) < 5 || !strings.EqualFold(uri[:5], "data:") {
		return nil, false, nil
	}
	head, payload, ok := strings.Cut(uri[5:], ",")
	if !ok {
		return nil, true, fmt.Errorf("data: URI without a comma")
	}
	var kept []string
	isBase64 := false
	for i, p := range strings.Split(head, ";") {
		p = strings.TrimSpace(p)
		if i > 0 && strings.EqualFold(p, "base64") {
			isBase64 = true
			continue
		}
		if i == 0 || p != "" {
			kept = append(kept, p)
		}
	}
	d := &DataURI{MediaType: strings.Join(kept, ";")}
	if isBase64 {
		clean := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
				return -1
			}
			return r
		}, payload)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(clean); err == nil {
				d.Data = b
				return d, true, nil
			}
		}
		return nil, true, fmt.Errorf("data: URI: invalid base64")
	}
	s, err := url.PathUnescape(payload)
	if err != nil {
		return nil, true, fmt.Errorf("data: URI: %v", err)
	}
	d.Data = []byte(s)
	return d, true, nil
}
