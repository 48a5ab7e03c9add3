package tenant

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// openShared opens the keys file at path as another process would, checking it for
// changes at every key presented.
func openShared(t *testing.T, path string, tenants []*Tenant) *Keys {
	t.Helper()
	k, err := OpenKeys(path, tenants)
	if err != nil {
		t.Fatal(err)
	}
	k.every = 0
	return k
}

// Processes sharing a keys file see each other's keys: one made by one authenticates
// in the other, one revoked by one fails in the other, and one process's change never
// undoes another's, however stale its own view of the file.
func TestKeysAreSharedThroughTheirFile(t *testing.T) {
	tenants := []*Tenant{{ID: "a"}}
	path := filepath.Join(t.TempDir(), "keys.json")
	serve, mcp, stale := openShared(t, path, tenants), openShared(t, path, tenants), openShared(t, path, tenants)
	stale.every = 1 << 62 // it looks at the file no more

	secret, key, err := serve.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mcp.Authenticate(secret); err != nil {
		t.Errorf("a key made by another process: %v", err)
	}
	if err := serve.Revoke(key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := mcp.Authenticate(secret); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a key revoked by another process: %v", err)
	}

	// A process that has not looked at the file since the key was made and revoked
	// makes a key: the revocation stands.
	if _, _, err := stale.Create("a"); err != nil {
		t.Fatal(err)
	}
	fresh := openShared(t, path, tenants)
	if _, err := fresh.Authenticate(secret); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a revoked key after a stale process saved the keys: %v", err)
	}
	if n := len(fresh.List("a")); n != 2 {
		t.Errorf("%d keys kept, want 2", n)
	}
}

// Keys made at once by two processes sharing the file are all kept.
func TestKeysMadeAtOnceAreAllKept(t *testing.T) {
	tenants := []*Tenant{{ID: "a"}}
	path := filepath.Join(t.TempDir(), "keys.json")
	procs := []*Keys{openShared(t, path, tenants), openShared(t, path, tenants)}
	var wg sync.WaitGroup
	secrets := make(chan string, 20)
	for i := range 20 {
		wg.Go(func() {
			s, _, err := procs[i%2].Create("a")
			if err != nil {
				t.Error(err)
			}
			secrets <- s
		})
	}
	wg.Wait()
	close(secrets)
	check := openShared(t, path, tenants)
	for s := range secrets {
		if _, err := check.Authenticate(s); err != nil {
			t.Errorf("a key made at once with others was lost: %v", err)
		}
	}
}

// A keys file that cannot be read accepts no key until it can be read again: a
// revocation written by hand, badly, does not leave the key working.
func TestKeysFileThatCannotBeReadAcceptsNoKey(t *testing.T) {
	tenants := []*Tenant{{ID: "a"}}
	path := filepath.Join(t.TempDir(), "keys.json")
	k := openShared(t, path, tenants)
	secret, _, err := k.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`[{"id": `), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Authenticate(secret); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a key, the file broken: %v", err)
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Authenticate(secret); err != nil {
		t.Errorf("a key, the file mended: %v", err)
	}
}
