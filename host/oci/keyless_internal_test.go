package oci

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"google.golang.org/protobuf/encoding/protojson"
)

// keylessBundle signs an in-toto statement about the manifest of digest d as identity,
// vouched for by issuer, under the virtual Sigstore vs (its CA, transparency log and
// timestamp authority), and returns the bundle cosign would attach.
func keylessBundle(t *testing.T, vs *ca.VirtualSigstore, identity, issuer string, d digest.Digest) foundSignature {
	t.Helper()
	statement, _ := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"digest": map[string]string{"sha256": d.Encoded()}}},
		"predicateType": "https://sigstore.dev/cosign/sign/v1",
		"predicate":     map[string]any{},
	})
	e, err := vs.AttestAtTime(identity, issuer, statement, time.Now().Add(5*time.Minute), true)
	if err != nil {
		t.Fatal(err)
	}
	vc, _ := e.VerificationContent()
	sc, _ := e.SignatureContent()
	env := sc.EnvelopeContent().RawEnvelope()
	tsrs, _ := e.Timestamps()
	entries, _ := e.TlogEntries()
	pb := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:                   &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TimestampVerificationData: &protobundle.TimestampVerificationData{},
		},
	}
	for _, tsr := range tsrs {
		pb.VerificationMaterial.TimestampVerificationData.Rfc3161Timestamps = append(pb.VerificationMaterial.TimestampVerificationData.Rfc3161Timestamps,
			&protocommon.RFC3161SignedTimestamp{SignedTimestamp: tsr})
	}
	for _, entry := range entries {
		tle := entry.TransparencyLogEntry()
		// The virtual log leaves out the kind, which a bundle carries: the body says it.
		var body struct{ Kind, APIVersion string }
		if err := json.Unmarshal(tle.CanonicalizedBody, &body); err != nil {
			t.Fatal(err)
		}
		tle.KindVersion = &protorekor.KindVersion{Kind: body.Kind, Version: body.APIVersion}
		pb.VerificationMaterial.TlogEntries = append(pb.VerificationMaterial.TlogEntries, tle)
	}
	envelope := &protodsse.Envelope{PayloadType: env.PayloadType}
	for _, s := range env.Signatures {
		sig, err := decodeBase64(s.Sig)
		if err != nil {
			t.Fatal(err)
		}
		envelope.Signatures = append(envelope.Signatures, &protodsse.Signature{Sig: sig, Keyid: s.KeyID})
	}
	payload, err := decodeBase64(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	envelope.Payload = payload
	pb.Content = &protobundle.Bundle_DsseEnvelope{DsseEnvelope: envelope}
	raw, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return foundSignature{Format: formatBundle, Bundle: raw}
}

// TestKeylessIdentity accepts a keyless bundle of a trusted identity, checked under a
// trusted root read from a file, and refuses another identity's, another issuer's,
// and one about another manifest.
func TestKeylessIdentity(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	// No certificate transparency logs: the virtual CA's certificates carry no SCTs
	// (Fulcio's do, and a root naming CT logs requires them).
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), vs.RekorLogs())
	if err != nil {
		t.Fatal(err)
	}
	trJSON, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "trusted_root.json"), trJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	const issuer = "https://issuer.example"
	v, err := Policy{Identities: []Identity{{Subject: "release@acme.example", Issuer: issuer}}, TrustedRoot: "trusted_root.json"}.Verifier("tenant acme", dir)
	if err != nil {
		t.Fatal(err)
	}
	// The virtual log's ID does not survive the trusted root's JSON (its key ID is not
	// the one the JSON form derives), so the root read from the file is swapped for
	// the one it was written from: what is checked here is the policy's identities and
	// verifier options, not sigstore-go's reading of trusted_root.json.
	v.root = tr
	ref := Reference{Registry: "127.0.0.1:5000", Repository: "plugins/weather", Tag: "1"}
	d := digest.FromString("the manifest")

	signer, err := v.verify(ref, d, []foundSignature{keylessBundle(t, vs, "release@acme.example", issuer, d)})
	if err != nil || !strings.Contains(signer, "release@acme.example") {
		t.Fatalf("the trusted identity: %q, %v", signer, err)
	}
	for name, sig := range map[string]foundSignature{
		"another identity": keylessBundle(t, vs, "mallory@acme.example", issuer, d),
		"another issuer":   keylessBundle(t, vs, "release@acme.example", "https://evil.example", d),
		"another manifest": keylessBundle(t, vs, "release@acme.example", issuer, digest.FromString("another")),
	} {
		if _, err := v.verify(ref, d, []foundSignature{sig}); !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), "the policy of tenant acme") {
			t.Errorf("%s: %v, want ErrSignature naming the policy", name, err)
		}
	}
	// A key policy does not take a keyless signature.
	_, pub := newKey(t)
	keys, err := Policy{Keys: []string{pub}}.Verifier("keys", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.verify(ref, d, []foundSignature{keylessBundle(t, vs, "release@acme.example", issuer, d)}); !errors.Is(err, ErrSignature) {
		t.Errorf("a keyless signature under a key policy: %v, want ErrSignature", err)
	}
}

// decodeBase64 reads a DSSE envelope's base64 field.
func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
