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
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// KeysReloadInterval is how long, at most, a change of the keys file takes to reach
// the processes sharing it: every surface of `terrarium serve` and `terrarium mcp`
// given one data directory checks the file at most this often as keys are presented,
// so that a key revoked by one fails in all, and a key made by one works in all.
const KeysReloadInterval = time.Second

// Keys are the API keys of a deployment's tenants, kept in a file (when given a path)
// so that they outlive the process. The file is their one source of truth: processes
// sharing it see each other's changes within KeysReloadInterval, and change it in turn
// under a lock. It is safe for concurrent use.
type Keys struct {
	path    string
	tenants map[string]bool
	log     *slog.Logger
	every   time.Duration // KeysReloadInterval; tests shorten it
	checked atomic.Int64  // when the file was last looked at, in Unix nanoseconds

	mu   sync.RWMutex
	byID map[string]*Key
	file fs.FileInfo // the file as last read; nil when there was none
}

// KeysOption configures OpenKeys.
type KeysOption interface{ applyKeys(*Keys) }

type keysOption func(*Keys)

func (f keysOption) applyKeys(k *Keys) { f(k) }

// WithKeysLogger sets where a keys file that cannot be read is reported (default
// slog.Default()).
func WithKeysLogger(l *slog.Logger) KeysOption { return keysOption(func(k *Keys) { k.log = l }) }

// OpenKeys returns the keys kept in the file at path (none if it does not exist yet),
// for the tenants named; "" keeps keys in memory only. A kept key of a tenant no
// longer defined stays in the file, and authenticates no one.
func OpenKeys(path string, tenants []*Tenant, opts ...KeysOption) (*Keys, error) {
	k := &Keys{path: path, tenants: map[string]bool{}, byID: map[string]*Key{}, log: slog.Default(), every: KeysReloadInterval}
	for _, o := range opts {
		o.applyKeys(k)
	}
	for _, t := range tenants {
		k.tenants[t.ID] = true
	}
	if path == "" {
		return k, nil
	}
	if err := k.load(); err != nil {
		return nil, err
	}
	k.checked.Store(time.Now().UnixNano())
	return k, nil
}

// load reads the keys file, replacing the keys known; the caller holds k.mu or is
// OpenKeys. A file that does not exist holds no key.
func (k *Keys) load() error {
	f, err := os.Open(k.path)
	if errors.Is(err, fs.ErrNotExist) {
		k.byID, k.file = map[string]*Key{}, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("tenant: reading the keys: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("tenant: reading the keys: %w", err)
	}
	var keys []*Key
	if err := json.NewDecoder(f).Decode(&keys); err != nil {
		return fmt.Errorf("tenant: reading the keys in %s: %w", k.path, err)
	}
	byID := make(map[string]*Key, len(keys))
	for _, key := range keys {
		if key == nil {
			return fmt.Errorf("tenant: reading the keys in %s: a key is null", k.path)
		}
		byID[key.ID] = key
	}
	k.byID, k.file = byID, info
	return nil
}

// refresh reads the keys file again if it changed since it was read, at most once per
// k.every. A file that cannot be read (an operator's broken edit) leaves no key
// working until it can be: a revocation never fails open.
func (k *Keys) refresh() {
	if k.path == "" {
		return
	}
	now := time.Now().UnixNano()
	last := k.checked.Load()
	if now-last < int64(k.every) || !k.checked.CompareAndSwap(last, now) {
		return
	}
	info, err := os.Stat(k.path)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil && k.file != nil && os.SameFile(info, k.file) && info.ModTime().Equal(k.file.ModTime()) && info.Size() == k.file.Size() {
		return
	}
	if errors.Is(err, fs.ErrNotExist) && k.file == nil {
		return
	}
	if err := k.load(); err != nil {
		k.byID, k.file = map[string]*Key{}, nil
		k.log.Error("no API key is accepted until the keys file can be read", "error", err)
	}
}

// change applies a change to the keys, as the file holds them now, and saves them:
// under the file's lock, so that processes sharing it never undo each other's changes
// (a key one revoked, revived by another's save).
func (k *Keys) change(apply func() (undo func(), err error)) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.path != "" {
		unlock, err := lockFile(k.path + ".lock")
		if err != nil {
			return fmt.Errorf("tenant: locking the keys: %w", err)
		}
		defer unlock()
		if err := k.load(); err != nil {
			return err
		}
	}
	undo, err := apply()
	if err != nil {
		return err
	}
	if err := k.save(); err != nil {
		undo()
		return err
	}
	return nil
}

// Create makes a key for the tenant, narrowed to agents when any are given, and
// returns it: the only time the key is seen, since only its hash is kept.
func (k *Keys) Create(tenant string, agents ...string) (string, *Key, error) {
	if !k.tenants[tenant] {
		return "", nil, fmt.Errorf("tenant: %w: %q", ErrUnknownTenant, tenant)
	}
	var secret string
	var key *Key
	err := k.change(func() (func(), error) {
		id := rand.Text()[:10]
		for k.byID[id] != nil {
			id = rand.Text()[:10]
		}
		secret = keyPrefix + id + "_" + rand.Text() // rand.Text: 128 bits, base32
		key = &Key{ID: id, Tenant: tenant, Agents: slices.Clone(agents), Created: time.Now().UTC(), Hash: hashKey(secret)}
		k.byID[id] = key
		return func() { delete(k.byID, id) }, nil
	})
	if err != nil {
		return "", nil, err
	}
	return secret, key, nil
}

// Revoke revokes the key with this ID: from now on it authenticates no one, in this
// process at once, in others sharing the keys file within KeysReloadInterval.
func (k *Keys) Revoke(id string) error {
	return k.change(func() (func(), error) {
		key, ok := k.byID[id]
		if !ok {
			return nil, fmt.Errorf("tenant: %w: %q", ErrKeyNotFound, id)
		}
		if key.Revoked != nil {
			return func() {}, nil
		}
		now := time.Now().UTC()
		key.Revoked = &now
		return func() { key.Revoked = nil }, nil
	})
}

// List returns copies of the tenant's keys (all tenants' for ""), oldest first.
func (k *Keys) List(tenant string) []Key {
	k.refresh()
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
	k.refresh()
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
	// What this process wrote, it knows: no need to read it again.
	if info, err := os.Stat(k.path); err == nil {
		k.file = info
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
