package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Memory is a Store that keeps everything in process memory. It suits tests and
// short-lived hosts that do not need snapshots to outlive the process.
//
// Data is copied on the way in and on the way out, so neither a caller that reuses its
// buffers after Commit nor one that edits what it read can change what is stored.
//
// There is no store-wide lock: records and blobs are in concurrent maps and each
// session has its own lock, which a commit holds from its checks to its last write, so
// that commits of different sessions proceed together and the line rule holds. A
// record found by ID may precede by a moment its session's head, which waits for the
// commit to end.
type Memory struct {
	closed atomic.Bool
	spaces sync.Map // namespace -> *memSpace
}

var (
	_ Store         = (*Memory)(nil)
	_ SessionLister = (*Memory)(nil)
	_ PrefixFinder  = (*Memory)(nil)
)

// memSpace is one namespace. Keeping namespaces in separate maps, rather than one map
// keyed by a concatenation, is what makes them unable to see each other.
type memSpace struct {
	blobs    sync.Map // key -> []byte
	records  sync.Map // ID -> *memRecord
	sessions sync.Map // name -> *memSession
	// The counts and sizes of Stats.
	nRecords, nBlobs, bytes atomic.Int64
}

type memRecord struct {
	rec Record
	seq uint64
	// next is the non-branch record that continued this one in its session.
	next string
	// outcome is what Settle recorded, nil before; written under the session's lock,
	// read without it.
	outcome atomic.Pointer[[]byte]
}

// record returns a copy of the record with its outcome.
func (mr *memRecord) record() Record {
	r := copyRecord(mr.rec)
	if o := mr.outcome.Load(); o != nil {
		r.Outcome = clone(*o)
	}
	return r
}

// memSession holds a session's records sorted by (Turn, seq), so Records is a copy
// rather than a sort. Its line (which parent a non-branch record continued) is kept
// on the parents' records, not in a map of its own, which would cost an idle session
// about 300 bytes more.
type memSession struct {
	mu     sync.RWMutex
	order  []*memRecord
	latest *memRecord
	seq    uint64
	// first is the non-branch record that started the session.
	first string
	// elsewhere maps the parents that are no records of the session (of another, or
	// not stored) to the non-branch record that continued them; seldom any.
	elsewhere map[string]string
}

// continuation returns the non-branch record that continued parent in the session
// ss, named session, or "". The caller holds ss.mu.
func (sp *memSpace) continuation(ss *memSession, session, parent string) string {
	if parent == "" {
		return ss.first
	}
	if mr := sp.own(session, parent); mr != nil {
		return mr.next
	}
	return ss.elsewhere[parent]
}

// continued records that child continued parent in the session. The caller holds
// ss.mu.
func (sp *memSpace) continued(ss *memSession, session, parent, child string) {
	if parent == "" {
		ss.first = child
	} else if mr := sp.own(session, parent); mr != nil {
		mr.next = child
	} else {
		if ss.elsewhere == nil {
			ss.elsewhere = map[string]string{}
		}
		ss.elsewhere[parent] = child
	}
}

// own returns the record id if it is one of the session's.
func (sp *memSpace) own(session, id string) *memRecord {
	if v, ok := sp.records.Load(id); ok && v.(*memRecord).rec.Session == session {
		return v.(*memRecord)
	}
	return nil
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
	return &Memory{}
}

// space returns the namespace ns, or nil if nothing was committed to it.
func (m *Memory) space(ns string) *memSpace {
	if sp, ok := m.spaces.Load(ns); ok {
		return sp.(*memSpace)
	}
	return nil
}

// session returns the named session of the namespace ns, or nil if it has no records.
func (m *Memory) session(ns, name string) *memSession {
	if sp := m.space(ns); sp != nil {
		if ss, ok := sp.sessions.Load(name); ok {
			return ss.(*memSession)
		}
	}
	return nil
}

// Commit implements Store.
func (m *Memory) Commit(ctx context.Context, ns string, rec Record, blobs []Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckCommit(ns, rec, blobs); err != nil {
		return err
	}
	if m.closed.Load() {
		return fmt.Errorf("commit record %q: %w", rec.ID, ErrClosed)
	}
	// Copy before taking the lock: the copies are needed anyway and the lock is then
	// held only for map updates.
	rec.Data, rec.Outcome = clone(rec.Data), nil
	owned := cloneBlobs(blobs)

	sp := loadOrNew[memSpace](&m.spaces, ns)
	ss := loadOrNew[memSession](&sp.sessions, rec.Session)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, ok := sp.records.Load(rec.ID); ok {
		return nil
	}
	if !rec.Branch {
		if cont := sp.continuation(ss, rec.Session, rec.Parent); cont != "" {
			return &ConflictError{Session: rec.Session, Parent: rec.Parent, Continued: cont, Head: ss.latest.rec.ID}
		}
	}
	// Blobs before the record, so that a reader finding the record finds its blobs.
	sp.storeBlobs(owned)
	ss.seq++
	mr := &memRecord{rec: rec, seq: ss.seq}
	if _, loaded := sp.records.LoadOrStore(rec.ID, mr); loaded {
		// Committed at the same time to another session (the lock is per session),
		// which content-addressed IDs never are: the first stays, as if it came first.
		return nil
	}
	sp.nRecords.Add(1)
	// A record continued before it was stored keeps its line.
	if child, ok := ss.elsewhere[rec.ID]; ok {
		mr.next = child
		delete(ss.elsewhere, rec.ID)
	}
	if !rec.Branch {
		sp.continued(ss, rec.Session, rec.Parent, rec.ID)
		sp.bytes.Add(int64(len(rec.Session) + len(rec.Parent) + len(rec.ID)))
	}
	if ss.latest == nil {
		// The session's head: its latest record ID and commit counter.
		sp.bytes.Add(int64(len(rec.Session) + memSeqBytes))
	} else {
		sp.bytes.Add(-int64(len(ss.latest.rec.ID)))
	}
	// Insert after every record of the same or an earlier turn: the new record has the
	// highest seq, so that keeps ties in commit order.
	i := sort.Search(len(ss.order), func(i int) bool { return ss.order[i].rec.Turn > rec.Turn })
	ss.order = slices.Insert(ss.order, i, mr)
	ss.latest = mr
	sp.bytes.Add(int64(len(rec.ID)) + // head
		int64(len(rec.ID)+len(rec.Session)+len(rec.Parent)+memTurnSeqBytes+len(rec.Data)) + // record
		int64(len(rec.Session)+memTurnSeqBytes+len(rec.ID))) // turn index entry
	return nil
}

// storeBlobs stores the blobs not stored yet.
func (sp *memSpace) storeBlobs(blobs []Blob) {
	for _, b := range blobs {
		if _, loaded := sp.blobs.LoadOrStore(b.Key, b.Data); !loaded {
			sp.nBlobs.Add(1)
			sp.bytes.Add(int64(len(b.Key) + len(b.Data)))
		}
	}
}

// loadOrNew returns m's value for key, storing a new one first if it has none: a
// load first, since all but a session's first commit find theirs, and LoadOrStore
// would allocate the value it does not store.
func loadOrNew[V any](m *sync.Map, key string) *V {
	if v, ok := m.Load(key); ok {
		return v.(*V)
	}
	v, _ := m.LoadOrStore(key, new(V))
	return v.(*V)
}

// cloneBlobs copies blobs and their data.
func cloneBlobs(blobs []Blob) []Blob {
	owned := make([]Blob, len(blobs))
	for i, b := range blobs {
		owned[i] = Blob{Key: b.Key, Data: clone(b.Data)}
	}
	return owned
}

// Settle implements Store.
func (m *Memory) Settle(ctx context.Context, ns, id string, outcome []byte, blobs []Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckSettle(ns, id, outcome, blobs); err != nil {
		return err
	}
	if m.closed.Load() {
		return fmt.Errorf("settle record %q: %w", id, ErrClosed)
	}
	sp := m.space(ns)
	var mr *memRecord
	if sp != nil {
		if v, ok := sp.records.Load(id); ok {
			mr = v.(*memRecord)
		}
	}
	if mr == nil {
		return fmt.Errorf("settle record %q in namespace %q: %w", id, ns, ErrNotFound)
	}
	outcome, owned := clone(outcome), cloneBlobs(blobs)
	v, _ := sp.sessions.Load(mr.rec.Session)
	ss := v.(*memSession)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if prev := mr.outcome.Load(); prev != nil {
		if bytes.Equal(*prev, outcome) {
			return nil
		}
		return fmt.Errorf("settle record %q in namespace %q: %w: it was settled already", id, ns, ErrConflict)
	}
	// Blobs before the outcome, so that a reader finding the outcome finds its blobs.
	sp.storeBlobs(owned)
	mr.outcome.Store(&outcome)
	sp.bytes.Add(int64(len(outcome)))
	return nil
}

// Record implements Store.
func (m *Memory) Record(ctx context.Context, ns, id string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if err := CheckNamed("namespace", ns, "record ID", id); err != nil {
		return Record{}, err
	}
	if m.closed.Load() {
		return Record{}, fmt.Errorf("record %q: %w", id, ErrClosed)
	}
	if sp := m.space(ns); sp != nil {
		if mr, ok := sp.records.Load(id); ok {
			return mr.(*memRecord).record(), nil
		}
	}
	return Record{}, fmt.Errorf("record %q in namespace %q: %w", id, ns, ErrNotFound)
}

// Records implements Store.
func (m *Memory) Records(ctx context.Context, ns, session string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckNamed("namespace", ns, "session", session); err != nil {
		return nil, err
	}
	if m.closed.Load() {
		return nil, fmt.Errorf("records of session %q: %w", session, ErrClosed)
	}
	ss := m.session(ns, session)
	if ss == nil {
		return []Record{}, nil
	}
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	out := make([]Record, len(ss.order))
	for i, mr := range ss.order {
		out[i] = mr.record()
	}
	return out, nil
}

// Head implements Store.
func (m *Memory) Head(ctx context.Context, ns, session string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if err := CheckNamed("namespace", ns, "session", session); err != nil {
		return Record{}, err
	}
	if m.closed.Load() {
		return Record{}, fmt.Errorf("head of session %q: %w", session, ErrClosed)
	}
	if ss := m.session(ns, session); ss != nil {
		ss.mu.RLock()
		defer ss.mu.RUnlock()
		// A session is created by the commit of its first record, which may yet
		// store none (see hasRecords).
		if ss.latest != nil {
			return ss.latest.record(), nil
		}
	}
	return Record{}, fmt.Errorf("head of session %q in namespace %q: %w", session, ns, ErrNotFound)
}

// Sessions implements SessionLister.
func (m *Memory) Sessions(ctx context.Context, ns string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckNamed("namespace", ns); err != nil {
		return nil, err
	}
	if m.closed.Load() {
		return nil, fmt.Errorf("sessions of namespace %q: %w", ns, ErrClosed)
	}
	out := []string{}
	if sp := m.space(ns); sp != nil {
		sp.sessions.Range(func(id, ss any) bool {
			if ss.(*memSession).hasRecords() {
				out = append(out, id.(string))
			}
			return true
		})
	}
	slices.Sort(out)
	return out, nil
}

// RecordIDs implements PrefixFinder. The memory store keeps no ordered index of IDs,
// so it looks at every record of the namespace.
func (m *Memory) RecordIDs(ctx context.Context, ns, prefix string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckPrefixQuery(ns, prefix, limit); err != nil {
		return nil, err
	}
	if m.closed.Load() {
		return nil, fmt.Errorf("records beginning %q: %w", prefix, ErrClosed)
	}
	out := []string{}
	if sp := m.space(ns); sp != nil {
		sp.records.Range(func(id, _ any) bool {
			if strings.HasPrefix(id.(string), prefix) {
				out = append(out, id.(string))
			}
			return true
		})
	}
	slices.Sort(out)
	return out[:min(len(out), limit)], nil
}

// hasRecords reports whether a commit has given the session a record: a session is
// created by the commit of its first record, which may yet store none (a record ID
// committed at once to another session).
func (ss *memSession) hasRecords() bool {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return ss.latest != nil
}

// Blob implements Store.
func (m *Memory) Blob(ctx context.Context, ns, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckNamed("namespace", ns, "blob key", key); err != nil {
		return nil, err
	}
	if m.closed.Load() {
		return nil, fmt.Errorf("blob %q: %w", key, ErrClosed)
	}
	if sp := m.space(ns); sp != nil {
		if data, ok := sp.blobs.Load(key); ok {
			return clone(data.([]byte)), nil
		}
	}
	return nil, fmt.Errorf("blob %q in namespace %q: %w", key, ns, ErrNotFound)
}

// Stats implements Store.
func (m *Memory) Stats(ctx context.Context, ns string) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	if err := CheckNamed("namespace", ns); err != nil {
		return Stats{}, err
	}
	if m.closed.Load() {
		return Stats{}, fmt.Errorf("stats of namespace %q: %w", ns, ErrClosed)
	}
	sp := m.space(ns)
	if sp == nil {
		return Stats{}, nil
	}
	return Stats{Records: int(sp.nRecords.Load()), Blobs: int(sp.nBlobs.Load()), Bytes: sp.bytes.Load()}, nil
}

// Close drops everything the store holds. Closing twice is harmless. A call running
// when Close is called may still complete.
func (m *Memory) Close() error {
	m.closed.Store(true)
	m.spaces.Clear()
	return nil
}

// CheckCommit validates every name of a Commit before anything is written, which is
// what lets Commit be all-or-nothing without a rollback. Implementations call it first,
// so that every store refuses the same input with the same error.
func CheckCommit(ns string, rec Record, blobs []Blob) error {
	if err := CheckNamed("namespace", ns, "record ID", rec.ID, "session", rec.Session); err != nil {
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

// CheckSettle validates a Settle's names and outcome before anything is written, as
// CheckCommit does for Commit. Implementations call it first.
func CheckSettle(ns, id string, outcome []byte, blobs []Blob) error {
	if err := CheckNamed("namespace", ns, "record ID", id); err != nil {
		return err
	}
	if len(outcome) == 0 {
		return fmt.Errorf("outcome: %w: empty", ErrInvalid)
	}
	for i, b := range blobs {
		if err := CheckNames(b.Key); err != nil {
			return fmt.Errorf("blob %d key: %w", i, err)
		}
	}
	return nil
}

// CheckNamed is CheckNames for (label, name) pairs, such as ("namespace", ns, "session",
// session): its error says which name was wrong, which CheckNames cannot tell.
// Implementations call it first on the names of every call but Commit (CheckCommit).
func CheckNamed(pairs ...string) error {
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
