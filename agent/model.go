package agent

import (
	"context"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
)

// ModelStreamCallback receives the chunks of a streamed response as they arrive. A
// non-nil error stops the generation; the model returns it.
type ModelStreamCallback = func(ctx context.Context, chunk *abi.GenerateResponseChunk) error

// ModelFunc generates a response to a request. It streams chunks through cb when cb is
// not nil.
type ModelFunc = func(ctx context.Context, req *abi.GenerateRequest, cb ModelStreamCallback) (*abi.GenerateResponse, error)

// Model is a model action. Native Go models (NewModel) and models served by plugins
// implement it alike.
type Model interface {
	Action
	// Name is "provider/model".
	Name() string
	// Info describes what the model supports. It is never nil.
	Info() *abi.ModelInfo
	// Generate runs the model once: no tool loop, no output parsing.
	Generate(ctx context.Context, req *abi.GenerateRequest, cb ModelStreamCallback) (*abi.GenerateResponse, error)
}

type model struct {
	name string
	info *abi.ModelInfo
	fn   ModelFunc
}

// NewModel returns a model backed by a Go function, without registering it. A nil info
// means a model that supports multi-turn conversations, tools, system messages and
// media, with no native constrained output.
func NewModel(name string, info *abi.ModelInfo, fn ModelFunc) Model {
	if info == nil {
		info = &abi.ModelInfo{}
	}
	if info.Supports == nil {
		c := *info
		c.Supports = &abi.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, Media: true}
		info = &c
	}
	return &model{name: name, info: info, fn: fn}
}

// DefineModel creates a model backed by a Go function and registers it. It panics if
// the name is taken.
func DefineModel(r *Registry, name string, info *abi.ModelInfo, fn ModelFunc) Model {
	m := NewModel(name, info, fn)
	r.MustRegister(m)
	return m
}

func (m *model) Name() string         { return m.name }
func (m *model) Info() *abi.ModelInfo { return m.info }
func (m *model) Desc() ActionDesc     { return ModelDesc(m.name, m.info) }

func (m *model) Generate(ctx context.Context, req *abi.GenerateRequest, cb ModelStreamCallback) (*abi.GenerateResponse, error) {
	resp, err := m.fn(ctx, req, cb)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.name, err)
	}
	if resp == nil {
		return nil, fmt.Errorf("model %s returned no response", m.name)
	}
	return resp, nil
}

// ModelDesc is the registry description of a model, with Genkit's metadata layout:
// {"model": {"label", "versions", "supports", "stage", "customOptions"}}.
func ModelDesc(name string, info *abi.ModelInfo) ActionDesc {
	md := map[string]any{}
	if info != nil {
		if info.Label != "" {
			md["label"] = info.Label
		}
		if len(info.Versions) > 0 {
			md["versions"] = info.Versions
		}
		if info.Supports != nil {
			md["supports"] = info.Supports
		}
		if info.Stage != "" {
			md["stage"] = info.Stage
		}
		if info.ConfigSchema != nil {
			md["customOptions"] = info.ConfigSchema
		}
	}
	return ActionDesc{
		Key:      Key(ActionTypeModel, name),
		Type:     ActionTypeModel,
		Name:     name,
		Metadata: map[string]any{"model": md},
	}
}
