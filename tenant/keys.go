package tenant

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// keyPrefix starts every API key, so that a leaked one is recognised (by secret
// scanners too) for what it is.
const keyPrefix = "trm_"

// Key is what is kept of an API key: never the key itself, only its hash.
type Key struct {
	// ID names the key in lists and revocations; it is the key's public part.
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	// Agents narrows the key to these agents of its tenant; empty is every agent the
	// tenant may use.
	Agents  []string   `json:"agents,omitempty"`
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
	// Hash is the hex SHA-256 of the whole key.
	Hash string `json:"hash"`
}

// MayUse reports whether the key may reach the agent named (its tenant's own rules
// aside).
func (k *Key) MayUse(agent string) bool {
	return len(k.Agents) == 0 || slices.Contains(k.Agents, agent)
}

// Errors callers branch on.
var (
	// ErrUnauthenticated is the error of a key that is malformed, unknown, wrong or
	// revoked: which of them is not said, to the caller.
	ErrUnauthenticated = errors.New("invalid API key")
	// ErrUnknownTenant is the error of making a key for a tenant there is not.
	ErrUnknownTenant = errors.New("unknown tenant")
	// ErrKeyNotFound is the error of revoking a key there is not.
	ErrKeyNotFound = errors.New("no such key")
)

// Keys are the API keys of a deployment's tenants, kept in a file (when given a path)
// so that they outlive the process. It is safe for concurrent use.
type Keys struct {
	path    string
	tenants map[string]bool

	mu   sync.RWMutex
	byID map[string]*Key
}

// OpenKeys returns the keys kept in the file at path (none if it does not exist yet),
// for the tenants named; "" keeps keys in memory only. A kept key of a tenant no
// longer defined stays in the file, and authenticates no one.
func OpenKeys(path string, tenants []*Tenant) (*Keys, error) {
	k := &Keys{path: path, tenants: map[string]bool{}, byID: map[string]*Key{}}
	for _, t := range tenants {
		k.tenants[t.ID] = true
	}
	if path == "" {
		return k, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return k, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tenant: reading the keys: %w", err)
	}
	var keys []*Key
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("tenant: reading the keys in %s: %w", path, err)
	}
	for _, key := range keys {
		k.byID[key.ID] = key
	}
	return k, nil
}

// Create makes a key for the tenant, narrowed to agents when any are given, and
// returns it: the only time the key is seen, since only its hash is kept.
func (k *Keys) Create(tenant string, agents ...string) (string, *Key, error) {
	if !k.tenants[tenant] {
		return "", nil, fmt.Errorf("tenant: %w: %q", ErrUnknownTenant, tenant)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	id := rand.Text()[:10]
	for k.byID[id] != nil {
		id = rand.Text()[:10]
	}
	secret := keyPrefix + id + "_" + rand.Text() // rand.Text: 128 bits, base32
	key := &Key{ID: id, Tenant: tenant, Agents: slices.Clone(agents), Created: time.Now().UTC(), Hash: hashKey(secret)}
	k.byID[id] = key
	if err := k.save(); err != nil {
		delete(k.byID, id)
		return "", nil, err
	}
	return secret, key, nil
}

// Revoke revokes the key with this ID: from now on it authenticates no one.
func (k *Keys) Revoke(id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.byID[id]
	if !ok {
		return fmt.Errorf("tenant: %w: %q", ErrKeyNotFound, id)
	}
	if key.Revoked != nil {
		return nil
	}
	now := time.Now().UTC()
	key.Revoked = &now
	if err := k.save(); err != nil {
		key.Revoked = nil
		return err
	}
	return nil
}

// List returns copies of the tenant's keys (all tenants' for ""), oldest first.
func (k *Keys) List(tenant string) []Key {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []Key
	for _, key := range k.byID {
		if tenant == "" || key.Tenant == tenant {
			out = append(out, *key)
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return a.Created.Compare(b.Created) })
	return out
}

// Authenticate returns the key a caller presented, or ErrUnauthenticated. The key is
// found by its ID and its hash compared in constant time, so how long the check takes
// says nothing of how much of a guess was right.
func (k *Keys) Authenticate(secret string) (Key, error) {
	rest, ok := strings.CutPrefix(secret, keyPrefix)
	id, _, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 {
		return Key{}, ErrUnauthenticated
	}
	k.mu.RLock()
	key, found := k.byID[id]
	var copied Key
	if found {
		copied = *key
	}
	k.mu.RUnlock()
	if !found || subtle.ConstantTimeCompare([]byte(hashKey(secret)), []byte(copied.Hash)) != 1 ||
		copied.Revoked != nil || !k.tenants[copied.Tenant] {
		return Key{}, ErrUnauthenticated
	}
	return copied, nil
}

// AuthenticateRequest authenticates the key in a request's "Authorization: Bearer"
// header.
func (k *Keys) AuthenticateRequest(r *http.Request) (Key, error) {
	return k.Authenticate(Bearer(r))
}

// Bearer returns the token in a request's "Authorization: Bearer" header, or "".
func Bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

func hashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// save writes the keys to the file, whole, replacing it at once so that a crash
// leaves the old file or the new one; the caller holds k.mu.
func (k *Keys) save() error {
	if k.path == "" {
		return nil
	}
	keys := make([]*Key, 0, len(k.byID))
	for _, key := range k.byID {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b *Key) int { return strings.Compare(a.ID, b.ID) })
	data, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(k.path), ".keys-*")
	if err != nil {
		return fmt.Errorf("tenant: saving the keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("tenant: saving the keys: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("tenant: saving the keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("tenant: saving the keys: %w", err)
	}
	if err := os.Rename(tmp.Name(), k.path); err != nil {
		return fmt.Errorf("tenant: saving the keys: %w", err)
	}
	return nil
}

// AdminKey checks the operator's key, which the admin API needs.
type AdminKey struct{ hash [sha256.Size]byte }

// NewAdminKey returns the check of key; it must be at least 32 characters.
func NewAdminKey(key string) (*AdminKey, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("tenant: the admin key has %d characters: want at least 32 (try: openssl rand -hex 32)", len(key))
	}
	return &AdminKey{hash: sha256.Sum256([]byte(key))}, nil
}

// Check reports whether key is the admin key, in constant time (on hashes, so that
// even the key's length does not show).
func (a *AdminKey) Check(key string) bool {
	sum := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare(sum[:], a.hash[:]) == 1
}
