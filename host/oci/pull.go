package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/opencontainers/go-digest"
)

// ErrFloatingTag is wrapped by the error of a reference with a tag and no digest,
// which a puller refuses unless it allows floating tags.
var ErrFloatingTag = errors.New("floating tag")

// DefaultTimeout bounds one pull unless WithTimeout says otherwise: resolving,
// fetching the manifest, the module and the signatures.
const DefaultTimeout = 2 * time.Minute

// Puller pulls plugins into a content-addressed cache, by reference, checking their
// signatures against a policy when given one. It is safe for concurrent use, and
// deployments (tenants) sharing one share what it pulled: a module pinned by several
// is fetched and kept once.
type Puller struct {
	client   *Client
	cache    cache
	floating bool
	timeout  time.Duration
	log      *slog.Logger
}

// PullerOption configures NewPuller.
type PullerOption interface{ applyPuller(*Puller) }

type pullerOption func(*Puller)

func (f pullerOption) applyPuller(p *Puller) { f(p) }

// WithClient pulls with c instead of a client of NewClient's defaults.
func WithClient(c *Client) PullerOption { return pullerOption(func(p *Puller) { p.client = c }) }

// WithCacheDir keeps pulled plugins in dir instead of terrarium/oci under the user's
// cache directory.
func WithCacheDir(dir string) PullerOption {
	return pullerOption(func(p *Puller) { p.cache.dir = dir })
}

// WithCacheLimit keeps the cached blobs under n bytes (DefaultCacheLimit), evicting
// those used least recently; 0 or less keeps everything.
func WithCacheLimit(n int64) PullerOption {
	return pullerOption(func(p *Puller) { p.cache.limit = n })
}

// AllowFloatingTags lets references with a tag and no digest be pulled: each is
// resolved to the digest its tag points at now, which is logged.
func AllowFloatingTags() PullerOption { return pullerOption(func(p *Puller) { p.floating = true }) }

// WithTimeout bounds each pull (DefaultTimeout).
func WithTimeout(d time.Duration) PullerOption {
	return pullerOption(func(p *Puller) { p.timeout = d })
}

// WithLogger reports what pulling does (default slog.Default()).
func WithLogger(l *slog.Logger) PullerOption { return pullerOption(func(p *Puller) { p.log = l }) }

// NewPuller returns a puller.
func NewPuller(opts ...PullerOption) (*Puller, error) {
	p := &Puller{cache: cache{limit: DefaultCacheLimit}, timeout: DefaultTimeout, log: slog.Default()}
	for _, o := range opts {
		o.applyPuller(p)
	}
	if p.client == nil {
		c, err := NewClient()
		if err != nil {
			return nil, err
		}
		p.client = c
	}
	if p.cache.dir == "" {
		dir, err := defaultCacheDir()
		if err != nil {
			return nil, err
		}
		p.cache.dir = dir
	}
	return p, nil
}

// Pulled is a plugin pulled into the cache.
type Pulled struct {
	// Ref is the reference pulled, pinned to Digest.
	Ref Reference
	// Digest is the manifest's digest.
	Digest digest.Digest
	// Path is the module's file in the cache (named by the module's digest): to be
	// read, never written.
	Path string
	// Module is the module.
	Module []byte
	// Info is what the plugin's annotation says it is, nil without one.
	Info *Info
	// Signer is who made the signature the policy accepted ("key sha256:...", an
	// identity), "" when no policy was given.
	Signer string
	// Cached reports whether manifest and module came from the cache, not the
	// registry.
	Cached bool
}

// Pull pulls the plugin ref names into the cache, or finds it there, and checks its
// signatures against policy (nil: none required). A pinned ref already cached is not
// fetched again; a floating one is refused (ErrFloatingTag) unless the puller allows
// floating tags, and then resolved now. A module or manifest whose digest is not the
// one named (ErrDigestMismatch) is refused, naming ref and the digest.
func (p *Puller) Pull(ctx context.Context, ref Reference, policy *Verifier) (*Pulled, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if !ref.Pinned() {
		if !p.floating {
			return nil, fmt.Errorf("oci: %s: %w: pin it with @sha256:<digest> (terrarium plugin inspect %s shows it), or allow floating tags",
				ref, ErrFloatingTag, ref)
		}
		d, err := p.client.Resolve(ctx, ref)
		if err != nil {
			return nil, err
		}
		p.log.Warn("floating plugin tag resolved", "ref", ref.String(), "digest", d.String(), "pin", ref.WithDigest(d).String())
		ref = ref.WithDigest(d)
	}
	out := &Pulled{Ref: ref, Digest: ref.Digest}
	a, err := p.artifact(ctx, ref, out)
	if err != nil {
		return nil, err
	}
	out.Info = a.Info
	if policy != nil {
		if out.Signer, err = p.verify(ctx, a, policy); err != nil {
			return nil, err
		}
	}
	if err := p.module(ctx, a, out); err != nil {
		return nil, err
	}
	return out, nil
}

// artifact returns ref's manifest, from the cache or else the registry (and then
// kept).
func (p *Puller) artifact(ctx context.Context, ref Reference, out *Pulled) (*Artifact, error) {
	raw, err := p.cache.get(ref.Digest)
	if err != nil {
		p.log.Warn("refetching a cached manifest", "ref", ref.String(), "err", err)
	}
	if raw != nil {
		out.Cached = true
		return parseArtifact(ref, raw)
	}
	a, err := p.client.Artifact(ctx, ref)
	if err != nil {
		return nil, err
	}
	if _, err := p.cache.put(a.Digest, a.Raw); err != nil {
		return nil, err
	}
	return a, nil
}

// module sets out's module and its path, from the cache or else the registry (and
// then kept).
func (p *Puller) module(ctx context.Context, a *Artifact, out *Pulled) error {
	wasm, err := p.cache.get(a.Module.Digest)
	if err != nil {
		p.log.Warn("refetching a cached module", "ref", a.Ref.String(), "err", err)
	}
	if wasm == nil {
		out.Cached = false
		if wasm, err = p.client.Module(ctx, a); err != nil {
			return err
		}
		if _, err := p.cache.put(a.Module.Digest, wasm); err != nil {
			return err
		}
	}
	out.Module, out.Path = wasm, p.cache.blobPath(a.Module.Digest)
	return nil
}

// verify checks the artifact's signatures against policy: those kept from an earlier
// pull first, without the network, then those the registry holds now (kept in turn).
func (p *Puller) verify(ctx context.Context, a *Artifact, policy *Verifier) (string, error) {
	kept, err := p.cache.signatures(a.Digest)
	if err != nil {
		return "", err
	}
	var sigs []foundSignature
	for _, b := range kept {
		var s foundSignature
		if json.Unmarshal(b, &s) == nil {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) > 0 {
		if signer, err := policy.verify(a.Ref, a.Digest, sigs); err == nil {
			return signer, nil
		}
	}
	fresh, err := p.client.signatures(ctx, a)
	if err != nil {
		return "", fmt.Errorf("%w (%s requires a signature)", err, policy)
	}
	for _, s := range fresh {
		b, err := json.Marshal(s)
		if err != nil {
			return "", err
		}
		if err := p.cache.putSignature(a.Digest, b); err != nil {
			return "", err
		}
	}
	return policy.verify(a.Ref, a.Digest, fresh)
}
