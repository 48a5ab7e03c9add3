// Package oci keeps Terrarium plugins in OCI registries: it pushes a .wasm module as a
// CNCF Wasm OCI artifact (config application/vnd.wasm.config.v0+json, one
// application/wasm layer) with what the plugin is and asks for in an annotation of its
// manifest, pulls one by reference into a content-addressed cache, and checks the
// cosign signatures attached to it against a policy, with Sigstore's Go library.
//
// A reference is written oci://registry/repository:tag@sha256:<digest>. The digest,
// of the artifact's manifest, pins it: a pinned plugin already in the cache is never
// fetched again, so a host with a warm cache starts without the network. A tag
// without a digest floats, and is refused unless the puller allows floating tags.
//
// Registries are reached with the credentials of the Docker config file and its
// credential helpers (as docker login and oras login leave them), over HTTPS, or
// plain HTTP for a registry on a loopback address or when asked explicitly.
//
// Package host does not import this one: the plugin host stays free of the OCI
// client and Sigstore. Package deploy resolves oci:// plugin paths of agent files
// through it, and the terrarium command pushes, pulls and inspects with it.
package oci
