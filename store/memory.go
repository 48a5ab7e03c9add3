package store

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Memory is a Store that keeps everything in process memory. It suits tests and
// short-lived hosts that do not need snapshots to outlive the process.
//
// Data is copied on the way in and on the way out, so neither a caller that reuses its
// buffers after Commit nor one that edits what it read can change what is stored.
type Memory struct {
	mu     sync.RWMutex
	closed bool
	spaces map[string]*memSpace
}

var (
	_ Store         = (*Memory)(nil)
	_ SessionLister = (*Memory)(nil)
)

// memSpace is one namespace. Keeping namespaces in separate maps, rather than one map
// keyed by a concatenation, is what makes them unable to see each other.
type memSpace struct {
	blobs    map[string][]byte
	records  map[string]*memRecord
	sessions map[string]*memSession
	// lines maps a (session, parent) to the non-branch record that continued it.
	lines map[memLine]string
	bytes int64
}

type memLine struct{ session, parent string }

type memRecord struct {
	rec Record
	seq uint64
}

// memSession holds a session's records sorted by (Turn, seq), so Records is a copy
// rather than a sort.
type memSession struct {
	order  []*memRecord
	latest *memRecord
	seq    uint64
}

// Sizes the memory store charges for the fields the Badger store encodes in its keys
// and values (an 8-byte turn, an 8-byte commit sequence), so that Stats.Bytes of the two
// stores are of the same order for the same data.
const (
	memTurnSeqBytes = 16
	memSeqBytes     = 8
)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{spaces: map[string]*memSpace{}}
}

// Commit implements Store.
func (m *Memory) Commit(ctx context.Context, ns string, rec Record, blobs []Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckCommit(ns, rec, blobs); err != nil {
		return err
	}
	// Copy before taking the lock: the copies are needed anyway and the lock is then
	// held only for map updates.
	rec.Data = clone(rec.Data)
	owned := make([]Blob, len(blobs))
	for i, b := range blobs {
		owned[i] = Blob{Key: b.Key, Data: clone(b.Data)}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("commit record %q: %w", rec.ID, ErrClosed)
	}
	sp := m.spaces[ns]
	if sp == nil {
		sp = &memSpace{
			blobs:    map[string][]byte{},
			records:  map[string]*memRecord{},
			sessions: map[string]*memSession{},
			lines:    map[memLine]string{},
		}
		m.spaces[ns] = sp
	}
	if _, ok := sp.records[rec.ID]; ok {
		return nil
	}
	line := memLine{rec.Session, rec.Parent}
	if !rec.Branch {
		if cont, taken := sp.lines[line]; taken {
			return &ConflictError{Session: rec.Session, Parent: rec.Parent, Continued: cont, Head: sp.sessions[rec.Session].latest.rec.ID}
		}
		sp.lines[line] = rec.ID
		sp.bytes += int64(len(rec.Session) + len(rec.Parent) + len(rec.ID))
	}
	for _, b := range owned {
		if _, ok := sp.blobs[b.Key]; ok {
			continue
		}
		sp.blobs[b.Key] = b.Data
		sp.bytes += int64(len(b.Key) + len(b.Data))
	}
	ss := sp.sessions[rec.Session]
	if ss == nil {
		ss = &memSession{}
		sp.sessions[rec.Session] = ss
		// The session's head: its latest record ID and commit counter.
		sp.bytes += int64(len(rec.Session) + memSeqBytes)
	} else {
		sp.bytes -= int64(len(ss.latest.rec.ID))
	}
	ss.seq++
	mr := &memRecord{rec: rec, seq: ss.seq}
	// Insert after every record of the same or an earlier turn: the new record has the
	// highest seq, so that keeps ties in commit order.
	i := sort.Search(len(ss.order), func(i int) bool { return ss.order[i].rec.Turn > rec.Turn })
	ss.order = append(ss.order, nil)
	copy(ss.order[i+1:], ss.order[i:])
	ss.order[i] = mr
	ss.latest = mr
	sp.records[rec.ID] = mr
	sp.bytes += int64(len(rec.ID)) + // head
		int64(len(rec.ID)+len(rec.Session)+len(rec.Parent)+memTurnSeqBytes+len(rec.Data)) + // record
		int64(len(rec.Session)+memTurnSeqBytes+len(rec.ID)) // turn index entry
	return nil
}

// Record implements Store.
func (m *Memory) Record(ctx context.Context, ns, id string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if err := checkNamed("namespace", ns, "record ID", id); err != nil {
		return Record{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Record{}, fmt.Errorf("record %q: %w", id, ErrClosed)
	}
	if sp := m.spaces[ns]; sp != nil {
		if mr := sp.records[id]; mr != nil {
			return copyRecord(mr.rec), nil
		}
	}
	return Record{}, fmt.Errorf("record %q in namespace %q: %w", id, ns, ErrNotFound)
}

// Records implements Store.
func (m *Memory) Records(ctx context.Context, ns, session string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkNamed("namespace", ns, "session", session); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("records of session %q: %w", session, ErrClosed)
	}
	out := []Record{}
	if sp := m.spaces[ns]; sp != nil {
		if ss := sp.sessions[session]; ss != nil {
			out = make([]Record, len(ss.order))
			for i, mr := range ss.order {
				out[i] = copyRecord(mr.rec)
			}
		}
	}
	return out, nil
}

// Head implements Store.
func (m *Memory) Head(ctx context.Context, ns, session string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if err := checkNamed("namespace", ns, "session", session); err != nil {
		return Record{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Record{}, fmt.Errorf("head of session %q: %w", session, ErrClosed)
	}
	if sp := m.spaces[ns]; sp != nil {
		if ss := sp.sessions[session]; ss != nil {
			return copyRecord(ss.latest.rec), nil
		}
	}
	return Record{}, fmt.Errorf("head of session %q in namespace %q: %w", session, ns, ErrNotFound)
}

// Sessions implements SessionLister.
func (m *Memory) Sessions(ctx context.Context, ns string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkNamed("namespace", ns); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("sessions of namespace %q: %w", ns, ErrClosed)
	}
	out := []string{}
	if sp := m.spaces[ns]; sp != nil {
		for id := range sp.sessions {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Blob implements Store.
func (m *Memory) Blob(ctx context.Context, ns, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkNamed("namespace", ns, "blob key", key); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("blob %q: %w", key, ErrClosed)
	}
	if sp := m.spaces[ns]; sp != nil {
		if data, ok := sp.blobs[key]; ok {
			return clone(data), nil
		}
	}
	return nil, fmt.Errorf("blob %q in namespace %q: %w", key, ns, ErrNotFound)
}

// Stats implements Store.
func (m *Memory) Stats(ctx context.Context, ns string) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	if err := checkNamed("namespace", ns); err != nil {
		return Stats{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Stats{}, fmt.Errorf("stats of namespace %q: %w", ns, ErrClosed)
	}
	sp := m.spaces[ns]
	if sp == nil {
		return Stats{}, nil
	}
	return Stats{Records: len(sp.records), Blobs: len(sp.blobs), Bytes: sp.bytes}, nil
}

// Close drops everything the store holds. Closing twice is harmless.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.spaces = nil
	return nil
}

// CheckCommit validates every name of a Commit before anything is written, which is
// what lets Commit be all-or-nothing without a rollback. Implementations call it first,
// so that every store refuses the same input with the same error.
func CheckCommit(ns string, rec Record, blobs []Blob) error {
	if err := checkNamed("namespace", ns, "record ID", rec.ID, "session", rec.Session); err != nil {
		return err
	}
	if len(rec.Parent) > MaxNameLen {
		return fmt.Errorf("parent: %w: name of %d bytes (limit %d)", ErrInvalid, len(rec.Parent), MaxNameLen)
	}
	for i, b := range blobs {
		if err := CheckNames(b.Key); err != nil {
			return fmt.Errorf("blob %d key: %w", i, err)
		}
	}
	return nil
}

// checkNamed runs CheckNames on (label, name) pairs so the error says which name was
// wrong; CheckNames alone cannot tell a namespace from a record ID.
func checkNamed(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := CheckNames(pairs[i+1]); err != nil {
			return fmt.Errorf("%s: %w", pairs[i], err)
		}
	}
	return nil
}

func copyRecord(r Record) Record {
	r.Data = clone(r.Data)
	return r
}

// clone never returns nil: the store does not distinguish nil from empty data, and a
// fresh slice is what guarantees no aliasing in either direction.
func clone(b []byte) []byte {
	return append([]byte{}, b...)
}
