package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// The agent's view of a plugin: models, tools and handlers that work in Generate,
// DefineSessionFlow and DefineAgent exactly as native ones do. Each call binds the
// session found in its context.

type pluginModel struct {
	p     *Plugin
	local string
	info  *abi.ModelInfo
}

func (m *pluginModel) Name() string           { return m.p.desc.Name + "/" + m.local }
func (m *pluginModel) Info() *abi.ModelInfo   { return m.info }
func (m *pluginModel) Desc() agent.ActionDesc { return agent.ModelDesc(m.Name(), m.info) }

func (m *pluginModel) Generate(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
	in, err := json.Marshal(plugin.GenerateInput{Model: m.local, Request: req, Stream: cb != nil})
	if err != nil {
		return nil, fmt.Errorf("host: encoding the request for %s: %w", m.Name(), err)
	}
	b := &binding{session: agent.AnySessionFromContext(ctx)}
	if cb != nil {
		b.stream = func(ctx context.Context, data []byte) error {
			var c abi.GenerateResponseChunk
			if err := json.Unmarshal(data, &c); err != nil {
				return abi.Errorf(abi.CodeInvalidInput, "chunk: %v", err)
			}
			return cb(ctx, &c)
		}
	}
	out, err := m.p.call(ctx, plugin.ExportGenerate, in, b)
	if err != nil {
		return nil, err
	}
	var resp abi.GenerateResponse
	if err := m.p.decode(plugin.ExportGenerate, out, &resp); err != nil {
		return nil, err
	}
	if resp.Message != nil && resp.Message.Role != "" && resp.Message.Role != abi.RoleModel {
		// Stored in the session as it is, the message would forge a user's (or a
		// tool's) turn.
		return nil, &CallError{Plugin: m.p.desc.Name, Export: plugin.ExportGenerate,
			Err: fmt.Errorf("%w: the model answered with role %q; a model's message has role %q", ErrPluginFault, resp.Message.Role, abi.RoleModel)}
	}
	return &resp, nil
}

type pluginTool struct {
	p      *Plugin
	local  string
	def    *abi.ToolDefinition
	output *schema.Validator // the output schema, compiled at load
}

// newPluginTool returns the action of p's tool td.
func newPluginTool(p *Plugin, td *abi.ToolDefinition) *pluginTool {
	def := *td
	def.Name = p.desc.Name + "/" + td.Name
	return &pluginTool{p: p, local: td.Name, def: &def, output: p.outputs[td.Name]}
}

func (t *pluginTool) Name() string                    { return t.def.Name }
func (t *pluginTool) Definition() *abi.ToolDefinition { return t.def }
func (t *pluginTool) Desc() agent.ActionDesc          { return agent.ToolDesc(t.def) }

func (t *pluginTool) Run(ctx context.Context, input any) (any, error) {
	ti := plugin.ToolInput{Tool: t.local, Input: input}
	if md, resumed := agent.Resumed(ctx); resumed {
		ti.Resumed = md
	}
	buf := newInputBuffer()
	defer buf.release()
	in, err := buf.encode(ti)
	if err != nil {
		return nil, fmt.Errorf("host: encoding the input of %s: %w", t.Name(), err)
	}
	b := &binding{session: agent.AnySessionFromContext(ctx), stream: reportStatus}
	out, err := t.p.call(ctx, plugin.ExportCallTool, in, b)
	if err != nil {
		return nil, err
	}
	res, err := t.toolOutput(out)
	if err != nil {
		return nil, err
	}
	if res.Interrupt != nil {
		return nil, agent.Interrupt(res.Interrupt)
	}
	if len(res.Content) > 0 {
		return &agent.MultipartToolResponse{Output: res.Output, Content: res.Content}, nil
	}
	return res.Output, nil
}

type pluginHandler struct {
	p     *Plugin
	local string
	desc  plugin.HandlerDescriptor
}

func (h *pluginHandler) Name() string            { return h.p.desc.Name + "/" + h.local }
func (h *pluginHandler) Points() []abi.HookPoint { return h.desc.Points }
func (h *pluginHandler) Desc() agent.ActionDesc {
	return agent.HandlerDesc(h.Name(), h.desc.Description, h.desc.Points)
}

func (h *pluginHandler) Handle(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error) {
	hin := *in
	hin.Handler = h.local
	buf := newInputBuffer()
	defer buf.release()
	data, err := buf.encode(&hin)
	if err != nil {
		return nil, fmt.Errorf("host: encoding the input of %s: %w", h.Name(), err)
	}
	b := &binding{session: agent.AnySessionFromContext(ctx), stream: reportStatus}
	out, err := h.p.call(ctx, plugin.ExportHandle, data, b)
	if err != nil {
		return nil, err
	}
	var d abi.Directive
	if err := h.p.decode(plugin.ExportHandle, out, &d); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, &CallError{Plugin: h.p.desc.Name, Export: plugin.ExportHandle, Err: fmt.Errorf("%w: %w", ErrPluginFault, err)}
	}
	return &d, nil
}

// reportStatus forwards a tool's or handler's status to the session flow's client.
func reportStatus(ctx context.Context, data []byte) error {
	if !json.Valid(data) {
		return abi.Errorf(abi.CodeInvalidInput, "a status must be JSON")
	}
	return agent.ReportStatus(ctx, json.RawMessage(data))
}
