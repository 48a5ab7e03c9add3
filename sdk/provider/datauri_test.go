package provider

import "testing"

func TestParseDataURI(t *testing.T) {
	for _, tc := range []struct {
		uri, mediaType, typ, data, b64 string
	}{
		{"data:image/png;base64,aGk=", "image/png", "image/png", "hi", "aGk="},
		{"data:image/png;base64,aGk", "image/png", "image/png", "hi", "aGk="},
		{"DATA:image/jpeg;BASE64,/9j/4AAQ", "image/jpeg", "image/jpeg", "\xff\xd8\xff\xe0\x00\x10", "/9j/4AAQ"},
		{"data:image/png;base64,iVBO\nRw0", "image/png", "image/png", "\x89PNG\r", "iVBORw0="},
		{"data:application/octet-stream;base64,-_8=", "application/octet-stream", "application/octet-stream", "\xfb\xff", "+/8="},
		{"data:text/plain,hi%20there", "text/plain", "text/plain", "hi there", "aGkgdGhlcmU="},
		{"data:image/svg+xml,%3Csvg%3E", "image/svg+xml", "image/svg+xml", "<svg>", "PHN2Zz4="},
		{"data:;base64,aGk=", "", "", "hi", "aGk="},
		{"data:,", "", "", "", ""},
		{"data:audio/L16;codec=pcm;rate=24000;base64,AAAA", "audio/L16;codec=pcm;rate=24000", "audio/l16", "\x00\x00\x00", "AAAA"},
	} {
		d, ok, err := ParseDataURI(tc.uri)
		if !ok || err != nil {
			t.Errorf("%s: %v %v", tc.uri, ok, err)
			continue
		}
		if d.MediaType != tc.mediaType || d.Type() != tc.typ || string(d.Data) != tc.data || d.Base64() != tc.b64 {
			t.Errorf("%s: %q %q %q %q", tc.uri, d.MediaType, d.Type(), d.Data, d.Base64())
		}
	}
	for _, uri := range []string{"https://example.com/cat.png", "", "gs://bucket/a.pdf", "dat"} {
		if d, ok, err := ParseDataURI(uri); ok || d != nil || err != nil {
			t.Errorf("%q: %v %v %v", uri, d, ok, err)
		}
	}
	for _, uri := range []string{"data:nocomma", "data:image/png;base64", "data:image/png;base64,@@@", "data:image/png;base64,!!!", "data:text/plain,%zz"} {
		if _, ok, err := ParseDataURI(uri); !ok || err == nil {
			t.Errorf("%q: %v %v, want an error", uri, ok, err)
		}
	}
}
