package agent

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ActionType is the kind of an action, the first segment of its registry key.
type ActionType string

// The action types Terrarium registers, named as Genkit names them.
const (
	ActionTypeModel       ActionType = "model"
	ActionTypeTool        ActionType = "tool"
	ActionTypeFlow        ActionType = "flow"
	ActionTypeBidiFlow    ActionType = "bidi-flow"
	ActionTypeSessionFlow ActionType = "session-flow"
	ActionTypePrompt      ActionType = "prompt"
	ActionTypeHandler     ActionType = "handler"
	ActionTypeUtil        ActionType = "util"
)

// Key returns the registry key of an action: "/<type>/<name>", where a model's name is
// "<provider>/<model>" (e.g. "/model/openai/gpt-4o", "/tool/calculator").
func Key(t ActionType, name string) string { return "/" + string(t) + "/" + name }

// ActionDesc describes an action: its key and name, what it does, and the JSON Schemas
// of its input, output, streamed chunks and (for bidirectional actions) init data.
type ActionDesc struct {
	Key          string         `json:"key"`
	Type         ActionType     `json:"actionType"`
	Name         string         `json:"name"`
	Description  string         `json:"description,omitempty"`
	InputSchema  map[string]any `json:"inputSchema,omitempty"`
	OutputSchema map[string]any `json:"outputSchema,omitempty"`
	StreamSchema map[string]any `json:"streamSchema,omitempty"`
	InitSchema   map[string]any `json:"initSchema,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// Action is anything the registry holds: models, tools, flows, prompts, handlers.
type Action interface {
	Desc() ActionDesc
}

// Registry holds the actions of one application (or one tenant), keyed as Genkit keys
// them. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	actions map[string]Action
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{actions: map[string]Action{}} }

// Register adds an action under its key. It fails if the key is malformed or taken.
func (r *Registry) Register(a Action) error {
	d := a.Desc()
	if d.Name == "" || strings.ContainsAny(d.Name, " \t\n") {
		return fmt.Errorf("agent: cannot register %s action with name %q", d.Type, d.Name)
	}
	if d.Key != Key(d.Type, d.Name) {
		return fmt.Errorf("agent: action key %q does not match type %q and name %q", d.Key, d.Type, d.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.actions[d.Key]; ok {
		return fmt.Errorf("agent: %w: %s", ErrAlreadyRegistered, d.Key)
	}
	r.actions[d.Key] = a
	return nil
}

// MustRegister registers an action defined in code, where a clash is a programming
// error best found at start-up: it panics where Register would fail. The Define*
// functions of this module use it.
func (r *Registry) MustRegister(a Action) {
	if err := r.Register(a); err != nil {
		panic(err)
	}
}

// Unregister removes the action under key, if any, and reports whether it was there.
// The plugin host uses it to unload a plugin.
func (r *Registry) Unregister(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.actions[key]
	delete(r.actions, key)
	return ok
}

// Lookup returns the action under key, or nil.
func (r *Registry) Lookup(key string) Action {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.actions[key]
}

// Actions describes every registered action, sorted by key.
func (r *Registry) Actions() []ActionDesc {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]ActionDesc, 0, len(r.actions))
	for _, a := range r.actions {
		out = append(out, a.Desc())
	}
	slices.SortFunc(out, func(a, b ActionDesc) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// LookupModel returns the model registered under name ("provider/model").
func (r *Registry) LookupModel(name string) (Model, error) {
	m, ok := r.Lookup(Key(ActionTypeModel, name)).(Model)
	if !ok {
		return nil, fmt.Errorf("agent: %w: model %q", ErrNotFound, name)
	}
	return m, nil
}

// LookupTool returns the tool registered under name.
func (r *Registry) LookupTool(name string) (Tool, error) {
	t, ok := r.Lookup(Key(ActionTypeTool, name)).(Tool)
	if !ok {
		return nil, fmt.Errorf("agent: %w: tool %q", ErrNotFound, name)
	}
	return t, nil
}

// LookupHandler returns the handler registered under name.
func (r *Registry) LookupHandler(name string) (Handler, error) {
	h, ok := r.Lookup(Key(ActionTypeHandler, name)).(Handler)
	if !ok {
		return nil, fmt.Errorf("agent: %w: handler %q", ErrNotFound, name)
	}
	return h, nil
}

// UseModelMiddleware makes every use of the model registered under name go through
// mw (Model fields only): a per-model Reliable, say. Later calls add to earlier ones.
func (r *Registry) UseModelMiddleware(name string, mw ...Middleware) error {
	key := Key(ActionTypeModel, name)
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.actions[key].(Model)
	if !ok {
		return fmt.Errorf("agent: %w: model %q", ErrNotFound, name)
	}
	r.actions[key] = WrapModel(m, mw...)
	return nil
}
