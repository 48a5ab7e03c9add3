package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// The media types of a Wasm OCI artifact (CNCF TAG Runtime's Wasm OCI artifact
// layout).
const (
	// MediaTypeWasmConfig is the config's media type.
	MediaTypeWasmConfig = "application/vnd.wasm.config.v0+json"
	// MediaTypeWasm is the module layer's media type.
	MediaTypeWasm = "application/wasm"
)

// AnnotationPlugin is the manifest annotation holding Info, as JSON: what the plugin
// is and asks for, readable before its module is pulled.
const AnnotationPlugin = "dev.terrarium.plugin"

// ErrArtifact is wrapped by the error of a manifest that is not a Wasm plugin: no
// application/wasm layer, or several, or an annotation that does not parse.
var ErrArtifact = errors.New("not a Wasm plugin artifact")

// maxModuleBytes bounds the module layer a manifest may announce: a hostile one
// announcing terabytes is refused before anything is fetched.
const maxModuleBytes = 512 << 20

// WasmConfig is the config of a Wasm OCI artifact.
type WasmConfig struct {
	Created      time.Time `json:"created"`
	Author       string    `json:"author,omitempty"`
	Architecture string    `json:"architecture"`
	// OS is wasip1 for a core module (wasip2 is for components, which Terrarium's
	// plugins are not).
	OS string `json:"os"`
	// LayerDigests lists the layers' digests, in the manifest's order.
	LayerDigests []string `json:"layerDigests"`
}

// Info is what a plugin is and asks for, as its descriptor says: Terrarium keeps it
// in the manifest's AnnotationPlugin, so that an operator sees what a plugin would
// be granted before pulling it.
type Info struct {
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// ABI is the protocol version the plugin speaks.
	ABI int `json:"abi"`
	// Kinds lists what the plugin provides: model, tool, handler.
	Kinds    []string `json:"kinds"`
	Models   []string `json:"models,omitempty"`
	Tools    []string `json:"tools,omitempty"`
	Handlers []string `json:"handlers,omitempty"`
	// Capabilities is what the plugin asks to be granted.
	Capabilities plugin.Capabilities `json:"capabilities,omitzero"`
}

// InfoOf summarises a plugin's descriptor as Info.
func InfoOf(d *plugin.Descriptor) Info {
	in := Info{Name: d.Name, Version: d.Version, Description: d.Description, ABI: d.ABI, Kinds: []string{}, Capabilities: d.Capabilities}
	for _, m := range d.Models {
		in.Models = append(in.Models, m.Name)
	}
	for _, t := range d.Tools {
		in.Tools = append(in.Tools, t.Name)
	}
	for _, h := range d.Handlers {
		in.Handlers = append(in.Handlers, h.Name)
	}
	for kind, names := range map[string][]string{"model": in.Models, "tool": in.Tools, "handler": in.Handlers} {
		if len(names) > 0 {
			in.Kinds = append(in.Kinds, kind)
		}
	}
	slices.Sort(in.Kinds)
	return in
}

// Artifact is a plugin's manifest as a registry holds it: enough to know what the
// plugin is, where its module is, and whether it is the one pinned.
type Artifact struct {
	// Ref is the reference it was fetched by, pinned to Digest.
	Ref Reference
	// Digest is the manifest's digest.
	Digest digest.Digest
	// Manifest is the manifest, and Raw its bytes as fetched (Digest is theirs).
	Manifest ocispec.Manifest
	Raw      []byte
	// Module is the descriptor of the application/wasm layer.
	Module ocispec.Descriptor
	// Info is the plugin's AnnotationPlugin, nil when the artifact has none (pushed by
	// another tool).
	Info *Info
}

// packed is an artifact made for pushing: its blobs and manifest.
type packed struct {
	config, manifest []byte
	configDesc       ocispec.Descriptor
	moduleDesc       ocispec.Descriptor
	manifestDesc     ocispec.Descriptor
}

// pack lays a module out as a Wasm OCI artifact, with info in its annotation and
// title (the file name oras pull writes the layer to).
func pack(wasm []byte, info Info, title string, created time.Time) (*packed, error) {
	p := &packed{moduleDesc: ocispec.Descriptor{
		MediaType:   MediaTypeWasm,
		Digest:      digest.FromBytes(wasm),
		Size:        int64(len(wasm)),
		Annotations: map[string]string{ocispec.AnnotationTitle: title},
	}}
	cfg := WasmConfig{Created: created.UTC(), Architecture: "wasm", OS: "wasip1", LayerDigests: []string{p.moduleDesc.Digest.String()}}
	var err error
	if p.config, err = json.Marshal(cfg); err != nil {
		return nil, fmt.Errorf("oci: the config: %w", err)
	}
	p.configDesc = ocispec.Descriptor{MediaType: MediaTypeWasmConfig, Digest: digest.FromBytes(p.config), Size: int64(len(p.config))}
	infoJSON, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("oci: the plugin's annotation: %w", err)
	}
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    p.configDesc,
		Layers:    []ocispec.Descriptor{p.moduleDesc},
		Annotations: map[string]string{
			AnnotationPlugin:          string(infoJSON),
			ocispec.AnnotationCreated: cfg.Created.Format(time.RFC3339),
			ocispec.AnnotationTitle:   info.Name,
			ocispec.AnnotationVersion: info.Version,
		},
	}
	if info.Description != "" {
		m.Annotations[ocispec.AnnotationDescription] = info.Description
	}
	if p.manifest, err = json.Marshal(m); err != nil {
		return nil, fmt.Errorf("oci: the manifest: %w", err)
	}
	p.manifestDesc = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(p.manifest), Size: int64(len(p.manifest))}
	return p, nil
}

// parseArtifact reads a plugin's manifest, fetched by ref: it must hold exactly one
// application/wasm layer of a sane size; its annotation, if any, must parse.
func parseArtifact(ref Reference, raw []byte) (*Artifact, error) {
	d := digest.FromBytes(raw)
	a := &Artifact{Ref: ref.WithDigest(d), Digest: d, Raw: raw}
	bad := func(format string, args ...any) (*Artifact, error) {
		return nil, fmt.Errorf("oci: %s (%s): %w: %s", ref, d, ErrArtifact, fmt.Sprintf(format, args...))
	}
	if err := json.Unmarshal(raw, &a.Manifest); err != nil {
		return bad("the manifest is not JSON: %v", err)
	}
	switch a.Manifest.MediaType {
	case ocispec.MediaTypeImageManifest, "application/vnd.docker.distribution.manifest.v2+json":
	case "":
		if a.Manifest.SchemaVersion != 2 {
			return bad("not an image manifest (schemaVersion %d)", a.Manifest.SchemaVersion)
		}
	default:
		return bad("an artifact of media type %q, not an image manifest", a.Manifest.MediaType)
	}
	var modules []ocispec.Descriptor
	var kinds []string
	for _, l := range a.Manifest.Layers {
		kinds = append(kinds, l.MediaType)
		if l.MediaType == MediaTypeWasm {
			modules = append(modules, l)
		}
	}
	if len(modules) != 1 {
		return bad("want one layer of media type %s, found layers %q", MediaTypeWasm, kinds)
	}
	a.Module = modules[0]
	if err := a.Module.Digest.Validate(); err != nil || a.Module.Digest.Algorithm() != digest.SHA256 {
		return bad("the module layer's digest %q is not a SHA-256", a.Module.Digest)
	}
	if a.Module.Size <= 0 || a.Module.Size > maxModuleBytes {
		return bad("the module layer's size %d is not between 1 and %d bytes", a.Module.Size, maxModuleBytes)
	}
	if s, ok := a.Manifest.Annotations[AnnotationPlugin]; ok {
		var in Info
		if err := json.Unmarshal([]byte(s), &in); err != nil {
			return bad("annotation %s: %v", AnnotationPlugin, err)
		}
		a.Info = &in
	}
	return a, nil
}
