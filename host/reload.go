package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// A plugin's models, tools and handlers are registered as slots: registry entries
// that forward to the plugin version currently loaded, so that Reload can replace the
// version under an entry without a moment where the entry is missing.

// slot is a registry entry of a plugin's action.
type slot interface {
	agent.Action
	// retarget makes the entry forward to a, an action of the same kind and key.
	retarget(a agent.Action) bool
}

// newSlot returns the registry entry forwarding to a plugin action.
func newSlot(a agent.Action) slot {
	switch a := a.(type) {
	case *pluginModel:
		s := &modelSlot{}
		s.cur.Store(a)
		return s
	case *pluginTool:
		s := &toolSlot{}
		s.cur.Store(a)
		return s
	case *pluginHandler:
		s := &handlerSlot{}
		s.cur.Store(a)
		return s
	}
	panic(fmt.Sprintf("host: no slot for %T", a))
}

// replaced reports whether a call that failed with err on the version p should be
// made again on the current version: p was replaced, and closed before the call got
// an instance, so the call never ran.
func replaced(err error, p, now *Plugin) bool {
	return errors.Is(err, errPoolClosed) && p != now
}

type modelSlot struct{ cur atomic.Pointer[pluginModel] }

func (s *modelSlot) Desc() agent.ActionDesc { return s.cur.Load().Desc() }
func (s *modelSlot) Name() string           { return s.cur.Load().Name() }
func (s *modelSlot) Info() *abi.ModelInfo   { return s.cur.Load().Info() }

func (s *modelSlot) Generate(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
	for {
		m := s.cur.Load()
		resp, err := m.Generate(ctx, req, cb)
		if !replaced(err, m.p, s.cur.Load().p) {
			return resp, err
		}
	}
}

func (s *modelSlot) retarget(a agent.Action) bool {
	m, ok := a.(*pluginModel)
	if ok {
		s.cur.Store(m)
	}
	return ok
}

type toolSlot struct{ cur atomic.Pointer[pluginTool] }

func (s *toolSlot) Desc() agent.ActionDesc          { return s.cur.Load().Desc() }
func (s *toolSlot) Name() string                    { return s.cur.Load().Name() }
func (s *toolSlot) Definition() *abi.ToolDefinition { return s.cur.Load().Definition() }

func (s *toolSlot) Run(ctx context.Context, input any) (any, error) {
	for {
		t := s.cur.Load()
		out, err := t.Run(ctx, input)
		if !replaced(err, t.p, s.cur.Load().p) {
			return out, err
		}
	}
}

func (s *toolSlot) retarget(a agent.Action) bool {
	t, ok := a.(*pluginTool)
	if ok {
		s.cur.Store(t)
	}
	return ok
}

type handlerSlot struct{ cur atomic.Pointer[pluginHandler] }

func (s *handlerSlot) Desc() agent.ActionDesc  { return s.cur.Load().Desc() }
func (s *handlerSlot) Name() string            { return s.cur.Load().Name() }
func (s *handlerSlot) Points() []abi.HookPoint { return s.cur.Load().Points() }

func (s *handlerSlot) Handle(ctx context.Context, in *abi.HandlerInput) (*abi.Directive, error) {
	for {
		h := s.cur.Load()
		d, err := h.Handle(ctx, in)
		if !replaced(err, h.p, s.cur.Load().p) {
			return d, err
		}
	}
}

func (s *handlerSlot) retarget(a agent.Action) bool {
	h, ok := a.(*pluginHandler)
	if ok {
		s.cur.Store(h)
	}
	return ok
}

// Reload loads a new version of a plugin in place of the loaded plugin of the same
// name, or loads it if there is none. The swap is atomic: calls in flight finish on
// the old version, calls from then on run on the new one, and no model, tool or
// handler the two versions share is ever missing from the registry (those only the
// old one had are removed, those only the new one has are added). A call that was
// still waiting for an instance of the old version runs on the new one. Reload returns
// once the old version's calls have finished, or ctx has ended: they are then ended.
// If the new version fails to load, the old one stays, untouched.
func (h *Host) Reload(ctx context.Context, wasm []byte, m Manifest) (*Plugin, error) {
	p, err := h.prepareChecked(ctx, wasm, m)
	if err != nil {
		return nil, err
	}

	h.mu.Lock()
	old := h.plugins[p.desc.Name]
	if old == nil || h.closed {
		h.mu.Unlock()
		return h.finishLoad(p)
	}
	// Under h.mu, so that two reloads of one plugin swap one after the other.
	h.plugins[p.desc.Name] = p
	next := map[string]slot{}
	var added []slot
	for _, a := range p.actions() {
		key := a.Desc().Key
		if s, ok := old.slots[key]; ok && s.retarget(a) {
			next[key] = s
			continue
		}
		s := newSlot(a)
		next[key] = s
		added = append(added, s)
	}
	var errs []error
	for _, s := range added {
		errs = append(errs, h.reg.Register(s))
	}
	for key, s := range old.slots {
		if next[key] != s {
			h.reg.Unregister(key)
		}
	}
	p.slots = next
	p.keys = slices.Sorted(maps.Keys(next))
	old.slots, old.keys = nil, nil // the new version owns them: unloading the old must not remove them
	h.mu.Unlock()

	p.warnUngranted()
	h.log.Info("plugin reloaded", "plugin", p.desc.Name, "from", old.desc.Version, "to", p.desc.Version, "sha256", p.sha256)
	return p, errors.Join(errors.Join(errs...), old.close(ctx))
}
