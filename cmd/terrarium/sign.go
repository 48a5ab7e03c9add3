package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/terrarium-ai/terrarium/host"
)

// pluginKeygen writes a new signing key pair: the private key (PKCS #8 PEM, readable
// by its owner only) and, beside it, the public key in the one-line form hosts trust.
func pluginKeygen(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin keygen", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium plugin keygen <key file>\n\nWrites a new ed25519 private key to <key file> and its public key to <key file>.pub.")
		fs.PrintDefaults()
	}
	path, ok := parse(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	pub, priv, err := host.GenerateKey()
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin keygen: %v\n", err)
		return exitFailed
	}
	pemKey, err := host.MarshalPrivateKey(priv)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin keygen: %v\n", err)
		return exitFailed
	}
	// O_EXCL: a key is never overwritten, or the plugins it signed could no longer be
	// re-signed by the key their users trust.
	if err := writeNew(path, pemKey, 0o600); err != nil {
		fmt.Fprintf(stderr, "terrarium plugin keygen: %v\n", err)
		return exitFailed
	}
	line := host.FormatPublicKey(pub)
	if err := writeNew(path+".pub", []byte(line+"\n"), 0o644); err != nil {
		fmt.Fprintf(stderr, "terrarium plugin keygen: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "private key in %s (keep it secret), public key in %s.pub\n", path, path)
	fmt.Fprintln(stdout, line)
	return exitOK
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// pluginSign writes a plugin's detached signature beside it.
func pluginSign(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin sign", flag.ContinueOnError)
	keyFile := fs.String("key", "", "the private key file (from terrarium plugin keygen)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium plugin sign <file.wasm> -key <key file>\n\nSigns the module's SHA-256 with an ed25519 key and writes the signature to <file.wasm>.sig,\nwhich hosts trusting the key (serve --trusted-key, trustedKeys in grants) require beside it.")
		fs.PrintDefaults()
	}
	file, ok := parse(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	if *keyFile == "" {
		fmt.Fprintln(stderr, "terrarium plugin sign: -key is required")
		fs.Usage()
		return exitUsage
	}
	pemKey, err := os.ReadFile(*keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin sign: %v\n", err)
		return exitFailed
	}
	key, err := host.ParsePrivateKey(pemKey)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin sign: %s: %v\n", *keyFile, err)
		return exitFailed
	}
	wasm, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin sign: %v\n", err)
		return exitFailed
	}
	sigFile := host.SignatureFile(file)
	if err := os.WriteFile(sigFile, host.Sign(wasm, key), 0o644); err != nil {
		fmt.Fprintf(stderr, "terrarium plugin sign: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "signed by %s\n", host.FormatPublicKey(key.Public().(ed25519.PublicKey)))
	fmt.Fprintln(stdout, sigFile)
	return exitOK
}

// pluginVerify checks a plugin's signature as a host trusting the given keys would.
func pluginVerify(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin verify", flag.ContinueOnError)
	var keys trustedKeys
	fs.Var(&keys, "trusted-key", "a trusted public key, ed25519:<base64> or a .pub file (repeatable, at least one)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium plugin verify <file.wasm> --trusted-key <key>\n\nChecks <file.wasm>.sig: made by a trusted key, over this very module.")
		fs.PrintDefaults()
	}
	file, ok := parse(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	if len(keys) == 0 {
		fmt.Fprintln(stderr, "terrarium plugin verify: give at least one --trusted-key")
		return exitUsage
	}
	wasm, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin verify: %v\n", err)
		return exitFailed
	}
	sig, err := os.ReadFile(host.SignatureFile(file))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "terrarium plugin verify: %v\n", err)
		return exitFailed
	}
	signer, err := host.VerifySignature(wasm, sig, keys)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin verify: %s: %v\n", file, err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s: signed by %s\n", file, host.FormatPublicKey(signer))
	return exitOK
}

// trustedKeys is a repeatable flag of public keys: each given as the key itself
// ("ed25519:<base64>") or as the path of a file holding it (a .pub file).
type trustedKeys []ed25519.PublicKey

func (k *trustedKeys) String() string {
	s := make([]string, len(*k))
	for i, key := range *k {
		s[i] = host.FormatPublicKey(key)
	}
	return strings.Join(s, ",")
}

func (k *trustedKeys) Set(v string) error {
	text := v
	if !strings.HasPrefix(v, host.SignatureAlgorithm+":") {
		b, err := os.ReadFile(v)
		if err != nil {
			return fmt.Errorf("neither a key (%s:<base64>) nor a readable key file: %w", host.SignatureAlgorithm, err)
		}
		text = string(b)
	}
	key, err := host.ParsePublicKey(text)
	if err != nil {
		return err
	}
	*k = append(*k, key)
	return nil
}
