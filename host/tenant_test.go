package host_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
)

// tenantView returns a view of h for the tenant id, with a registry of its own.
func tenantView(t *testing.T, h *host.Host, id string, cfg host.TenantConfig) (*host.Host, *agent.Registry) {
	t.Helper()
	if cfg.Registry == nil {
		cfg.Registry = agent.NewRegistry()
	}
	v, err := h.Tenant(id, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v, cfg.Registry
}

// remember calls misbehave's remember tool: it answers what the plugin's memory held
// from the call before, and keeps text for the next.
func remember(t *testing.T, ctx context.Context, r *agent.Registry, text string) string {
	t.Helper()
	out, err := runWith(ctx, r, "misbehave/remember", map[string]any{"text": text})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := out.(string)
	return s
}

// fakeSession is a session for binding plugin calls: only its identity matters here.
type fakeSession struct {
	agent.AnySession
	id string
	mu sync.Mutex
}

func (s *fakeSession) ID() string { return s.id }
func (s *fakeSession) LockUpdates() func() {
	s.mu.Lock()
	return s.mu.Unlock
}

func inSession(id string) context.Context {
	return agent.NewSessionContext(context.Background(), &fakeSession{id: id})
}

// A plugin that keeps the last caller's input in a global variable never hands one
// tenant's input to another: each tenant's calls run on instances of its own, even
// with one instance each, though the module is compiled once.
func TestTenantsNeverShareAPluginInstance(t *testing.T) {
	h, _ := newHost(t)
	a, ra := tenantView(t, h, "a", host.TenantConfig{})
	b, rb := tenantView(t, h, "b", host.TenantConfig{})
	for _, v := range []*host.Host{a, b} {
		load(t, v, "testdata/misbehave", host.Manifest{MaxInstances: 1})
	}
	ctx := context.Background()
	if got := remember(t, ctx, ra, "a's secret"); got != "" {
		t.Fatalf("a's first call found %q", got)
	}
	if got := remember(t, ctx, rb, "b's"); got != "" {
		t.Errorf("tenant b's call found %q in the plugin's memory", got)
	}
	// Within a tenant, instances are pooled: its own data is still there.
	if got := remember(t, ctx, ra, "a again"); got != "a's secret" {
		t.Errorf("tenant a's second call found %q, want its own first input (pooled)", got)
	}
	if a.Plugin("misbehave") == b.Plugin("misbehave") {
		t.Error("two tenants share one plugin")
	}
	if ra.Lookup("/tool/misbehave/remember") == rb.Lookup("/tool/misbehave/remember") {
		t.Error("two tenants share one tool")
	}
}

// Under session isolation an instance serves one session only: a session's later calls
// find its own data, another session (of the same tenant) never does, and a call of no
// session gets a fresh instance every time. It holds whether the manifest asks for it
// or the call's context does.
func TestSessionIsolation(t *testing.T) {
	for _, how := range []string{"manifest", "context"} {
		t.Run(how, func(t *testing.T) {
			h, _ := newHost(t)
			v, r := tenantView(t, h, "a", host.TenantConfig{})
			m := host.Manifest{MaxInstances: 1}
			isolate := func(ctx context.Context) context.Context { return host.IsolateSessions(ctx) }
			if how == "manifest" {
				m.Isolation = host.IsolationSession
				isolate = func(ctx context.Context) context.Context { return ctx }
			}
			load(t, v, "testdata/misbehave", m)
			s1, s2 := isolate(inSession("s1")), isolate(inSession("s2"))
			if got := remember(t, s1, r, "s1's"); got != "" {
				t.Fatalf("s1's first call found %q", got)
			}
			if got := remember(t, s1, r, "s1 again"); got != "s1's" {
				t.Errorf("s1's second call found %q, want its own", got)
			}
			if got := remember(t, s2, r, "s2's"); got != "" {
				t.Errorf("session s2 found %q in the plugin's memory", got)
			}
			if got := remember(t, s1, r, "s1 once more"); got != "" {
				t.Errorf("s1, after s2 took the only instance, found %q", got)
			}
			none := isolate(context.Background())
			for range 2 {
				if got := remember(t, none, r, "no session's"); got != "" {
					t.Errorf("a call of no session found %q", got)
				}
			}
			if live, _ := v.Plugin("misbehave").Instances(); live > 1 {
				t.Errorf("%d instances live, the manifest allows 1", live)
			}
		})
	}
}

// Session isolation under load: many sessions at once over few instances, each only
// ever finding its own last input.
func TestSessionIsolationConcurrent(t *testing.T) {
	h, _ := newHost(t)
	v, r := tenantView(t, h, "a", host.TenantConfig{})
	load(t, v, "testdata/misbehave", host.Manifest{MaxInstances: 2, Isolation: host.IsolationSession})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", i)
			ctx := inSession(id)
			for j := range 3 {
				out, err := runWith(ctx, r, "misbehave/remember", map[string]any{"text": fmt.Sprintf("%s-%d", id, j)})
				if err != nil {
					t.Error(err)
					return
				}
				if s, _ := out.(string); s != "" && !strings.HasPrefix(s, id+"-") {
					t.Errorf("session %s found %q", id, s)
				}
			}
		})
	}
	wg.Wait()
}

// A view's plugins get the tenant's own secret values, never the environment's (the
// operator's) nor another tenant's, and a secret the tenant lacks is not granted.
func TestTenantSecretsStayTheTenants(t *testing.T) {
	t.Setenv("TERRARIUM_TEST_KEY", "the operator's key")
	h, hr := newHost(t)
	m := host.Manifest{Secrets: map[string]host.Secret{"KEY": {Env: "TERRARIUM_TEST_KEY", Readable: true}}}
	ctx := context.Background()
	for tenant, secrets := range map[string]map[string]string{"a": {"KEY": "a's key"}, "b": {"KEY": "b's key"}, "c": nil} {
		v, r := tenantView(t, h, tenant, host.TenantConfig{Secrets: secrets})
		load(t, v, "testdata/hostcheck", m)
		res := call(t, ctx, r, "secret", map[string]any{"text": "KEY"})
		if secrets == nil {
			wantCode(t, "tenant c's missing secret", res, abi.CodePermissionDenied)
			continue
		}
		if got := wantOK(t, "secret", res); got != secrets["KEY"] {
			t.Errorf("tenant %s read %q, want %q", tenant, got, secrets["KEY"])
		}
	}
	load(t, h, "testdata/hostcheck", m)
	if got := wantOK(t, "the host's own", call(t, ctx, hr, "secret", map[string]any{"text": "KEY"})); got != "the operator's key" {
		t.Errorf("the host made by New read %q, want the environment's", got)
	}
}

// Admit sees each plugin's name and manifest before it is registered, and its refusal
// leaves nothing loaded.
func TestTenantAdmitRefuses(t *testing.T) {
	h, _ := newHost(t)
	ceiling := host.Ceiling{State: plugin.StateRead}
	v, r := tenantView(t, h, "a", host.TenantConfig{Admit: func(name string, m host.Manifest) error {
		if name != "hostcheck" {
			return fmt.Errorf("plugin %s is not the tenant's", name)
		}
		return ceiling.Check(m)
	}})
	_, err := v.Load(context.Background(), wasm(t, "testdata/hostcheck"), host.Manifest{State: plugin.StateWrite})
	var ce *host.CeilingError
	if !errors.Is(err, host.ErrLoad) || !errors.As(err, &ce) || ce.Field != "state" {
		t.Fatalf("load beyond the ceiling: %v", err)
	}
	if v.Plugin("hostcheck") != nil || r.Lookup("/tool/hostcheck/secret") != nil {
		t.Error("a refused plugin stayed loaded")
	}
	load(t, v, "testdata/hostcheck", host.Manifest{State: plugin.StateRead})
	if _, err := v.Load(context.Background(), wasm(t, "testdata/misbehave"), host.Manifest{}); !errors.Is(err, host.ErrLoad) {
		t.Errorf("a plugin not the tenant's: %v", err)
	}
	// A reload is admitted as a load is: it cannot raise the grants past the ceiling.
	if _, err := v.Reload(context.Background(), wasm(t, "testdata/hostcheck"), host.Manifest{State: plugin.StateWrite}); !errors.As(err, &ce) {
		t.Errorf("reload beyond the ceiling: %v", err)
	}
	if p := v.Plugin("hostcheck"); p == nil || p.Manifest().State != plugin.StateRead {
		t.Error("a refused reload replaced the admitted version")
	}
}

// gate records what it admits and refuses once told to.
type gate struct {
	mu     sync.Mutex
	refuse error
	ran    []time.Duration
}

func (g *gate) Enter(ctx context.Context, plugin string) (func(time.Duration), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse != nil {
		return nil, g.refuse
	}
	return func(d time.Duration) {
		g.mu.Lock()
		g.ran = append(g.ran, d)
		g.mu.Unlock()
	}, nil
}

// A view's gate admits every call and learns how long the guest ran; its refusal is
// the call's error.
func TestTenantGate(t *testing.T) {
	h, _ := newHost(t)
	g := &gate{}
	v, r := tenantView(t, h, "a", host.TenantConfig{Gate: g})
	load(t, v, "testdata/misbehave", host.Manifest{})
	ctx := context.Background()
	if _, err := runWith(ctx, r, "misbehave/sleep", map[string]any{"ms": 20}); err != nil {
		t.Fatal(err)
	}
	if len(g.ran) != 1 || g.ran[0] < 20*time.Millisecond {
		t.Errorf("the gate learnt %v, want one call of 20ms or more", g.ran)
	}
	over := errors.New("over budget")
	g.refuse = over
	if _, err := runWith(ctx, r, "misbehave/ok", nil); !errors.Is(err, over) {
		t.Errorf("a refused call: %v", err)
	}
}

func TestTenantViews(t *testing.T) {
	h, _ := newHost(t)
	if _, err := h.Tenant("a", host.TenantConfig{}); !errors.Is(err, agent.ErrInvalidOption) {
		t.Errorf("a view without a registry: %v", err)
	}
	if _, err := h.Tenant("a/b", host.TenantConfig{Registry: agent.NewRegistry()}); !errors.Is(err, agent.ErrInvalidOption) {
		t.Errorf("a bad tenant ID: %v", err)
	}
	v, _ := tenantView(t, h, "a", host.TenantConfig{})
	if _, err := h.Tenant("a", host.TenantConfig{Registry: agent.NewRegistry()}); !errors.Is(err, agent.ErrInvalidOption) {
		t.Errorf("a second view of one tenant: %v", err)
	}
	if _, err := v.Tenant("x", host.TenantConfig{Registry: agent.NewRegistry()}); !errors.Is(err, agent.ErrInvalidOption) {
		t.Errorf("a view of a view: %v", err)
	}
	if v.TenantID() != "a" || h.TenantID() != "" {
		t.Errorf("tenant IDs %q, %q", v.TenantID(), h.TenantID())
	}
	p := load(t, v, "testdata/misbehave", host.Manifest{})
	if err := v.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v.Plugin("misbehave") != nil {
		t.Error("closing a view left its plugin loaded")
	}
	if _, err := p.Call(context.Background(), plugin.ExportDescribe, nil); err == nil {
		t.Error("a closed view's plugin still answers")
	}
	// The tenant's ID is free again.
	tenantView(t, h, "a", host.TenantConfig{})
}
