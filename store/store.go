// Package store persists snapshots as opaque records and content-addressed blobs. It
// knows nothing about agents: package agent decides what a record and a blob hold (see
// docs/architecture.md, "Snapshots").
//
// Every key lives under a namespace, and namespaces never see each other's data: an
// operator serving several tenants gives each its own namespace.
//
// Implementations: NewMemory (this package), the Badger store in store/badgerstore (the
// embedded on-disk default) and the PostgreSQL store in store/pgstore (for hosts that
// share sessions). Every implementation passes the conformance suite in store/storetest.
package store

import (
	"context"
	"errors"
	"fmt"
)

// Store keeps records and blobs. Implementations are safe for concurrent use.
type Store interface {
	// Commit writes blobs and one record atomically: afterwards either all of them are
	// stored or none is. Once Commit returns nil the write is durable (for stores that
	// persist at all): it survives the process being killed. Commit keeps no reference
	// to rec.Data or the blobs' Data: the caller may reuse them once it returns
	// (storetest checks it). Blobs whose key is already stored are not written again. Committing a record whose ID is already stored in
	// the namespace changes nothing and returns nil, since IDs are content addresses.
	//
	// A record continues the line of its Parent unless it is a Branch: each record can
	// be continued once. Committing a second non-branch record with the same Session
	// and Parent fails with a *ConflictError (wrapping ErrConflict) and writes nothing,
	// so two writers that both extended one state never silently fork the session.
	// A session's first record (empty Parent) follows the same rule. The committed
	// record becomes the session's head.
	Commit(ctx context.Context, ns string, rec Record, blobs []Blob) error

	// Record returns the record with the given ID, or an error wrapping ErrNotFound.
	Record(ctx context.Context, ns, id string) (Record, error)

	// Records returns a session's records ordered by Turn, records of equal Turn (the
	// branches of a session resumed twice from one snapshot) in commit order. A session
	// with no records yields an empty slice and no error.
	Records(ctx context.Context, ns, session string) ([]Record, error)

	// Head returns the session's head, its most recently committed record, or an error
	// wrapping ErrNotFound.
	Head(ctx context.Context, ns, session string) (Record, error)

	// Settle records the outcome of a committed record: what became of it after its
	// commit, which its ID (a content address of its data) cannot cover. A snapshot
	// whose turn goes on in the background is committed pending and settled when the
	// turn ends. The outcome and its blobs are written atomically and durably. A record
	// is settled once: settling it again with other data fails with an error wrapping
	// ErrConflict and writes nothing; with the same data it changes nothing and returns
	// nil, so retrying a settle whose first attempt's fate is unknown is safe. An
	// unknown record is an error wrapping ErrNotFound; an empty outcome is ErrInvalid.
	// Settling leaves the session's head and line as they were. Like Commit, Settle keeps
	// no reference to the bytes it is given.
	Settle(ctx context.Context, ns, id string, outcome []byte, blobs []Blob) error

	// Blob returns the blob stored under key, or an error wrapping ErrNotFound.
	Blob(ctx context.Context, ns, key string) ([]byte, error)

	// Stats reports what a namespace holds.
	Stats(ctx context.Context, ns string) (Stats, error)

	// Close releases the store's resources. Other methods fail after Close.
	Close() error
}

// SessionLister is a Store that can list the sessions of a namespace: what a server
// shows as its sessions. The memory, Badger and PostgreSQL stores implement it.
type SessionLister interface {
	// Sessions returns the IDs of the sessions with at least one record in the
	// namespace, sorted.
	Sessions(ctx context.Context, ns string) ([]string, error)
}

// PrefixFinder is a Store that can find records by the beginning of their ID: what
// lets a person give a snapshot by the first digits of its ID. The memory, Badger and
// PostgreSQL stores implement it.
type PrefixFinder interface {
	// RecordIDs returns the IDs of the namespace's records that begin with prefix,
	// sorted byte by byte, at most limit of them (a caller asking whether a prefix is
	// unique asks for two). None is an empty slice and no error. An empty namespace or
	// prefix, or a limit below 1, is ErrInvalid.
	RecordIDs(ctx context.Context, ns, prefix string, limit int) ([]string, error)
}

// CheckPrefixQuery validates the arguments of PrefixFinder.RecordIDs. Implementations
// call it first so that every store rejects the same input with the same error.
func CheckPrefixQuery(ns, prefix string, limit int) error {
	if err := CheckNamed("namespace", ns, "record ID prefix", prefix); err != nil {
		return err
	}
	if limit < 1 {
		return fmt.Errorf("%w: limit %d: want 1 or more", ErrInvalid, limit)
	}
	return nil
}

// Pinger is a Store kept by a service that can be down while the process runs (the
// PostgreSQL store): what a readiness probe checks.
type Pinger interface {
	// Ping checks, once and without retrying, that the store can serve calls. Its
	// errors wrap ErrUnavailable, or ErrClosed.
	Ping(ctx context.Context) error
}

// Record is one entry of a session's history: a snapshot record, to package agent.
type Record struct {
	// ID identifies the record within its namespace; agent uses a content address.
	ID string
	// Session is the session the record belongs to.
	Session string
	// Parent is the record this one continues, empty for a session's first.
	Parent string
	// Branch says the record starts a new line from Parent, which another record may
	// already continue, rather than continuing Parent's line (see Store.Commit).
	Branch bool
	// Turn orders the records of a session.
	Turn int
	// Data is the record itself, opaque to the store.
	Data []byte
	// Outcome is what Settle recorded for the record, opaque to the store: nil until
	// the record is settled. Commit ignores it.
	Outcome []byte
}

// Blob is a piece of content stored under its content address.
type Blob struct {
	// Key is the blob's content address, computed by the caller (agent uses the hex
	// SHA-256 of Data). The store does not check it; readers verify what they read.
	Key  string
	Data []byte
}

// Stats counts what a namespace holds.
type Stats struct {
	Records int
	Blobs   int
	// Bytes is the total size of keys and values as the store accounts for them:
	// record and blob data plus the keys and indexes the store writes for them.
	Bytes int64
}

var (
	// ErrNotFound: nothing is stored under the key.
	ErrNotFound = errors.New("store: not found")
	// ErrInvalid: an argument is malformed (an empty namespace, record ID or key).
	ErrInvalid = errors.New("store: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrConflict: another commit already continued the same parent (see Store.Commit).
	// The error is a *ConflictError.
	ErrConflict = errors.New("store: conflict")
	// ErrCorrupt: what the store holds is damaged (a file failed its checksum, a value
	// does not decode, an index names a missing record), so it cannot return what was
	// committed. Never reported as ErrNotFound: damage is not absence.
	ErrCorrupt = errors.New("store: corrupt")
	// ErrUnavailable: the store's database could not be reached, or kept failing in ways
	// that pass (a broken connection, a server restarting), for as long as the store
	// retries. The call may succeed later; a commit that failed so may or may not have
	// landed, and committing the same record again is safe (see Store.Commit).
	ErrUnavailable = errors.New("store: database unavailable")
)

// ConflictError is the error of a commit whose parent another commit already continued.
// A client reloads the session's head and retries from there, or commits a branch.
type ConflictError struct {
	Session string
	// Parent is the record both commits continued ("" for a session's start).
	Parent string
	// Continued is the record that continued Parent first.
	Continued string
	// Head is the session's head when the commit was refused.
	Head string
}

// Error implements error.
func (e *ConflictError) Error() string {
	parent := "the start of the session"
	if e.Parent != "" {
		parent = "record " + e.Parent
	}
	return fmt.Sprintf("store: conflict: session %s: %s was already continued by %s; the session's head is now %s", e.Session, parent, e.Continued, e.Head)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// MaxNameLen bounds namespaces, sessions, record IDs and blob keys, which stores use
// inside their own keys.
const MaxNameLen = 1024

// CheckNames validates the names of a call: each must be non-empty and at most
// MaxNameLen bytes. Implementations call it first so that every store rejects the same
// input with the same error.
func CheckNames(names ...string) error {
	for _, n := range names {
		if n == "" {
			return fmt.Errorf("%w: empty name", ErrInvalid)
		}
		if len(n) > MaxNameLen {
			return fmt.Errorf("%w: name of %d bytes (limit %d)", ErrInvalid, len(n), MaxNameLen)
		}
	}
	return nil
}
