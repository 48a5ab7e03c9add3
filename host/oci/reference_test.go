package oci_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host/oci"
)

const dgst = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestParseReference(t *testing.T) {
	for _, c := range []struct {
		in   string
		want oci.Reference
	}{
		{"oci://ghcr.io/acme/weather:1.0.0", oci.Reference{Registry: "ghcr.io", Repository: "acme/weather", Tag: "1.0.0"}},
		{"ghcr.io/acme/weather@" + dgst, oci.Reference{Registry: "ghcr.io", Repository: "acme/weather", Digest: dgst}},
		{"oci://127.0.0.1:5000/plugins/weather:v1@" + dgst, oci.Reference{Registry: "127.0.0.1:5000", Repository: "plugins/weather", Tag: "v1", Digest: dgst}},
		{"oci://localhost:5000/a/b/c:latest", oci.Reference{Registry: "localhost:5000", Repository: "a/b/c", Tag: "latest"}},
	} {
		got, err := oci.ParseReference(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseReference(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if again, err := oci.ParseReference(got.String()); err != nil || again != got {
			t.Errorf("%q does not parse back: %+v, %v", got.String(), again, err)
		}
	}
}

func TestParseReferenceRefuses(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"oci://ghcr.io/acme/weather", "no tag and no digest"},
		{"oci://ghcr.io/acme/weather@sha256:abc", "digest"},
		{"oci://ghcr.io/acme/weather@md5:d41d8cd98f00b204e9800998ecf8427e", "digest"},
		{"oci://ghcr.io/acme/weather@sha512:" + strings.Repeat("0", 128), "want sha256"},
		{"oci://weather:1.0.0", "want registry/repository"},
		{"oci:///weather:1.0.0", "want registry/repository"},
		{"oci://ghcr.io/Acme/weather:1.0.0", "repository"},
		{"oci://ghcr.io/acme/weather:" + strings.Repeat("x", 200), "tag"},
		{"oci://ghcr.io/acme/weather:bad tag", "tag"},
		{"oci://gh cr.io/acme/weather:1", "registry"},
	} {
		_, err := oci.ParseReference(c.in)
		if !errors.Is(err, oci.ErrReference) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseReference(%q): %v, want ErrReference saying %q", c.in, err, c.why)
		}
	}
}

func TestLoopback(t *testing.T) {
	for in, want := range map[string]bool{
		"oci://127.0.0.1:5000/a:1": true, "oci://localhost/a:1": true, "oci://[::1]:5000/a:1": true,
		"oci://127.8.9.1/a:1": true, "oci://ghcr.io/a:1": false, "oci://10.0.0.1:5000/a:1": false,
		"oci://localhost.example.com/a:1": false,
	} {
		if got := ref(t, in).Loopback(); got != want {
			t.Errorf("%s: loopback %v, want %v", in, got, want)
		}
	}
}

// FuzzParseReference checks that no reference makes ParseReference panic, and that
// what it accepts it writes back as itself.
func FuzzParseReference(f *testing.F) {
	for _, s := range []string{"oci://ghcr.io/acme/weather:1.0.0@" + dgst, "oci://127.0.0.1:5000/a:b", "oci://a/b@sha256:", "oci://:@/", "oci://[::1]:5/a:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := oci.ParseReference(s)
		if err != nil {
			return
		}
		again, err := oci.ParseReference(r.String())
		if err != nil || again != r {
			t.Fatalf("%q parsed as %+v, written %q, read back %+v, %v", s, r, r.String(), again, err)
		}
	})
}
