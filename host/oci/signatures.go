package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
)

// How cosign attaches signatures to an artifact.
const (
	// mediaTypeBundlePrefix starts the media type of a Sigstore bundle, which cosign
	// v3 attaches by default as an OCI referrer of the signed manifest (through the
	// referrers API, or the sha256-<hex> tag of an index where the registry has none).
	mediaTypeBundlePrefix = "application/vnd.dev.sigstore.bundle"
	// mediaTypeSimpleSigning is the layer type of the signatures cosign v2 attaches by
	// default (and v3 with --new-bundle-format=false): a simple-signing payload naming
	// the manifest's digest, its signature in an annotation, in a manifest tagged
	// sha256-<hex>.sig.
	mediaTypeSimpleSigning      = "application/vnd.dev.cosign.simplesigning.v1+json"
	annotationCosignSignature   = "dev.cosignproject.cosign/signature"
	annotationCosignCertificate = "dev.sigstore.cosign/certificate"
)

// Signature formats, as foundSignature.Format names them.
const (
	formatBundle        = "bundle"
	formatSimpleSigning = "simplesigning"
)

// maxSignatureBytes bounds one signature blob as fetched.
const maxSignatureBytes = 1 << 20

// maxSignatures bounds the signatures read for one artifact: a registry attaching
// thousands is not read to its end.
const maxSignatures = 64

// foundSignature is one signature found for a manifest, as the cache keeps it.
type foundSignature struct {
	Format string `json:"format"`
	// Bundle is a Sigstore bundle's JSON (format bundle).
	Bundle json.RawMessage `json:"bundle,omitempty"`
	// Payload is the signed simple-signing payload, Signature its base64 signature,
	// Certificate the signer's PEM certificate if keyless (format simplesigning).
	Payload     []byte `json:"payload,omitempty"`
	Signature   string `json:"signature,omitempty"`
	Certificate string `json:"certificate,omitempty"`
}

// signatures fetches the cosign signatures attached to an artifact, both ways cosign
// attaches them. A registry holding none is no error; one that cannot be asked is.
func (c *Client) signatures(ctx context.Context, a *Artifact) ([]foundSignature, error) {
	repo, err := c.repository(a.Ref)
	if err != nil {
		return nil, err
	}
	legacy, err := c.simpleSignings(ctx, repo, a)
	if err != nil {
		return nil, err
	}
	bundles, err := c.bundles(ctx, repo, a)
	if err != nil {
		return nil, err
	}
	return append(bundles, legacy...), nil
}

// simpleSignings fetches the signatures of the sha256-<hex>.sig tag.
func (c *Client) simpleSignings(ctx context.Context, repo *remote.Repository, a *Artifact) ([]foundSignature, error) {
	tag := fmt.Sprintf("%s-%s.sig", a.Digest.Algorithm(), a.Digest.Encoded())
	m, err := fetchManifest(ctx, repo, tag)
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("oci: the signatures of %s (tag %s): %w", a.Ref, tag, err)
	}
	var out []foundSignature
	for _, l := range m.Layers {
		if l.MediaType != mediaTypeSimpleSigning || len(out) == maxSignatures {
			continue
		}
		payload, err := fetchBlob(ctx, repo, l)
		if err != nil {
			return nil, fmt.Errorf("oci: the signatures of %s (tag %s): %w", a.Ref, tag, err)
		}
		out = append(out, foundSignature{Format: formatSimpleSigning, Payload: payload,
			Signature: l.Annotations[annotationCosignSignature], Certificate: l.Annotations[annotationCosignCertificate]})
	}
	return out, nil
}

// bundles fetches the Sigstore bundles attached as referrers of the artifact.
func (c *Client) bundles(ctx context.Context, repo *remote.Repository, a *Artifact) ([]foundSignature, error) {
	subject := ocispec.Descriptor{MediaType: a.Manifest.MediaType, Digest: a.Digest, Size: int64(len(a.Raw))}
	if subject.MediaType == "" {
		subject.MediaType = ocispec.MediaTypeImageManifest
	}
	var referrers []ocispec.Descriptor
	err := repo.Referrers(ctx, subject, "", func(page []ocispec.Descriptor) error {
		for _, r := range page {
			if strings.HasPrefix(r.ArtifactType, mediaTypeBundlePrefix) && len(referrers) < maxSignatures {
				referrers = append(referrers, r)
			}
		}
		return nil
	})
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("oci: the referrers of %s: %w", a.Ref, err)
	}
	var out []foundSignature
	for _, r := range referrers {
		m, err := fetchManifest(ctx, repo, r.Digest.String())
		if err != nil {
			return nil, fmt.Errorf("oci: the signature %s of %s: %w", r.Digest, a.Ref, err)
		}
		for _, l := range m.Layers {
			if !strings.HasPrefix(l.MediaType, mediaTypeBundlePrefix) {
				continue
			}
			b, err := fetchBlob(ctx, repo, l)
			if err != nil {
				return nil, fmt.Errorf("oci: the signature %s of %s: %w", r.Digest, a.Ref, err)
			}
			out = append(out, foundSignature{Format: formatBundle, Bundle: b})
		}
	}
	return out, nil
}

// fetchManifest fetches and decodes a manifest by tag or digest, checking a digest's.
func fetchManifest(ctx context.Context, repo *remote.Repository, reference string) (*ocispec.Manifest, error) {
	_, rc, err := repo.FetchReference(ctx, reference)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	raw, err := readLimited(rc, maxManifestBytes)
	if err != nil {
		return nil, err
	}
	if d, err := digest.Parse(reference); err == nil && digest.FromBytes(raw) != d {
		return nil, fmt.Errorf("the manifest %s has digest %s: %w", d, digest.FromBytes(raw), ErrDigestMismatch)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("the manifest %s is not JSON: %w", reference, err)
	}
	return &m, nil
}

// fetchBlob fetches a small blob and checks it against its descriptor.
func fetchBlob(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) ([]byte, error) {
	if desc.Size < 0 || desc.Size > maxSignatureBytes {
		return nil, fmt.Errorf("blob %s: size %d, beyond %d bytes", desc.Digest, desc.Size, maxSignatureBytes)
	}
	rc, err := repo.Blobs().Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := readLimited(rc, desc.Size)
	if err != nil {
		return nil, err
	}
	if got := digest.FromBytes(b); got != desc.Digest {
		return nil, fmt.Errorf("blob %s has digest %s: %w", desc.Digest, got, ErrDigestMismatch)
	}
	return b, nil
}
