package tenant_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/tenant"
)

const tenantsFile = `
tenants:
  - id: acme
    name: Acme
    agents: [support]
    plugins:
      echo: {state: read, http: [api.openai.com], secrets: [OPENAI_API_KEY], timeout: 30s}
    secrets:
      OPENAI_API_KEY: {env: ACME_OPENAI_KEY}
      PLAIN: {value: p}
    quotas: {concurrentTurns: 2, turnsPerMinute: 60, pluginMemoryPages: 512}
  - id: globex
`

func TestParse(t *testing.T) {
	ts, err := tenant.Parse([]byte(tenantsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].ID != "acme" || ts[0].Plugins["echo"].State != plugin.StateRead ||
		ts[0].Plugins["echo"].Timeout.Seconds() != 30 || ts[0].Quotas.ConcurrentTurns != 2 {
		t.Fatalf("parsed %+v", ts[0])
	}
	if !ts[0].MayUse("support") || ts[0].MayUse("other") || !ts[1].MayUse("other") {
		t.Error("MayUse disagrees with agents")
	}
	t.Setenv("ACME_OPENAI_KEY", "sk-acme")
	if got := ts[0].SecretValues(); got["OPENAI_API_KEY"] != "sk-acme" || got["PLAIN"] != "p" {
		t.Errorf("secret values %v", got)
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	for name, src := range map[string]string{
		"unknown key":       "tenants: [{id: a, quota: {}}]",
		"duplicate":         "tenants: [{id: a}, {id: a}]",
		"bad id":            "tenants: [{id: '../a'}]",
		"no id":             "tenants: [{name: A}]",
		"negative quota":    "tenants: [{id: a, quotas: {concurrentTurns: -1}}]",
		"negative tokens":   "tenants: [{id: a, quotas: {modelTokensPerDay: -1}}]",
		"negative bytes":    "tenants: [{id: a, quotas: {storedBytes: -1}}]",
		"negative queue":    "tenants: [{id: a, quotas: {concurrentTurns: 1, queuedTurns: -1}}]",
		"queue, no bound":   "tenants: [{id: a, quotas: {queuedTurns: 2}}]",
		"negative wait":     "tenants: [{id: a, quotas: {concurrentTurns: 1, turnQueueTimeout: -1s}}]",
		"secret both ways":  "tenants: [{id: a, secrets: {K: {value: v, env: E}}}]",
		"secret neither":    "tenants: [{id: a, secrets: {K: {}}}]",
		"not yaml":          "tenants: [",
		"unknown grant key": "tenants: [{id: a, plugins: {p: {states: read}}}]",
		"identity, no root": "tenants: [{id: a, signatures: {identities: [{subject: a@example.com, issuer: 'https://issuer'}]}}]",
		"signatures typo":   "tenants: [{id: a, signatures: {key: [cosign.pub]}}]",
		"root, no identity": "tenants: [{id: a, signatures: {trustedRoot: root.json}}]",
	} {
		if _, err := tenant.Parse([]byte(src)); !errors.Is(err, tenant.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// An environment variable that is not set is a missing secret: the plugin is then
// not granted it, rather than granted an empty key.
func TestSecretValuesSkipUnsetVariables(t *testing.T) {
	ts, err := tenant.Parse([]byte(tenantsFile))
	if err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("ACME_OPENAI_KEY")
	if v, ok := ts[0].SecretValues()["OPENAI_API_KEY"]; ok {
		t.Errorf("an unset variable gave the secret %q", v)
	}
}

func TestAdmission(t *testing.T) {
	ts, err := tenant.Parse([]byte(tenantsFile))
	if err != nil {
		t.Fatal(err)
	}
	admit := ts[0].Admission()
	m := host.Manifest{State: plugin.StateRead, MemoryPages: 128, MaxInstances: 2}
	if err := admit("echo", m); err != nil {
		t.Fatal(err)
	}
	if err := admit("shell", m); !errors.Is(err, tenant.ErrPluginNotAllowed) {
		t.Errorf("a plugin not listed: %v", err)
	}
	write := m
	write.State = plugin.StateWrite
	if err := admit("echo", write); !errors.Is(err, host.ErrBeyondCeiling) {
		t.Errorf("beyond the ceiling: %v", err)
	}
	// 256 of 512 pages are taken; another 512 do not fit.
	big := m
	big.MemoryPages, big.MaxInstances = 256, 2
	if err := admit("echo", big); !errors.Is(err, tenant.ErrOverQuota) || !strings.Contains(err.Error(), "pages") {
		t.Errorf("over the memory quota: %v", err)
	}
	if err := admit("echo", m); err != nil {
		t.Errorf("within the rest of the quota: %v", err)
	}
}

func TestKeys(t *testing.T) {
	ts, err := tenant.Parse([]byte(tenantsFile))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	keys, err := tenant.OpenKeys(path, ts)
	if err != nil {
		t.Fatal(err)
	}
	secret, key, err := keys.Create("acme", "support")
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := keys.Create("globex")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Create("initech"); !errors.Is(err, tenant.ErrUnknownTenant) {
		t.Errorf("a key of an unknown tenant: %v", err)
	}
	got, err := keys.Authenticate(secret)
	if err != nil || got.Tenant != "acme" || got.ID != key.ID || !got.MayUse("support") || got.MayUse("other") {
		t.Fatalf("authenticated %+v, %v", got, err)
	}
	if got, err := keys.Authenticate(other); err != nil || got.Tenant != "globex" {
		t.Errorf("globex's key: %+v, %v", got, err)
	}
	// Guesses: the right ID with another secret, a key cut short, garbage.
	last := "A"
	if strings.HasSuffix(secret, last) {
		last = "B"
	}
	forged := secret[:len(secret)-1] + last
	for _, guess := range []string{forged, secret[:len(secret)-4], "", "trm_", "trm__", key.ID, key.Hash} {
		if _, err := keys.Authenticate(guess); !errors.Is(err, tenant.ErrUnauthenticated) {
			t.Errorf("%q authenticated: %v", guess, err)
		}
	}

	// Only hashes are kept; the file, reopened, still knows the key.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) || strings.Contains(string(data), other) {
		t.Fatal("the keys file holds a key")
	}
	reopened, err := tenant.OpenKeys(path, ts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reopened.Authenticate(secret); err != nil {
		t.Errorf("after reopening: %v", err)
	}

	// A revoked key fails at once, and after reopening.
	if err := keys.Revoke(key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(secret); !errors.Is(err, tenant.ErrUnauthenticated) {
		t.Errorf("a revoked key: %v", err)
	}
	if reopened, err = tenant.OpenKeys(path, ts); err != nil {
		t.Fatal(err)
	}
	if _, err := reopened.Authenticate(secret); !errors.Is(err, tenant.ErrUnauthenticated) {
		t.Errorf("a revoked key, reopened: %v", err)
	}
	if err := keys.Revoke("nope"); !errors.Is(err, tenant.ErrKeyNotFound) {
		t.Errorf("revoking an unknown key: %v", err)
	}
	if l := keys.List("acme"); len(l) != 1 || l[0].Revoked == nil {
		t.Errorf("acme's keys: %+v", l)
	}

	// A tenant taken out of the tenants file has no working keys left.
	withoutGlobex, err := tenant.OpenKeys(path, ts[:1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withoutGlobex.Authenticate(other); !errors.Is(err, tenant.ErrUnauthenticated) {
		t.Errorf("the key of a removed tenant: %v", err)
	}
}

func TestAdminKey(t *testing.T) {
	if _, err := tenant.NewAdminKey("short"); err == nil {
		t.Error("a short admin key was accepted")
	}
	const k = "0123456789abcdef0123456789abcdef"
	a, err := tenant.NewAdminKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Check(k) || a.Check(k+"x") || a.Check(k[:31]) || a.Check("") {
		t.Error("the admin key check is wrong")
	}
}
