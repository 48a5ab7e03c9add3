package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"go.opentelemetry.io/otel/metric"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
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
	store   *badgerstore.Store
}

// deployTenants builds one deployment per tenant of the tenants file, of the agent
// files it may use, each in a tenant view of one host (so modules are compiled once)
// with the tenant's secrets and ceilings, and its sessions in the one Badger store
// under namespaces of its own. What it returns is to be closed, error or not.
func deployTenants(ctx context.Context, files []*deploy.File, f serveFlags, log *slog.Logger, mp metric.MeterProvider) (*servedTenants, error) {
	st := &servedTenants{}
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
	if st.keys, err = tenant.OpenKeys(filepath.Join(f.data, "keys.json"), defs); err != nil {
		return st, err
	}
	if st.store, err = badgerstore.Open(filepath.Join(f.data, "sessions")); err != nil {
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
		d, err := deploy.New(ctx, mine, deploy.WithStore(st.store), deploy.WithLogger(log), deploy.WithMeterProvider(mp),
			deploy.WithTenant(st.root, t.ID, host.TenantConfig{Secrets: t.SecretValues(), Admit: t.Admission()}))
		if err != nil {
			return st, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		st.tenants = append(st.tenants, server.Tenant{ID: t.ID, Deployment: d, Limiter: tenant.NewLimiter(t)})
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
