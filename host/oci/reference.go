package oci

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry"
)

// Scheme starts a plugin reference: oci://registry/repository:tag@sha256:<digest>.
const Scheme = "oci://"

// ErrReference is wrapped by the error of a reference that cannot be parsed.
var ErrReference = errors.New("invalid OCI reference")

// Reference names a plugin in a registry: a repository, and a tag, a digest or both.
// With a digest the reference is pinned: the digest, of the artifact's manifest, is
// what is pulled, whatever the tag now points at.
type Reference struct {
	// Registry is the registry's host, with its port if any ("ghcr.io",
	// "127.0.0.1:5000").
	Registry string
	// Repository is the repository's path in the registry ("acme/weather").
	Repository string
	// Tag is the tag, or "" ("1.0.0").
	Tag string
	// Digest is the manifest's digest, or "" ("sha256:9f86d0...").
	Digest digest.Digest
}

// IsReference reports whether s is written as a plugin reference (starts with
// oci://), rather than as a path.
func IsReference(s string) bool { return strings.HasPrefix(s, Scheme) }

// ParseReference parses registry/repository[:tag][@sha256:<digest>], with or without
// oci:// before it. It needs a tag or a digest: a plugin reference never means
// "latest" by omission. The digest must be a SHA-256.
func ParseReference(s string) (Reference, error) {
	bad := func(format string, args ...any) (Reference, error) {
		return Reference{}, fmt.Errorf("%w %q: %s", ErrReference, abbreviate(s), fmt.Sprintf(format, args...))
	}
	rest := strings.TrimPrefix(s, Scheme)
	var ref Reference
	if name, dgst, ok := strings.Cut(rest, "@"); ok {
		d, err := digest.Parse(dgst)
		if err != nil {
			return bad("digest %q: %v", abbreviate(dgst), err)
		}
		if d.Algorithm() != digest.SHA256 {
			return bad("digest %q: want sha256:<64 hex digits>", abbreviate(dgst))
		}
		ref.Digest, rest = d, name
	}
	// A tag is after the last colon of the last path element; a colon before the
	// first slash is the registry's port.
	slash := strings.LastIndex(rest, "/")
	if colon := strings.LastIndex(rest, ":"); colon > slash {
		ref.Tag, rest = rest[colon+1:], rest[:colon]
	}
	registryName, repo, ok := strings.Cut(rest, "/")
	if !ok || registryName == "" || repo == "" {
		return bad("want registry/repository:tag or registry/repository@sha256:<digest>")
	}
	r := registry.Reference{Registry: registryName, Repository: repo, Reference: ref.Tag}
	if err := r.ValidateRegistry(); err != nil {
		return bad("registry: %v", err)
	}
	if err := r.ValidateRepository(); err != nil {
		return bad("repository: %v", err)
	}
	if ref.Tag != "" {
		if err := r.ValidateReferenceAsTag(); err != nil {
			return bad("tag: %v", err)
		}
	}
	if ref.Tag == "" && ref.Digest == "" {
		return bad("no tag and no digest: name a tag (:1.0.0), a digest (@sha256:...) or both")
	}
	ref.Registry, ref.Repository = registryName, repo
	return ref, nil
}

// Pinned reports whether the reference names a digest.
func (r Reference) Pinned() bool { return r.Digest != "" }

// String writes the reference as ParseReference reads it, with oci:// before it.
func (r Reference) String() string { return Scheme + r.name() }

// name is the reference without oci://.
func (r Reference) name() string {
	s := r.Registry + "/" + r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest.String()
	}
	return s
}

// repository is registry/repository.
func (r Reference) repository() string { return r.Registry + "/" + r.Repository }

// target is what the registry is asked for: the digest if any, else the tag.
func (r Reference) target() string {
	if r.Digest != "" {
		return r.Digest.String()
	}
	return r.Tag
}

// WithDigest returns the reference pinned to d, its tag kept.
func (r Reference) WithDigest(d digest.Digest) Reference {
	r.Digest = d
	return r
}

// Loopback reports whether the registry is on a loopback address (localhost,
// 127.0.0.0/8, ::1), which is reached over plain HTTP.
func (r Reference) Loopback() bool {
	host := r.Registry
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.IsLoopback()
}

// abbreviate shortens what may be a long or hostile string for an error message.
func abbreviate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
