package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
