package session

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/terrarium-ai/terrarium/store"
)

// MinSnapshotIDPrefix is the fewest hex digits that name a snapshot by the beginning
// of its ID: enough that a person's prefix rarely matches two snapshots by chance
// (one in 4 billion per pair), few enough to type.
const MinSnapshotIDPrefix = 8

// snapshotIDLen is the length of a snapshot's ID: the hex SHA-256 of its record.
const snapshotIDLen = 64

// ErrSnapshotAmbiguous: a snapshot ID prefix begins the IDs of more than one snapshot.
// More digits tell them apart.
var ErrSnapshotAmbiguous = errors.New("ambiguous snapshot ID prefix")

// SnapshotResolver is a SnapshotStore that finds snapshots by the beginning of their
// ID, which is what a person types. The stores of NewSnapshotStore are, on a
// store.Store that is a store.PrefixFinder (the memory, Badger and PostgreSQL stores).
type SnapshotResolver interface {
	// ResolveSnapshotID returns the whole ID of the snapshot that id names: id itself
	// when it is a whole ID (found or not), else the one snapshot whose ID begins with
	// id, given by at least MinSnapshotIDPrefix hex digits (either case), among the
	// session's snapshots when sessionID is not "", else among all the store's. No
	// match, or an id that is neither, is an error wrapping ErrSnapshotNotFound; more
	// than one match, ErrSnapshotAmbiguous; an id or sessionID longer than
	// store.MaxNameLen, store.ErrInvalid.
	ResolveSnapshotID(ctx context.Context, sessionID, id string) (string, error)
}

var _ SnapshotResolver = (*snapshotStore[any])(nil)

// ResolveSnapshotID implements SnapshotResolver.
func (s *snapshotStore[State]) ResolveSnapshotID(ctx context.Context, sessionID, id string) (string, error) {
	for _, name := range []string{id, sessionID} {
		if len(name) > store.MaxNameLen {
			// Too long to be anything a store keeps: invalid, as the stores say.
			return "", fmt.Errorf("session: finding snapshot: %w", store.CheckNames(name))
		}
	}
	prefix := strings.ToLower(id)
	if !isHex(prefix) || len(prefix) < MinSnapshotIDPrefix || len(prefix) > snapshotIDLen {
		return "", fmt.Errorf("session: %w: %q: give a snapshot's ID, or at least its first %d hex digits", ErrSnapshotNotFound, id, MinSnapshotIDPrefix)
	}
	if len(prefix) == snapshotIDLen {
		return prefix, nil
	}
	var matches []string
	where := ""
	if sessionID != "" {
		where = " in session " + sessionID
		recs, err := s.st.Records(ctx, s.ns, sessionID)
		if err != nil {
			return "", fmt.Errorf("session: finding snapshot %s%s: %w", id, where, damaged(err))
		}
		for _, rec := range recs {
			if strings.HasPrefix(rec.ID, prefix) {
				matches = append(matches, rec.ID)
			}
		}
	} else {
		f, ok := s.st.(store.PrefixFinder)
		if !ok {
			return "", fmt.Errorf("session: %w: %s: the store (%T) finds snapshots by their whole ID only", ErrSnapshotNotFound, id, s.st)
		}
		var err error
		if matches, err = f.RecordIDs(ctx, s.ns, prefix, 2); err != nil {
			return "", fmt.Errorf("session: finding snapshot %s: %w", id, damaged(err))
		}
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("session: %w: no snapshot ID begins with %s%s", ErrSnapshotNotFound, id, where)
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("session: %w: %s begins the IDs of several snapshots%s (%s and %s at least): give more of its digits", ErrSnapshotAmbiguous, id, where, matches[0], matches[1])
}

// isHex reports whether s is made of lower-case hex digits only.
func isHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
