package main

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/tenant"
)

// serve -tenants builds each tenant the agents it may use, with the plugins its
// ceilings allow; one that asks for more is refused, naming the tenant and the grant.
func TestDeployTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example's plugins")
	}
	quiet := slog.New(slog.DiscardHandler)
	files, err := deploy.ReadDir(exampleDeployment)
	if err != nil {
		t.Fatal(err)
	}
	write := func(src string) string {
		path := filepath.Join(t.TempDir(), "tenants.yaml")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const b = `
  - id: b
    agents: [support]
    plugins: {offline: {}}
`
	f := serveFlags{tenants: write("tenants:\n  - id: a\n    plugins: {offline: {}, calculator: {timeout: 5s}, clock: {timeout: 5s}, scratchpad: {state: write}, profile: {state: write}}\n" + b),
		data: t.TempDir()}
	st, err := deployTenants(t.Context(), files, f, quiet, noop.NewMeterProvider())
	if err != nil {
		st.close()
		t.Fatal(err)
	}
	var got []string
	for _, tn := range st.tenants {
		for _, a := range tn.Deployment.Agents() {
			got = append(got, tn.ID+"/"+a.Name)
		}
	}
	if strings.Join(got, " ") != "a/assistant a/support b/support" {
		t.Errorf("agents %v", got)
	}
	if err := st.close(); err != nil {
		t.Error(err)
	}

	// The scratchpad's grant of write access is beyond a ceiling of read.
	f.tenants = write("tenants:\n  - id: a\n    plugins: {offline: {}, calculator: {timeout: 5s}, clock: {timeout: 5s}, scratchpad: {state: read}, profile: {state: write}}\n")
	st, err = deployTenants(t.Context(), files, f, quiet, noop.NewMeterProvider())
	st.close()
	if !errors.Is(err, host.ErrBeyondCeiling) || !strings.Contains(err.Error(), "tenant a") {
		t.Errorf("beyond a ceiling: %v", err)
	}
	// A plugin not listed is not loaded.
	f.tenants = write("tenants:\n  - id: b\n    agents: [support]\n    plugins: {calculator: {}}\n")
	st, err = deployTenants(t.Context(), files, f, quiet, noop.NewMeterProvider())
	st.close()
	if !errors.Is(err, tenant.ErrPluginNotAllowed) {
		t.Errorf("a plugin not listed: %v", err)
	}
}

// bearerTransport adds an API key to every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcp --tenants serves each tenant the tools of its own plugins, behind its keys.
func TestTenantMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example's plugins")
	}
	data := t.TempDir()
	tenantsFile := filepath.Join(t.TempDir(), "tenants.yaml")
	src := "tenants:\n  - id: a\n    plugins: {offline: {}, calculator: {timeout: 5s}, clock: {timeout: 5s}, scratchpad: {state: write}, profile: {state: write}}\n" +
		"  - id: b\n    agents: [support]\n    plugins: {offline: {}}\n"
	if err := os.WriteFile(tenantsFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	defs, err := tenant.ReadFile(tenantsFile)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := tenant.OpenKeys(filepath.Join(data, "keys.json"), defs)
	if err != nil {
		t.Fatal(err)
	}
	keyA, _, _ := keys.Create("a")
	keyB, _, _ := keys.Create("b")
	narrowed, _, _ := keys.Create("a", "assistant")
	revoked, revokedKey, _ := keys.Create("a")

	h, closeAll, err := tenantMCP(t.Context(), exampleDeployment, tenantsFile, data, nil, slog.New(slog.DiscardHandler))
	defer closeAll()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for key, want := range map[string][]string{keyA: {"calculator_calc", "clock_now", "scratchpad_note", "scratchpad_notes"}, keyB: nil} {
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(),
			&mcpsdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerTransport{key}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := toolNames(t, cs)
		if !slices.Equal(names, want) {
			t.Errorf("%s's key lists %v, want %v", key[:14], names, want)
		}
		cs.Close()
	}
	status := func(key string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for key, want := range map[string]int{"": http.StatusUnauthorized, keyA + "x": http.StatusUnauthorized, narrowed: http.StatusForbidden} {
		if got := status(key); got != want {
			t.Errorf("key %q: %d, want %d", key, got, want)
		}
	}

	// The keys are serve's, in the data directory: a key serve revokes stops working
	// here, and one it makes starts, within tenant.KeysReloadInterval.
	if got := status(revoked); got == http.StatusUnauthorized {
		t.Fatalf("a key before its revocation: %d", got)
	}
	if err := keys.Revoke(revokedKey.ID); err != nil {
		t.Fatal(err)
	}
	made, _, _ := keys.Create("a")
	deadline := time.Now().Add(10 * tenant.KeysReloadInterval)
	for status(revoked) != http.StatusUnauthorized || status(made) == http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatalf("after %v, the revoked key answers %d and the new one %d", 10*tenant.KeysReloadInterval, status(revoked), status(made))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
