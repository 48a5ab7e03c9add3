package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// maxManifestBytes bounds a manifest (and a signature's) as fetched: distribution's
// own limit.
const maxManifestBytes = 4 << 20

// ErrNotFound is wrapped by the error of a reference the registry does not hold.
var ErrNotFound = errdef.ErrNotFound

// Client reaches registries: it pushes plugins, and fetches their manifests, modules
// and signatures. It is safe for concurrent use.
type Client struct {
	plainHTTP bool
	http      *http.Client
	creds     credentials.Store
	authCache auth.Cache
}

// ClientOption configures NewClient.
type ClientOption interface{ applyClient(*Client) }

type clientOption func(*Client)

func (f clientOption) applyClient(c *Client) { f(c) }

// WithPlainHTTP reaches every registry over plain HTTP, not only those on a loopback
// address: for a registry on a trusted network without TLS.
func WithPlainHTTP() ClientOption { return clientOption(func(c *Client) { c.plainHTTP = true }) }

// WithCredentials takes registry credentials from store instead of the Docker
// config file and its credential helpers.
func WithCredentials(store credentials.Store) ClientOption {
	return clientOption(func(c *Client) { c.creds = store })
}

// WithHTTPClient makes requests with hc (its transport, its timeout) instead of a
// client with retries whose every exchange is bounded.
func WithHTTPClient(hc *http.Client) ClientOption {
	return clientOption(func(c *Client) { c.http = hc })
}

// NewClient returns a client with the credentials of the Docker config file
// ($DOCKER_CONFIG/config.json, else ~/.docker/config.json) and its credential
// helpers, as docker login and oras login leave them.
func NewClient(opts ...ClientOption) (*Client, error) {
	c := &Client{authCache: auth.NewCache()}
	for _, o := range opts {
		o.applyClient(c)
	}
	if c.creds == nil {
		store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
		if err != nil {
			return nil, fmt.Errorf("oci: the Docker config file's credentials: %w", err)
		}
		c.creds = store
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Every wait is bounded: connecting, the TLS handshake and a response's
		// headers here; a whole exchange by the caller's context.
		t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = 10 * time.Second
		t.ResponseHeaderTimeout = 30 * time.Second
		c.http = &http.Client{Transport: retry.NewTransport(t)}
	}
	return c, nil
}

// repository returns the registry client of ref's repository.
func (c *Client) repository(ref Reference) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref.repository())
	if err != nil {
		return nil, fmt.Errorf("oci: %s: %w", ref, err)
	}
	repo.PlainHTTP = c.plainHTTP || ref.Loopback()
	repo.Client = &auth.Client{Client: c.http, Cache: c.authCache, Credential: credentials.Credential(c.creds)}
	return repo, nil
}

// Push pushes a plugin module to ref's repository as a Wasm OCI artifact, with info
// in its manifest's annotation, tagged with ref's tag, and returns ref pinned to the
// manifest's digest. A ref with a digest is refused: the digest is the push's
// outcome.
func (c *Client) Push(ctx context.Context, ref Reference, wasm []byte, info Info) (Reference, error) {
	if ref.Pinned() || ref.Tag == "" {
		return Reference{}, fmt.Errorf("oci: push to %s: %w: want registry/repository:tag, without a digest", ref, ErrReference)
	}
	p, err := pack(wasm, info, info.Name+".wasm", time.Now())
	if err != nil {
		return Reference{}, err
	}
	repo, err := c.repository(ref)
	if err != nil {
		return Reference{}, err
	}
	for _, blob := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{p.moduleDesc, wasm}, {p.configDesc, p.config}} {
		exists, err := repo.Exists(ctx, blob.desc)
		if err != nil {
			return Reference{}, fmt.Errorf("oci: push to %s: %w", ref, err)
		}
		if exists {
			continue
		}
		if err := repo.Push(ctx, blob.desc, bytes.NewReader(blob.data)); err != nil {
			return Reference{}, fmt.Errorf("oci: push to %s: %w", ref, err)
		}
	}
	if err := repo.PushReference(ctx, p.manifestDesc, bytes.NewReader(p.manifest), ref.Tag); err != nil {
		return Reference{}, fmt.Errorf("oci: push to %s: the manifest: %w", ref, err)
	}
	return ref.WithDigest(p.manifestDesc.Digest), nil
}

// Resolve returns the digest of the manifest ref names now: its own digest, or what
// its tag points at.
func (c *Client) Resolve(ctx context.Context, ref Reference) (digest.Digest, error) {
	if ref.Pinned() {
		return ref.Digest, nil
	}
	repo, err := c.repository(ref)
	if err != nil {
		return "", err
	}
	desc, err := repo.Resolve(ctx, ref.Tag)
	if err != nil {
		return "", fmt.Errorf("oci: resolving %s: %w", ref, err)
	}
	return desc.Digest, nil
}

// Artifact fetches the manifest ref names and reads it as a plugin: what it is and
// asks for, and where its module is, without fetching the module. A pinned ref's
// manifest must have its digest.
func (c *Client) Artifact(ctx context.Context, ref Reference) (*Artifact, error) {
	repo, err := c.repository(ref)
	if err != nil {
		return nil, err
	}
	_, rc, err := repo.FetchReference(ctx, ref.target())
	if err != nil {
		return nil, fmt.Errorf("oci: fetching %s: %w", ref, err)
	}
	defer rc.Close()
	raw, err := readLimited(rc, maxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("oci: fetching %s: the manifest: %w", ref, err)
	}
	if ref.Pinned() {
		if got := digest.FromBytes(raw); got != ref.Digest {
			return nil, fmt.Errorf("oci: %s: the registry's manifest has digest %s: %w", ref, got, ErrDigestMismatch)
		}
	}
	return parseArtifact(ref, raw)
}

// Module fetches an artifact's module and checks it against the layer's size and
// digest: a tampered blob is refused with ErrDigestMismatch.
func (c *Client) Module(ctx context.Context, a *Artifact) ([]byte, error) {
	repo, err := c.repository(a.Ref)
	if err != nil {
		return nil, err
	}
	rc, err := repo.Blobs().Fetch(ctx, a.Module)
	if err != nil {
		return nil, fmt.Errorf("oci: fetching the module of %s (%s): %w", a.Ref, a.Module.Digest, err)
	}
	defer rc.Close()
	b, err := readLimited(rc, a.Module.Size)
	if err != nil {
		return nil, fmt.Errorf("oci: fetching the module of %s (%s): %w", a.Ref, a.Module.Digest, err)
	}
	if got := digest.FromBytes(b); got != a.Module.Digest || int64(len(b)) != a.Module.Size {
		return nil, fmt.Errorf("oci: %s: the module layer %s came with %d bytes of digest %s: %w",
			a.Ref, a.Module.Digest, len(b), got, ErrDigestMismatch)
	}
	return b, nil
}

// readLimited reads r to its end, failing past limit bytes.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("more than %d bytes", limit)
	}
	return b, nil
}

// notFound reports whether err says the registry does not hold what was asked for.
func notFound(err error) bool { return errors.Is(err, errdef.ErrNotFound) }
