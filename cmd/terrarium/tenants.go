package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"go.opentelemetry.io/otel/metric"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/mcp"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
	"github.com/terrarium-ai/terrarium/store/pgstore"
	"github.com/terrarium-ai/terrarium/tenant"
)

// adminKeyEnv names the environment variable holding the admin API's key.
const adminKeyEnv = "TERRARIUM_ADMIN_KEY"

// servedTenants are the deployments of the tenants `serve -tenants` serves, over one
// plugin host and one Badger store.
type servedTenants struct {
	tenants []server.Tenant
	keys    *tenant.Keys
	admin   *tenant.AdminKey // nil without $TERRARIUM_ADMIN_KEY: no admin API
	root    *host.Host
	store   interface {
		store.Store
		Close() error
	}
}

// deployTenants builds one deployment per tenant of the tenants file, of the agent
// files it may use, each in a tenant view of one host (so modules are compiled once)
// with the tenant's secrets and ceilings, and its sessions in the one Badger store
// under namespaces of its own. What it returns is to be closed, error or not.
func deployTenants(ctx context.Context, files []*deploy.File, f serveFlags, log *slog.Logger, mp metric.MeterProvider) (*servedTenants, error) {
	st := &servedTenants{}
	// One puller, one cache: tenants pinning the same plugin share its module.
	puller, err := f.oci.puller(log, false)
	if err != nil {
		return st, err
	}
	defs, err := tenant.ReadFile(f.tenants)
	if err != nil {
		return st, err
	}
	if k := os.Getenv(adminKeyEnv); k != "" {
		if st.admin, err = tenant.NewAdminKey(k); err != nil {
			return st, fmt.Errorf("$%s: %w", adminKeyEnv, err)
		}
	} else {
		log.Warn("no admin API: set " + adminKeyEnv + " to make and revoke API keys")
	}
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		return st, err
	}
	if st.keys, err = tenant.OpenKeys(filepath.Join(f.data, "keys.json"), defs, tenant.WithKeysLogger(log)); err != nil {
		return st, err
	}
	if f.store != "" {
		st.store, err = pgstore.Open(ctx, f.store, pgstore.WithLogger(log.With("component", "store")))
	} else {
		st.store, err = badgerstore.Open(filepath.Join(f.data, "sessions"))
	}
	if err != nil {
		return st, fmt.Errorf("opening the snapshot store: %w", err)
	}
	hostLog := log.With("component", "host")
	if st.root, err = host.New(agent.NewRegistry(), host.WithLogger(hostLog)); err != nil {
		return st, err
	}
	for _, t := range defs {
		var mine []*deploy.File
		for _, file := range files {
			if t.MayUse(file.Name) {
				mine = append(mine, file)
			}
		}
		// A tenant's own signature policy (its paths relative to the tenants file), or
		// else the server's (its flags' paths relative to the working directory).
		policy, name, dir := t.Signatures, "tenant "+t.ID, filepath.Dir(f.tenants)
		if policy.IsZero() {
			policy, name, dir = f.oci.policy(), "terrarium serve", ""
		}
		verifier, err := policy.Verifier(name, dir)
		if err != nil {
			return st, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		limiter := tenant.NewLimiter(t)
		d, err := deploy.New(ctx, mine, deploy.WithStore(st.store), deploy.WithLogger(log), deploy.WithMeterProvider(mp),
			deploy.WithUsage(limiter.CountUsage), deploy.WithTrustedKeys(f.trusted...),
			deploy.WithPuller(puller), deploy.WithSignaturePolicy(verifier),
			deploy.WithTenant(st.root, t.ID, host.TenantConfig{Secrets: t.SecretValues(), Admit: t.Admission(), Gate: limiter}))
		if err != nil {
			return st, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		st.tenants = append(st.tenants, server.Tenant{ID: t.ID, Deployment: d, Limiter: limiter})
	}
	return st, nil
}

// close closes the tenants' deployments, the host, then the store.
func (st *servedTenants) close() error {
	ctx := context.Background()
	var errs []error
	for _, t := range st.tenants {
		errs = append(errs, t.Deployment.Close(ctx))
	}
	if st.root != nil {
		errs = append(errs, st.root.Close(ctx))
	}
	if st.store != nil {
		errs = append(errs, st.store.Close())
	}
	return errors.Join(errs...)
}

// tenantMCP returns the MCP endpoint of `mcp --tenants`: each request needs an API key
// (made by serve's admin API, kept in dataDir) not narrowed to agents, and reaches the
// tools of its tenant's plugins only, loaded as deployTenants loads them (the agent
// files of dir it may use, in a tenant view of one host, within its ceilings). What it
// returns is to be closed, error or not.
func tenantMCP(ctx context.Context, dir, tenantsFile, dataDir string, patterns []string, log *slog.Logger) (http.Handler, func(), error) {
	var closers []func()
	closeAll := func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	files, err := deploy.ReadDir(dir)
	if err != nil {
		return nil, closeAll, err
	}
	defs, err := tenant.ReadFile(tenantsFile)
	if err != nil {
		return nil, closeAll, err
	}
	keys, err := tenant.OpenKeys(filepath.Join(dataDir, "keys.json"), defs, tenant.WithKeysLogger(log))
	if err != nil {
		return nil, closeAll, err
	}
	root, err := host.New(agent.NewRegistry(), host.WithLogger(log))
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, func() { root.Close(context.Background()) })
	byTenant := map[string]http.Handler{}
	for _, t := range defs {
		var mine []*deploy.File
		for _, f := range files {
			if t.MayUse(f.Name) {
				mine = append(mine, f)
			}
		}
		// Only the plugins' tools are served, so the agents' sessions are never used.
		d, err := deploy.New(ctx, mine, deploy.WithStore(store.NewMemory()), deploy.WithLogger(log),
			deploy.WithTenant(root, t.ID, host.TenantConfig{Secrets: t.SecretValues(), Admit: t.Admission(), Gate: tenant.NewLimiter(t)}))
		if err != nil {
			return nil, closeAll, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		closers = append(closers, func() { d.Close(context.Background()) })
		tools, err := mcp.SelectTools(deploymentTools(d), patterns...)
		if err != nil {
			return nil, closeAll, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		srv, err := mcp.NewServer(tools, mcp.WithLogger(log.With("tenant", t.ID)))
		if err != nil {
			return nil, closeAll, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		byTenant[t.ID] = srv.Handler(nil)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := keys.AuthenticateRequest(r)
		if err != nil {
			log.Warn("MCP request refused: no valid API key", "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="terrarium"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if len(key.Agents) > 0 {
			log.Warn("MCP request refused: the key is narrowed to agents", "tenant", key.Tenant, "key", key.ID)
			http.Error(w, "MCP serves plugins' tools: use a key not narrowed to agents", http.StatusForbidden)
			return
		}
		byTenant[key.Tenant].ServeHTTP(w, r)
	}), closeAll, nil
}
