package host

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrSignature is wrapped by the load error of a plugin whose signature is required
// and missing, malformed, made by a key that is not trusted, or not valid for the
// module (which was then changed after signing).
var ErrSignature = errors.New("plugin signature not accepted")

// SignatureAlgorithm is the only algorithm of plugin signatures.
const SignatureAlgorithm = "ed25519"

// publicKeyPrefix starts a public key written as text: "ed25519:<base64>".
const publicKeyPrefix = SignatureAlgorithm + ":"

// signedContext separates what a plugin signature signs from anything else the same
// key might sign: the signature covers this, then the module's hex SHA-256.
const signedContext = "terrarium plugin signature v1\n"

// Signature is a plugin's detached signature, the JSON of its <file>.wasm.sig file: who
// signed which module. The signature proper covers the module's SHA-256; the other
// fields let the host say which key signed and whether the module changed.
type Signature struct {
	Algorithm string `json:"algorithm"`
	// Key is the signer's public key, as FormatPublicKey writes it.
	Key string `json:"key"`
	// SHA256 is the hex SHA-256 of the module that was signed.
	SHA256 string `json:"sha256"`
	// Sig is the ed25519 signature, in standard base64.
	Sig string `json:"signature"`
}

// SignatureFile is the name of the detached signature of a plugin file: path + ".sig".
func SignatureFile(path string) string { return path + ".sig" }

// GenerateKey returns a new signing key pair, from crypto/rand.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// FormatPublicKey writes a public key as one line of text, "ed25519:<base64>": the
// form manifests, agent files and the --trusted-key flag take.
func FormatPublicKey(k ed25519.PublicKey) string {
	return publicKeyPrefix + base64.StdEncoding.EncodeToString(k)
}

// ParsePublicKey reads a public key written by FormatPublicKey; surrounding space is
// ignored, so the contents of a .pub file can be given as they are.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	b64, ok := strings.CutPrefix(s, publicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("public key %q: want %s<base64>", abbreviate(s), publicKeyPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %q: want the base64 of %d bytes", abbreviate(s), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// MarshalPrivateKey writes a private key as a PKCS #8 PEM block, the form OpenSSL and
// other tools read.
func MarshalPrivateKey(k ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("marshalling the private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePrivateKey reads an ed25519 private key from a PKCS #8 PEM block.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("private key: want a PEM block of type PRIVATE KEY (PKCS #8)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key: a %T, not an ed25519 key", k)
	}
	return ek, nil
}

// Sign signs a plugin module and returns its detached signature file's contents.
func Sign(wasm []byte, key ed25519.PrivateKey) []byte {
	sum := sha256Hex(wasm)
	sig := Signature{
		Algorithm: SignatureAlgorithm,
		Key:       FormatPublicKey(key.Public().(ed25519.PublicKey)),
		SHA256:    sum,
		Sig:       base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(signedContext+sum))),
	}
	out, _ := json.MarshalIndent(sig, "", "  ") // four strings always marshal
	return append(out, '\n')
}

// VerifySignature checks a plugin module against its detached signature: it must be
// made by one of the trusted keys, over this very module. It returns the key that
// signed. Every error wraps ErrSignature.
func VerifySignature(wasm, sigFile []byte, trusted []ed25519.PublicKey) (ed25519.PublicKey, error) {
	bad := func(format string, args ...any) (ed25519.PublicKey, error) {
		return nil, fmt.Errorf("%w: %s", ErrSignature, fmt.Sprintf(format, args...))
	}
	if len(sigFile) == 0 {
		return bad("the plugin is not signed, and this host requires a signature by one of %s", keyList(trusted))
	}
	var sig Signature
	dec := json.NewDecoder(bytes.NewReader(sigFile))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sig); err != nil {
		return bad("the signature file is not a Terrarium plugin signature: %v", err)
	}
	if sig.Algorithm != SignatureAlgorithm {
		return bad("signature algorithm %q: want %s", sig.Algorithm, SignatureAlgorithm)
	}
	key, err := ParsePublicKey(sig.Key)
	if err != nil {
		return bad("the signature's %v", err)
	}
	if !slices.ContainsFunc(trusted, func(k ed25519.PublicKey) bool { return k.Equal(key) }) {
		return bad("signed by %s, which is not a trusted key (trusted: %s)", sig.Key, keyList(trusted))
	}
	sum := sha256Hex(wasm)
	if sig.SHA256 != sum {
		return bad("the signature is for the module with SHA-256 %s, not this one (%s): the module changed after signing", abbreviate(sig.SHA256), sum)
	}
	raw, err := base64.StdEncoding.DecodeString(sig.Sig)
	if err != nil || !ed25519.Verify(key, []byte(signedContext+sum), raw) {
		return bad("the signature by %s does not verify: the signature file was altered", sig.Key)
	}
	return key, nil
}

// checkSignature enforces signatures when the host or the manifest trusts any key:
// the module must then be signed by one of them.
func (h *Host) checkSignature(wasm []byte, m Manifest) error {
	trusted := slices.Clone(h.trustedKeys)
	for _, s := range m.TrustedKeys {
		k, err := ParsePublicKey(s)
		if err != nil {
			return fmt.Errorf("manifest: trustedKeys: %w", err)
		}
		trusted = append(trusted, k)
	}
	if len(trusted) == 0 {
		return nil
	}
	_, err := VerifySignature(wasm, m.Signature, trusted)
	return err
}

// WithTrustedKeys makes the host load only plugins signed by one of keys (see Sign).
// A manifest's TrustedKeys add to them for its plugin.
func WithTrustedKeys(keys ...ed25519.PublicKey) Option {
	return optionFunc(func(c *hostConfig) { c.trustedKeys = append(c.trustedKeys, keys...) })
}

func keyList(keys []ed25519.PublicKey) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = FormatPublicKey(k)
	}
	return strings.Join(s, ", ")
}

// abbreviate shortens what may be a long or hostile string for an error message.
func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
