package oci

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// ErrSignature is wrapped by the error of a plugin whose signatures do not satisfy a
// policy: unsigned, or signed by no key or identity the policy trusts, or a signature
// that does not verify.
var ErrSignature = errors.New("plugin signature not accepted")

// Policy says which cosign signatures a plugin pulled from a registry must carry: one
// made by any of Keys, or by any of Identities as certified under TrustedRoot. The
// zero Policy requires none.
type Policy struct {
	// Keys are the public keys trusted to sign (cosign sign --key): each PEM, as
	// cosign generate-key-pair writes cosign.pub, or the path of such a file.
	Keys []string `json:"keys,omitempty"`
	// Identities are the keyless signers trusted (cosign sign with an OpenID Connect
	// identity): a certificate's subject and issuer, checked under TrustedRoot.
	Identities []Identity `json:"identities,omitempty"`
	// TrustedRoot is the path of a Sigstore trusted root (trusted_root.json: the
	// certificate authorities, transparency logs and timestamp authorities that
	// keyless signatures are checked against). Identities need it.
	TrustedRoot string `json:"trustedRoot,omitempty"`
}

// Identity is a keyless signer: the subject of its certificate (an email, a URI) and
// the OpenID Connect issuer that vouched for it, each exact or a regular expression.
type Identity struct {
	Subject       string `json:"subject,omitempty"`
	SubjectRegexp string `json:"subjectRegexp,omitempty"`
	Issuer        string `json:"issuer,omitempty"`
	IssuerRegexp  string `json:"issuerRegexp,omitempty"`
}

// IsZero reports whether the policy requires no signature.
func (p Policy) IsZero() bool { return len(p.Keys) == 0 && len(p.Identities) == 0 }

// Verifier checks signatures against a policy, its keys read and parsed and its
// trusted root loaded.
type Verifier struct {
	name       string
	keys       []trustedKey
	identities []verify.CertificateIdentity
	described  []string // the identities, for errors
	root       root.TrustedMaterial
	rootOpts   []verify.VerifierOption
}

type trustedKey struct {
	id       string // "sha256:<hex>" of the key's DER, shortened
	verifier signature.Verifier
}

// Verifier reads and checks the policy: its keys (paths relative to dir), its
// identities, its trusted root. name says whose policy it is, in errors ("tenant
// acme", "serve --cosign-key"). The zero policy returns nil: nothing to check.
func (p Policy) Verifier(name, dir string) (*Verifier, error) {
	if p.IsZero() {
		if p.TrustedRoot != "" {
			return nil, fmt.Errorf("oci: policy of %s: a trusted root without identities trusts no one", name)
		}
		return nil, nil
	}
	v := &Verifier{name: name}
	for i, k := range p.Keys {
		text := []byte(k)
		if !strings.Contains(k, "-----BEGIN") {
			path := k
			if !filepath.IsAbs(path) && dir != "" {
				path = filepath.Join(dir, path)
			}
			var err error
			if text, err = os.ReadFile(path); err != nil {
				return nil, fmt.Errorf("oci: policy of %s: keys[%d]: neither a PEM public key nor a readable key file: %w", name, i, err)
			}
		}
		key, err := parseKey(text)
		if err != nil {
			return nil, fmt.Errorf("oci: policy of %s: keys[%d]: %w", name, i, err)
		}
		v.keys = append(v.keys, key)
	}
	if len(p.Identities) > 0 {
		if p.TrustedRoot == "" {
			return nil, fmt.Errorf("oci: policy of %s: identities need a trustedRoot (a Sigstore trusted_root.json)", name)
		}
		path := p.TrustedRoot
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		tr, err := root.NewTrustedRootFromPath(path)
		if err != nil {
			return nil, fmt.Errorf("oci: policy of %s: trustedRoot: %w", name, err)
		}
		v.root = tr
		// As cosign verify does: an observer's timestamp (a transparency log's or a
		// timestamp authority's) dates the short-lived certificate, and the logs the
		// root names must have seen the signature and the certificate.
		v.rootOpts = []verify.VerifierOption{verify.WithObserverTimestamps(1)}
		if len(tr.RekorLogs()) > 0 {
			v.rootOpts = append(v.rootOpts, verify.WithTransparencyLog(1))
		}
		if len(tr.CTLogs()) > 0 {
			v.rootOpts = append(v.rootOpts, verify.WithSignedCertificateTimestamps(1))
		}
		for i, id := range p.Identities {
			ci, err := verify.NewShortCertificateIdentity(id.Issuer, id.IssuerRegexp, id.Subject, id.SubjectRegexp)
			if err != nil {
				return nil, fmt.Errorf("oci: policy of %s: identities[%d]: %w", name, i, err)
			}
			v.identities = append(v.identities, ci)
			v.described = append(v.described, id.String())
		}
	}
	return v, nil
}

// String describes the identity: "alice@example.com from https://issuer".
func (id Identity) String() string {
	subject, issuer := id.Subject, id.Issuer
	if subject == "" {
		subject = "/" + id.SubjectRegexp + "/"
	}
	if issuer == "" {
		issuer = "/" + id.IssuerRegexp + "/"
	}
	return subject + " from " + issuer
}

// parseKey reads a PEM public key (ECDSA, RSA or ed25519, as cosign makes them).
func parseKey(text []byte) (trustedKey, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(text)
	if err != nil {
		return trustedKey{}, fmt.Errorf("not a PEM public key: %w", err)
	}
	sv, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return trustedKey{}, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return trustedKey{}, err
	}
	sum := sha256.Sum256(der)
	return trustedKey{id: "sha256:" + hex.EncodeToString(sum[:8]), verifier: sv}, nil
}

// String describes the policy for errors: whose it is and what it trusts.
func (v *Verifier) String() string {
	var parts []string
	if len(v.keys) > 0 {
		ids := make([]string, len(v.keys))
		for i, k := range v.keys {
			ids[i] = k.id
		}
		parts = append(parts, "keys "+strings.Join(ids, ", "))
	}
	if len(v.described) > 0 {
		parts = append(parts, "identities "+strings.Join(v.described, ", "))
	}
	return fmt.Sprintf("the policy of %s (%s)", v.name, strings.Join(parts, "; "))
}

// verify checks the signatures found for the manifest of digest d and returns who
// made the first one the policy accepts. Its error, wrapping ErrSignature, names ref,
// the digest and the policy, and why each signature was refused.
func (v *Verifier) verify(ref Reference, d digest.Digest, sigs []foundSignature) (string, error) {
	if len(sigs) == 0 {
		return "", fmt.Errorf("oci: %s (%s): %w: not signed, and %s requires a cosign signature", ref, d, ErrSignature, v)
	}
	var why []string
	for i, s := range sigs {
		signer, err := v.verifyOne(d, s)
		if err == nil {
			return signer, nil
		}
		why = append(why, fmt.Sprintf("signature %d (%s): %v", i+1, s.Format, err))
	}
	return "", fmt.Errorf("oci: %s (%s): %w by %s: %s", ref, d, ErrSignature, v, strings.Join(why, "; "))
}

// verifyOne checks one signature: a bundle as it is, a simple-signing signature as the
// bundle it would be, with its payload as the artifact, whose claimed digest must be
// d.
func (v *Verifier) verifyOne(d digest.Digest, s foundSignature) (string, error) {
	raw, err := hex.DecodeString(d.Encoded())
	if err != nil {
		return "", err
	}
	var b *bundle.Bundle
	var artifact verify.ArtifactPolicyOption
	switch s.Format {
	case formatBundle:
		b = &bundle.Bundle{}
		if err := b.UnmarshalJSON(s.Bundle); err != nil {
			return "", fmt.Errorf("not a Sigstore bundle: %w", err)
		}
		// A bundle's DSSE statement names the manifest's digest as its subject.
		artifact = verify.WithArtifactDigest(d.Algorithm().String(), raw)
	case formatSimpleSigning:
		if err := checkPayload(s.Payload, d); err != nil {
			return "", err
		}
		if b, err = simpleSigningBundle(s); err != nil {
			return "", err
		}
		artifact = verify.WithArtifact(bytes.NewReader(s.Payload))
	default:
		return "", fmt.Errorf("unknown signature format %q", s.Format)
	}
	var why []string
	if b.VerificationMaterial.GetPublicKey() != nil {
		for _, k := range v.keys {
			err := k.check(b, artifact)
			if err == nil {
				return "key " + k.id, nil
			}
			why = append(why, fmt.Sprintf("key %s: %v", k.id, err))
		}
		if len(v.keys) == 0 {
			return "", errors.New("signed with a key, and the policy trusts no key")
		}
		return "", errors.New(strings.Join(why, "; "))
	}
	if v.root == nil {
		return "", errors.New("signed keyless (with a certificate), and the policy trusts no identity")
	}
	sv, err := verify.NewVerifier(v.root, v.rootOpts...)
	if err != nil {
		return "", err
	}
	opts := make([]verify.PolicyOption, len(v.identities))
	for i, id := range v.identities {
		opts[i] = verify.WithCertificateIdentity(id)
	}
	res, err := sv.Verify(b, verify.NewPolicy(artifact, opts...))
	if err != nil {
		return "", err
	}
	if res.VerifiedIdentity != nil {
		return fmt.Sprintf("%s from %s", res.Signature.Certificate.SubjectAlternativeName, res.Signature.Certificate.Issuer), nil
	}
	return "a trusted identity", nil
}

// check verifies a key-signed bundle with this key alone.
func (k trustedKey) check(b *bundle.Bundle, artifact verify.ArtifactPolicyOption) error {
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		// Valid at all times: a key has no validity period of its own.
		return root.NewExpiringKey(k.verifier, time.Time{}, time.Time{}), nil
	})
	sv, err := verify.NewVerifier(material, verify.WithNoObserverTimestamps())
	if err != nil {
		return err
	}
	_, err = sv.Verify(b, verify.NewPolicy(artifact, verify.WithKey()))
	return err
}

// simplePayload is what cosign's simple-signing payload says is signed.
type simplePayload struct {
	Critical struct {
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// checkPayload checks that a simple-signing payload claims the manifest of digest d.
func checkPayload(payload []byte, d digest.Digest) error {
	var p simplePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("the payload is not a simple-signing payload: %w", err)
	}
	if p.Critical.Type != "cosign container image signature" {
		return fmt.Errorf("the payload's type is %q, not a cosign container image signature", p.Critical.Type)
	}
	if p.Critical.Image.DockerManifestDigest != d.String() {
		return fmt.Errorf("the payload signs %q, not %s", p.Critical.Image.DockerManifestDigest, d)
	}
	return nil
}

// simpleSigningBundle writes a key's simple-signing signature as the Sigstore bundle
// it amounts to: a message signature over the payload. A keyless one is refused: its
// proof of when it was made is a Rekor entry in another annotation, which is not
// read; cosign 3's default bundle carries it in a form sigstore-go checks.
func simpleSigningBundle(s foundSignature) (*bundle.Bundle, error) {
	if s.Certificate != "" {
		return nil, errors.New("a keyless signature under cosign's .sig tag is not checked: sign with cosign's bundle format (cosign 3's default)")
	}
	sig, err := base64.StdEncoding.DecodeString(s.Signature)
	if err != nil || len(sig) == 0 {
		return nil, fmt.Errorf("the signature annotation is not base64: %q", abbreviate(s.Signature))
	}
	sum := sha256.Sum256(s.Payload)
	pb := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{}},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
			Signature:     sig,
		}},
	}
	return bundle.NewBundle(pb)
}
