package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/oci"
)

// ociFlags are the flags of the commands that reach registries: how, where the
// pulled plugins are kept, and which signatures they need.
type ociFlags struct {
	plainHTTP   bool
	floating    bool
	cacheDir    string
	keys        multiFlag
	identity    string
	issuer      string
	trustedRoot string
}

// register adds the flags to fs; floating only where a tag is refused by default
// (serve), since commands an author runs by hand resolve tags and print the digest.
func (o *ociFlags) register(fs *flag.FlagSet, floating bool) {
	fs.BoolVar(&o.plainHTTP, "plain-http", false, "reach registries over plain HTTP (a registry on a loopback address always is)")
	fs.StringVar(&o.cacheDir, "plugin-cache", "", "keep plugins pulled from registries in this `dir` (default: terrarium/oci in the user's cache directory)")
	fs.Var(&o.keys, "cosign-key", "require registry plugins signed by this cosign public `key` (a PEM file, as cosign generate-key-pair writes cosign.pub; repeatable)")
	fs.StringVar(&o.identity, "certificate-identity", "", "require registry plugins signed keyless by this `identity` (the certificate's subject), with --certificate-oidc-issuer and --trusted-root")
	fs.StringVar(&o.issuer, "certificate-oidc-issuer", "", "the OpenID Connect `issuer` of --certificate-identity")
	fs.StringVar(&o.trustedRoot, "trusted-root", "", "the Sigstore trusted root (trusted_root.json `file`) keyless signatures are checked against")
	if floating {
		fs.BoolVar(&o.floating, "allow-floating-tags", false, "load registry plugins named by a tag without a digest, resolving it at load (and logging the digest)")
	}
}

// policy is the signature policy the flags give, named for errors.
func (o *ociFlags) policy() oci.Policy {
	p := oci.Policy{Keys: o.keys, TrustedRoot: o.trustedRoot}
	if o.identity != "" || o.issuer != "" {
		p.Identities = []oci.Identity{{Subject: o.identity, Issuer: o.issuer}}
	}
	return p
}

// verifier is the flags' policy made ready (nil: no signature required).
func (o *ociFlags) verifier(name string) (*oci.Verifier, error) {
	return o.policy().Verifier(name, "")
}

// client is a registry client as the flags say.
func (o *ociFlags) client() (*oci.Client, error) {
	var opts []oci.ClientOption
	if o.plainHTTP {
		opts = append(opts, oci.WithPlainHTTP())
	}
	return oci.NewClient(opts...)
}

// puller is a puller as the flags say; tags float where floating, or the flag, says.
func (o *ociFlags) puller(log *slog.Logger, floating bool) (*oci.Puller, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	opts := []oci.PullerOption{oci.WithClient(c), oci.WithLogger(log)}
	if o.cacheDir != "" {
		opts = append(opts, oci.WithCacheDir(o.cacheDir))
	}
	if floating || o.floating {
		opts = append(opts, oci.AllowFloatingTags())
	}
	return oci.NewPuller(opts...)
}

// pull pulls a plugin for a command an author or operator runs by hand: a tag is
// resolved, and the pinned reference printed on stderr.
func (o *ociFlags) pull(ctx context.Context, ref string, stderr io.Writer) (*oci.Pulled, error) {
	r, err := oci.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	v, err := o.verifier("the command line")
	if err != nil {
		return nil, err
	}
	p, err := o.puller(slog.New(slog.NewTextHandler(io.Discard, nil)), true)
	if err != nil {
		return nil, err
	}
	pulled, err := p.Pull(ctx, r, v)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "pulled %s\n", pulled.Ref)
	if pulled.Signer != "" {
		fmt.Fprintf(stderr, "signed by %s\n", pulled.Signer)
	}
	return pulled, nil
}

// pluginPush pushes a plugin file to a registry, with what it is and asks for in its
// manifest's annotation, and prints the pinned reference agent files name.
func pluginPush(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin push", flag.ContinueOnError)
	var o ociFlags
	fs.BoolVar(&o.plainHTTP, "plain-http", false, "reach the registry over plain HTTP (a registry on a loopback address always is)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: terrarium plugin push <file.wasm> <registry>/<repository>:<tag>

Pushes the plugin as a Wasm OCI artifact (config application/vnd.wasm.config.v0+json,
one application/wasm layer), with its name, version, exports and the grants it asks
for in the manifest's annotation `+oci.AnnotationPlugin+`, and prints the reference
pinned to the manifest's digest: oci://<registry>/<repository>:<tag>@sha256:...
Credentials come from the Docker config file (docker login, oras login).`)
		fs.PrintDefaults()
	}
	pos, ok := parseArgs(fs, args, 2, stderr)
	if !ok {
		return exitUsage
	}
	ref, err := oci.ParseReference(pos[1])
	if err == nil && (ref.Pinned() || ref.Tag == "") {
		err = fmt.Errorf("%s: push to a tag, without a digest: the digest is what the push makes", pos[1])
	}
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin push: %v\n", err)
		return exitUsage
	}
	wasm, err := os.ReadFile(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin push: %v\n", err)
		return exitFailed
	}
	in, err := inspect(ctx, wasm, host.Manifest{})
	if err != nil || in.Descriptor == nil {
		if err == nil {
			err = in.DescribeErr
		}
		fmt.Fprintf(stderr, "terrarium plugin push: %s does not describe itself, so it is not pushed: %v\n", pos[0], err)
		return exitFailed
	}
	c, err := o.client()
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin push: %v\n", err)
		return exitFailed
	}
	pinned, err := c.Push(ctx, ref, wasm, oci.InfoOf(in.Descriptor))
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin push: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "pushed %s %s (%d bytes)\n", in.Descriptor.Name, in.Descriptor.Version, len(wasm))
	fmt.Fprintln(stdout, pinned)
	return exitOK
}

// pluginPull pulls a plugin into the cache (checking its signatures when given a
// policy) and writes its module to a file, or prints the cached file's path.
func pluginPull(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin pull", flag.ContinueOnError)
	var o ociFlags
	o.register(fs, false)
	out := fs.String("o", "", "write the module to this `file` (default: print the cached file's path)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: terrarium plugin pull <oci://registry/repository:tag[@sha256:...]> [-o file.wasm]

Pulls a plugin into the cache as a host loading it would (a pinned plugin already
cached is not fetched again), checking its cosign signature when given --cosign-key
or an identity, and prints the reference pinned to its digest on stderr.`)
		fs.PrintDefaults()
	}
	ref, ok := parse(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	pulled, err := o.pull(ctx, ref, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin pull: %v\n", err)
		return exitFailed
	}
	path := pulled.Path
	if *out != "" {
		if err := os.WriteFile(*out, pulled.Module, 0o644); err != nil {
			fmt.Fprintf(stderr, "terrarium plugin pull: %v\n", err)
			return exitFailed
		}
		path = *out
	}
	fmt.Fprintln(stdout, path)
	return exitOK
}

// inspectReference shows what a registry plugin is and asks for, from its manifest
// alone: its module is not pulled.
func inspectReference(ctx context.Context, c *wasmCommand, stdout, stderr io.Writer) int {
	ref, err := oci.ParseReference(c.file)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin inspect: %v\n", err)
		return exitUsage
	}
	client, err := c.oci.client()
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin inspect: %v\n", err)
		return exitFailed
	}
	a, err := client.Artifact(ctx, ref)
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin inspect: %v\n", err)
		return exitFailed
	}
	if c.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"ref": a.Ref.String(), "digest": a.Digest, "module": a.Module, "plugin": a.Info})
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ref\t%s\n", a.Ref)
	fmt.Fprintf(tw, "module\t%s, %d bytes\n", a.Module.Digest, a.Module.Size)
	if in := a.Info; in != nil {
		fmt.Fprintf(tw, "plugin\t%s %s (ABI %d)\n", in.Name, in.Version, in.ABI)
		if in.Description != "" {
			fmt.Fprintf(tw, "description\t%s\n", in.Description)
		}
		for _, kind := range []struct {
			name  string
			names []string
		}{{"model", in.Models}, {"tool", in.Tools}, {"handler", in.Handlers}} {
			for _, n := range kind.names {
				fmt.Fprintf(tw, "%s\t/%s/%s/%s\n", kind.name, kind.name, in.Name, n)
			}
		}
		printAsks(tw, in.Capabilities)
	} else {
		fmt.Fprintf(tw, "plugin\tnot described: the manifest has no %s annotation (pushed by another tool); pull it and inspect the file\n", oci.AnnotationPlugin)
	}
	tw.Flush()
	return exitOK
}
