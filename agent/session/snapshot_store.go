package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/store"
)

// The stored form of a snapshot (docs/architecture.md, "Snapshots"):
//
//   - a record: the JSON of snapshotRecord, keys sorted, no whitespace. The snapshot's
//     ID is the hex SHA-256 of exactly these bytes.
//   - blobs, each stored under the hex SHA-256 of its bytes: message segments, the
//     custom state, each artifact, the prompt input.
//
// Messages are stored as a chain of segments, each holding the messages a save added
// and the digest of the previous segment, so a turn writes only its own messages and a
// long conversation's storage grows linearly.
//
// A pending snapshot (a detached turn's) is settled under its own ID: the store keeps
// its outcome beside the record (store.Store.Settle), the JSON of outcomeRecord, which
// names the snapshot and the final state's pieces, stored as blobs like any state's.

// snapshotFormat is the version of the stored form. Format 1 had no branch, status,
// finish reason or error; format 2's error was an abi.Error; both read as format 3
// without what they lack.
const snapshotFormat = 3

// snapshotRecord is a stored snapshot. Fields are declared in the order of their JSON
// keys so that encoding/json writes the keys sorted.
type snapshotRecord struct {
	Branch    bool      `json:"branch,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Error is a *TurnError (format 3) or an *abi.Error (format 2): see turnError.
	Error        json.RawMessage  `json:"error,omitempty"`
	Event        SnapshotEvent    `json:"event"`
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
	ParentID     string           `json:"parentId,omitempty"`
	SessionID    string           `json:"sessionId"`
	State        stateRoot        `json:"state"`
	Status       SnapshotStatus   `json:"status,omitempty"`
	TurnIndex    int              `json:"turnIndex"`
	V            int              `json:"v"`
}

// appendJSON appends the record's encoding, encoding/json's (keys sorted), to b. The
// snapshot's ID is the digest of these bytes, so they must stay encoding/json's
// (TestRecordEncodingIsEncodingJSONs); written out, a save goes through no reflection
// for them.
func (r *snapshotRecord) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	if r.Branch {
		b = append(b, `"branch":true,`...)
	}
	b = append(b, `"createdAt":"`...)
	b, err := r.CreatedAt.AppendText(b)
	if err != nil {
		return nil, fmt.Errorf("createdAt: %w", err)
	}
	b = append(b, '"')
	if len(r.Error) > 0 {
		// Already encoding/json's (compact, escaped): see SaveSnapshot.
		b = append(b, `,"error":`...)
		b = append(b, r.Error...)
	}
	b = appendMember(b, "event", string(r.Event), false)
	b = appendMember(b, "finishReason", string(r.FinishReason), true)
	b = appendMember(b, "parentId", r.ParentID, true)
	b = appendMember(b, "sessionId", r.SessionID, false)
	b = append(b, `,"state":{`...)
	st, first := &r.State, true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	if len(st.Artifacts) > 0 {
		sep()
		b = append(b, `"artifacts":[`...)
		for i, a := range st.Artifacts {
			if i > 0 {
				b = append(b, ',')
			}
			b = abi.AppendJSONString(b, a)
		}
		b = append(b, ']')
	}
	if st.Custom != "" {
		sep()
		b = append(b, `"custom":`...)
		b = abi.AppendJSONString(b, st.Custom)
	}
	if m := st.Messages; m != nil {
		sep()
		b = append(b, `"messages":{"count":`...)
		b = strconv.AppendInt(b, int64(m.Count), 10)
		b = append(b, `,"head":`...)
		b = abi.AppendJSONString(b, m.Head)
		b = append(b, '}')
	}
	if st.PromptInput != "" {
		sep()
		b = append(b, `"promptInput":`...)
		b = abi.AppendJSONString(b, st.PromptInput)
	}
	b = append(b, '}')
	b = appendMember(b, "status", string(r.Status), true)
	b = append(b, `,"turnIndex":`...)
	b = strconv.AppendInt(b, int64(r.TurnIndex), 10)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	return append(b, '}'), nil
}

// appendMember appends `,"key":value` for a string member after the first, nothing
// for an empty one that is omitted when empty.
func appendMember(b []byte, key, value string, omitEmpty bool) []byte {
	if omitEmpty && value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return abi.AppendJSONString(b, value)
}

// outcomeRecord is how a pending snapshot settled, kept beside its record: the JSON
// of this struct (keys sorted). It names the snapshot it settles, which a read checks;
// its state's pieces are blobs, checked against their digests as a record's are.
type outcomeRecord struct {
	Error        *TurnError       `json:"error,omitempty"`
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
	SnapshotID   string           `json:"snapshotId"`
	State        stateRoot        `json:"state"`
	Status       SnapshotStatus   `json:"status"`
	UpdatedAt    time.Time        `json:"updatedAt"`
	V            int              `json:"v"`
}

// stateRoot holds the digests of a state's pieces.
type stateRoot struct {
	Artifacts   []string     `json:"artifacts,omitempty"`
	Custom      string       `json:"custom,omitempty"`
	Messages    *messagesRef `json:"messages,omitempty"`
	PromptInput string       `json:"promptInput,omitempty"`
}

type messagesRef struct {
	Count int    `json:"count"`
	Head  string `json:"head"`
}

// segment is a run of messages: those at positions Start, Start+1, ... of the
// conversation, after the segment Prev ends.
type segment struct {
	Messages []*abi.Message `json:"messages"`
	Prev     string         `json:"prev,omitempty"`
	Start    int            `json:"start"`
}

// appendJSON appends the segment's encoding, encoding/json's (keys sorted), to b:
// written out so that encoding/json does not re-read each message's own encoding.
func (s *segment) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"messages":`...)
	if s.Messages == nil {
		b = append(b, "null"...)
	} else {
		var err error
		if b, err = abi.AppendJSONArray(b, s.Messages); err != nil {
			return nil, err
		}
	}
	if s.Prev != "" {
		b = append(b, `,"prev":`...)
		b = abi.AppendJSONString(b, s.Prev)
	}
	b = append(b, `,"start":`...)
	b = strconv.AppendInt(b, int64(s.Start), 10)
	return append(b, '}'), nil
}

// segRef locates a stored segment; refs link into a chain shared between snapshots.
type segRef struct {
	digest string
	end    int // position after the segment's last message
	size   int // bytes of the encodings of this segment and all before it
	prev   *segRef
	// msgs are the messages whose encodings are the segment's bytes, or nil when that
	// is not known: a saved segment's; a loaded one's when they encode to the same
	// bytes again (a tool's Go struct comes back as a map, its keys sorted: not those).
	// A save compares them, pointer by pointer, with the messages it stores, so that a
	// segment the new messages begin with is neither encoded nor hashed again.
	msgs []*abi.Message
}

// known is what the store remembers of a snapshot it saved or loaded recently, so that
// saving a child of it needs no load and encodes only the messages new to the child.
type known struct {
	chain *segRef
	root  stateRoot
}

// loaded is a decoded segment as the segment cache keeps it.
type loaded struct {
	seg  *segment
	size int // bytes of its encoding
	// canonical says the decoded messages encode to the segment's bytes again, so
	// their pointers can stand for those bytes (see segRef).
	canonical bool
}

// The caches' cost estimates. A cached snapshot spares the next save of its session a
// load and an encoding of the conversation (BenchmarkSnapshotSave: about a
// hundredth of the cost at 100 turns); a miss costs them, and never changes what is
// stored.
const (
	// defaultCacheBytes holds the snapshots of some 19,000 live two-turn chats (an
	// entry is estimated at 3.5 kB for one with 600-character answers), so the 10,000
	// sessions of BenchmarkSessionFlowConcurrent all hit between their two turns.
	// Two thirds are for the snapshots saved last, one third for decoded segments.
	defaultCacheBytes = 96 << 20
	// messageBytes is what a message takes in memory besides its JSON: measured at
	// 125 to 160 bytes for a one-part text message, rounded up, plus its pointer and a
	// segment reference with its digest (at most one per message).
	messageBytes  = 192 + 8 + 128
	knownBytes    = 512 // a known with its root's digests
	segmentsBytes = 64  // a loaded with its segment
)

// cost estimates the bytes a cached known keeps alive: its chain and the messages,
// which outlive their session as long as the entry does.
func (k *known) cost() int {
	if k.chain == nil {
		return knownBytes
	}
	return knownBytes + k.chain.end*messageBytes + k.chain.size
}

// cost estimates the bytes a cached segment keeps alive.
func (l *loaded) cost() int {
	return segmentsBytes + len(l.seg.Messages)*messageBytes + l.size
}

// SnapshotStoreOption configures NewSnapshotStore.
type SnapshotStoreOption interface {
	applySnapshotStore(*snapshotStoreConfig) error
}

type snapshotStoreConfig struct {
	ns         string
	cacheBytes int
}

type snapshotStoreFunc func(*snapshotStoreConfig) error

func (f snapshotStoreFunc) applySnapshotStore(c *snapshotStoreConfig) error { return f(c) }

// WithNamespace keeps the snapshots under a namespace of the underlying store
// ("default" unless set). Tenants given different namespaces never see each other's
// snapshots.
func WithNamespace(ns string) SnapshotStoreOption {
	return snapshotStoreFunc(func(c *snapshotStoreConfig) error {
		if err := store.CheckNames(ns); err != nil {
			return fmt.Errorf("session: %w: WithNamespace: %w", agent.ErrInvalidOption, err)
		}
		c.ns = ns
		return nil
	})
}

// WithCacheBytes bounds the memory the store's caches keep alive to about n bytes
// (96 MiB unless set; 0 turns them off). The caches remember the snapshots saved last,
// so that saving the next turn of a session neither loads its parent nor encodes its
// whole conversation again, and decoded message segments. Size them for the sessions
// that run at once: a two-turn chat takes about 3.5 kB, a 1,000-turn one 1.5 MB.
// The size changes how much work a save does, never what it stores.
func WithCacheBytes(n int) SnapshotStoreOption {
	return snapshotStoreFunc(func(c *snapshotStoreConfig) error {
		if n < 0 {
			return fmt.Errorf("session: %w: WithCacheBytes(%d): negative", agent.ErrInvalidOption, n)
		}
		c.cacheBytes = n
		return nil
	})
}

type snapshotStore[State any] struct {
	st       store.Store
	ns       string
	recent   *costCache[*known]
	segments *costCache[*loaded]
}

// NewSnapshotStore returns a SnapshotStore keeping snapshots in st, content-addressed
// and verified on every read. It panics on an invalid option.
func NewSnapshotStore[State any](st store.Store, opts ...SnapshotStoreOption) SnapshotStore[State] {
	cfg := snapshotStoreConfig{ns: "default", cacheBytes: defaultCacheBytes}
	for _, o := range opts {
		if err := o.applySnapshotStore(&cfg); err != nil {
			panic(err)
		}
	}
	return &snapshotStore[State]{
		st:       st,
		ns:       cfg.ns,
		recent:   newCostCache(cfg.cacheBytes/3*2, (*known).cost),
		segments: newCostCache(cfg.cacheBytes/3, (*loaded).cost),
	}
}

// NewInMemorySnapshotStore returns a SnapshotStore that keeps snapshots in memory.
func NewInMemorySnapshotStore[State any]() SnapshotStore[State] {
	return NewSnapshotStore[State](store.NewMemory())
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// scratch holds a save's encodings until the store has them. A store keeps no
// reference to the bytes it is given (store.Store.Commit), so the buffer serves the
// next save: a turn's snapshot then allocates only what it keeps.
type scratch struct {
	b   []byte
	enc *json.Encoder // writing to the scratch itself
}

var scratches = sync.Pool{New: func() any {
	s := &scratch{}
	s.enc = json.NewEncoder(s)
	return s
}}

// maxScratch is the largest buffer kept for reuse: a save of a long history, resumed
// from elsewhere, should not pin its megabytes.
const maxScratch = 64 << 10

func getScratch() *scratch { return scratches.Get().(*scratch) }

func (s *scratch) put() {
	if cap(s.b) <= maxScratch {
		s.b = s.b[:0]
		scratches.Put(s)
	}
}

// Write appends p: the encoder writes each value in one call.
func (s *scratch) Write(p []byte) (int, error) {
	s.b = append(s.b, p...)
	return len(p), nil
}

// encode appends encoding/json's encoding of v (json.Marshal's bytes, without the
// copy Marshal makes of them).
func (s *scratch) encode(v any) error {
	n := len(s.b)
	if err := s.enc.Encode(v); err != nil {
		s.b = s.b[:n]
		return err
	}
	s.b = s.b[:len(s.b)-1] // Encode ends the value with a newline
	return nil
}

// SaveSnapshot implements SnapshotStore.
func (s *snapshotStore[State]) SaveSnapshot(ctx context.Context, snap *SessionSnapshot[State]) error {
	var parent *known
	if snap.ParentID != "" {
		var err error
		if parent, err = s.knownOf(ctx, snap.ParentID); err != nil {
			return fmt.Errorf("session: saving a snapshot of session %s: parent: %w", snap.SessionID, err)
		}
	}
	buf := getScratch()
	defer buf.put()
	enc, err := encodeState(parent, &snap.State, buf)
	if err != nil {
		return fmt.Errorf("session: encoding the state of session %s: %w", snap.SessionID, err)
	}
	if snap.CreatedAt.IsZero() {
		snap.CreatedAt = time.Now()
	}
	rec := snapshotRecord{
		Branch:       snap.Branch,
		CreatedAt:    snap.CreatedAt.UTC(),
		Event:        snap.Event,
		FinishReason: snap.FinishReason,
		ParentID:     snap.ParentID,
		SessionID:    snap.SessionID,
		State:        enc.root,
		Status:       snap.Status,
		TurnIndex:    snap.TurnIndex,
		V:            snapshotFormat,
	}
	if snap.Error != nil {
		if rec.Error, err = json.Marshal(snap.Error); err != nil {
			return fmt.Errorf("session: encoding the error of session %s: %w", snap.SessionID, err)
		}
	}
	start := len(buf.b)
	if buf.b, err = rec.appendJSON(buf.b); err != nil {
		return fmt.Errorf("session: encoding the snapshot record of session %s: %w", snap.SessionID, err)
	}
	data := buf.b[start:]
	id := digest(data)
	if err := s.st.Commit(ctx, s.ns, store.Record{ID: id, Session: snap.SessionID, Parent: snap.ParentID, Branch: snap.Branch, Turn: snap.TurnIndex, Data: data}, enc.blobs); err != nil {
		return fmt.Errorf("session: saving a snapshot of session %s: %w", snap.SessionID, err)
	}
	snap.SnapshotID = id
	s.recent.Add(id, enc.known)
	if !snap.Branch && snap.ParentID != "" {
		// The line rule lets no other save continue the parent, so the parent's entry
		// could only serve a branch: give its room to live sessions.
		s.recent.Remove(snap.ParentID)
	}
	return nil
}

// SettleSnapshot implements SnapshotStore: the outcome's state is stored as a child's
// would be, its pieces reusing the pending state's.
func (s *snapshotStore[State]) SettleSnapshot(ctx context.Context, snap *SessionSnapshot[State]) error {
	switch snap.Status {
	case StatusCompleted, StatusFailed, StatusAborted:
	default:
		return fmt.Errorf("session: settling snapshot %s: %w: status %q does not settle a turn", snap.SnapshotID, agent.ErrInvalidInput, snap.Status)
	}
	pending, err := s.knownOf(ctx, snap.SnapshotID)
	if err != nil {
		return fmt.Errorf("session: settling snapshot %s: %w", snap.SnapshotID, err)
	}
	buf := getScratch()
	defer buf.put()
	enc, err := encodeState(pending, &snap.State, buf)
	if err != nil {
		return fmt.Errorf("session: settling snapshot %s: encoding its state: %w", snap.SnapshotID, err)
	}
	if snap.UpdatedAt.IsZero() {
		snap.UpdatedAt = time.Now()
	}
	out := outcomeRecord{Error: snap.Error, FinishReason: snap.FinishReason, SnapshotID: snap.SnapshotID, State: enc.root,
		Status: snap.Status, UpdatedAt: snap.UpdatedAt.UTC(), V: snapshotFormat}
	data, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("session: settling snapshot %s: %w", snap.SnapshotID, err)
	}
	if err := s.st.Settle(ctx, s.ns, snap.SnapshotID, data, enc.blobs); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("session: settling snapshot %s: %w", snap.SnapshotID, ErrSnapshotNotFound)
		}
		return fmt.Errorf("session: settling snapshot %s: %w", snap.SnapshotID, damaged(err))
	}
	// The snapshot now stands for its final state: what a save of its child needs.
	s.recent.Add(snap.SnapshotID, enc.known)
	return nil
}

// encoded is a state put in stored form.
type encoded struct {
	root  stateRoot
	blobs []store.Blob // those the parent's state did not have
	known *known       // what saving a child of the state needs
}

// encodeState puts a state in stored form, reusing the pieces the parent's state (if
// any) has: the message segments the messages begin with, the custom state, artifacts
// and prompt input whose bytes are unchanged. The blobs' data are in buf, good until
// it is reused.
func encodeState[State any](parent *known, st *SessionState[State], buf *scratch) (*encoded, error) {
	type piece struct {
		key        string
		start, end int
	}
	var pieces []piece
	// end takes the piece buf holds from start on: a blob, unless the parent's state
	// or this one has it already.
	end := func(start int, parentDigest string) string {
		d := digest(buf.b[start:])
		if d == parentDigest || slices.ContainsFunc(pieces, func(p piece) bool { return p.key == d }) {
			buf.b = buf.b[:start]
		} else {
			pieces = append(pieces, piece{d, start, len(buf.b)})
		}
		return d
	}
	var root stateRoot
	var prev stateRoot
	if parent != nil {
		prev = parent.root
	}

	// Messages: keep the parent's segments that the new messages begin with, and write
	// one segment for the rest.
	var base *segRef
	if parent != nil {
		var err error
		if base, err = sharedSegments(parent.chain, st.Messages); err != nil {
			return nil, fmt.Errorf("the messages: %w", err)
		}
	}
	head := base
	var seg segment
	size := 0
	if base != nil {
		seg.Prev, seg.Start, size = base.digest, base.end, base.size
	}
	if seg.Start < len(st.Messages) {
		// A copy of the new messages' pointers, so that a caller reusing its slice
		// cannot change what they stand for.
		seg.Messages = slices.Clone(st.Messages[seg.Start:])
		start := len(buf.b)
		var err error
		if buf.b, err = seg.appendJSON(buf.b); err != nil {
			return nil, fmt.Errorf("the messages: %w", err)
		}
		n := len(buf.b) - start
		head = &segRef{digest: end(start, ""), end: len(st.Messages), size: size + n, prev: base, msgs: seg.Messages}
	}
	if head != nil {
		root.Messages = &messagesRef{Count: head.end, Head: head.digest}
	}

	start := len(buf.b)
	if err := buf.encode(st.Custom); err != nil {
		return nil, fmt.Errorf("the custom state: %w", err)
	}
	root.Custom = end(start, prev.Custom)
	for i, a := range st.Artifacts {
		start := len(buf.b)
		if err := buf.encode(a); err != nil {
			return nil, fmt.Errorf("artifact %q: %w", a.Name, err)
		}
		var was string
		if i < len(prev.Artifacts) {
			was = prev.Artifacts[i]
		}
		root.Artifacts = append(root.Artifacts, end(start, was))
	}
	if st.PromptInput != nil {
		start := len(buf.b)
		if err := buf.encode(st.PromptInput); err != nil {
			return nil, fmt.Errorf("the prompt input: %w", err)
		}
		root.PromptInput = end(start, prev.PromptInput)
	}
	blobs := make([]store.Blob, len(pieces))
	for i, p := range pieces {
		blobs[i] = store.Blob{Key: p.key, Data: buf.b[p.start:p.end:p.end]}
	}
	return &encoded{root: root, blobs: blobs, known: &known{chain: head, root: root}}, nil
}

// sharedSegments returns the last segment of the chain ending at r, oldest first, that
// the messages begin with: those at the segment's positions encode to its bytes. A
// segment's known messages stand for its bytes, so a save whose parent was cached
// encodes only what is new to it; after a miss, the conversation is encoded once.
// Either way the answer, and so what is stored, is the same.
func sharedSegments(r *segRef, msgs []*abi.Message) (*segRef, error) {
	if r == nil {
		return nil, nil
	}
	base, err := sharedSegments(r.prev, msgs)
	if err != nil || base != r.prev || r.end > len(msgs) {
		return base, err
	}
	var seg segment
	if base != nil {
		seg.Prev, seg.Start = base.digest, base.end
	}
	if r.msgs != nil && slices.Equal(r.msgs, msgs[seg.Start:r.end]) {
		return r, nil
	}
	seg.Messages = msgs[seg.Start:r.end]
	data, err := seg.appendJSON(nil)
	if err != nil {
		return nil, err
	}
	if digest(data) != r.digest {
		return base, nil
	}
	return r, nil
}

// knownOf returns what is needed to save a child of the snapshot id, loading the
// snapshot when it is not remembered. What a load finds is used as found, whatever the
// cache keeps; it is not remembered, since the save replaces it as the session's last.
func (s *snapshotStore[State]) knownOf(ctx context.Context, id string) (*known, error) {
	if k, ok := s.recent.Get(id); ok {
		return k, nil
	}
	rec, err := s.record(ctx, id)
	if err != nil {
		return nil, err
	}
	_, k, err := s.decode(ctx, rec)
	return k, err
}

// damaged makes the store's report of damage (store.ErrCorrupt) an ErrSnapshotCorrupt
// too: whether a hash check here or the store's own checks found it, a snapshot that
// cannot be read as it was saved is one error to callers.
func damaged(err error) error {
	if errors.Is(err, store.ErrCorrupt) {
		return fmt.Errorf("%w: %w", ErrSnapshotCorrupt, err)
	}
	return err
}

func (s *snapshotStore[State]) record(ctx context.Context, id string) (store.Record, error) {
	rec, err := s.st.Record(ctx, s.ns, id)
	if errors.Is(err, store.ErrNotFound) {
		return rec, fmt.Errorf("session: %w: %s", ErrSnapshotNotFound, id)
	}
	if err != nil {
		return rec, fmt.Errorf("session: loading snapshot %s: %w", id, damaged(err))
	}
	return rec, nil
}

// GetSnapshot implements SnapshotStore. Every piece read is checked against its hash.
// A pending snapshot whose detached turn has settled reads as settled: its own ID,
// parent and turn, with the outcome's status and state.
func (s *snapshotStore[State]) GetSnapshot(ctx context.Context, id string) (*SessionSnapshot[State], error) {
	rec, err := s.record(ctx, id)
	if err != nil {
		return nil, err
	}
	snap, k, err := s.decode(ctx, rec)
	if err != nil {
		return nil, err
	}
	// A loaded snapshot is usually loaded to be resumed: remember it for the save.
	s.recent.Add(snap.SnapshotID, k)
	return snap, nil
}

// decode reads a stored snapshot, verifying every piece, and returns what saving a
// child of it needs.
func (s *snapshotStore[State]) decode(ctx context.Context, rec store.Record) (*SessionSnapshot[State], *known, error) {
	id := rec.ID
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("session: %w: snapshot %s: %s", ErrSnapshotCorrupt, id, fmt.Sprintf(format, args...))
	}
	if digest(rec.Data) != id {
		return nil, nil, corrupt("its record does not hash to its ID")
	}
	var r snapshotRecord
	if err := json.Unmarshal(rec.Data, &r); err != nil {
		return nil, nil, corrupt("record: %v", err)
	}
	if r.V < 1 || r.V > snapshotFormat {
		return nil, nil, corrupt("stored in format %d; this version reads formats 1 to %d", r.V, snapshotFormat)
	}
	blob := func(what, d string) ([]byte, error) {
		data, err := s.st.Blob(ctx, s.ns, d)
		if errors.Is(err, store.ErrNotFound) {
			return nil, corrupt("%s (blob %s) is missing", what, d)
		}
		if err != nil {
			return nil, fmt.Errorf("session: loading snapshot %s: %s: %w", id, what, damaged(err))
		}
		if digest(data) != d {
			return nil, corrupt("%s (blob %s) does not match its hash", what, d)
		}
		return data, nil
	}
	snap := &SessionSnapshot[State]{
		SnapshotID:   id,
		SessionID:    r.SessionID,
		ParentID:     r.ParentID,
		Branch:       r.Branch,
		CreatedAt:    r.CreatedAt,
		TurnIndex:    r.TurnIndex,
		Event:        r.Event,
		Status:       r.Status,
		FinishReason: r.FinishReason,
	}
	var err error
	if snap.Error, err = turnError(r.V, r.Error); err != nil {
		return nil, nil, corrupt("error: %v", err)
	}
	root := r.State
	if rec.Outcome != nil {
		var o outcomeRecord
		if err := json.Unmarshal(rec.Outcome, &o); err != nil {
			return nil, nil, corrupt("outcome: %v", err)
		}
		switch {
		case o.SnapshotID != id:
			return nil, nil, corrupt("its outcome names snapshot %s", o.SnapshotID)
		case o.V < 3 || o.V > snapshotFormat:
			return nil, nil, corrupt("outcome stored in format %d; this version reads formats 3 to %d", o.V, snapshotFormat)
		case r.Status != StatusPending || (o.Status != StatusCompleted && o.Status != StatusFailed && o.Status != StatusAborted):
			return nil, nil, corrupt("a %s snapshot settled as %q", statusOf(snap), o.Status)
		}
		snap.Status, snap.FinishReason, snap.Error, snap.UpdatedAt, root = o.Status, o.FinishReason, o.Error, o.UpdatedAt, o.State
	}
	snap.State.SessionID = r.SessionID

	// Walk the message chain from its head back to the first segment.
	var chain *segRef
	if m := root.Messages; m != nil {
		var segs []*loaded
		var refs []string
		for d := m.Head; d != ""; {
			l, ok := s.segments.Get(d)
			if !ok {
				data, err := blob("messages", d)
				if err != nil {
					return nil, nil, err
				}
				seg := &segment{}
				if err := json.Unmarshal(data, seg); err != nil {
					return nil, nil, corrupt("message segment %s: %v", d, err)
				}
				again, err := seg.appendJSON(make([]byte, 0, len(data)))
				l = &loaded{seg: seg, size: len(data), canonical: err == nil && bytes.Equal(again, data)}
				s.segments.Add(d, l)
			}
			segs = append(segs, l)
			refs = append(refs, d)
			d = l.seg.Prev
			if len(segs) > m.Count+1 {
				return nil, nil, corrupt("message chain longer than its %d messages", m.Count)
			}
		}
		msgs := make([]*abi.Message, 0, m.Count)
		size := 0
		for i, l := range slices.Backward(segs) {
			if l.seg.Start != len(msgs) {
				return nil, nil, corrupt("message segment %s starts at %d, after %d messages", refs[i], l.seg.Start, len(msgs))
			}
			msgs = append(msgs, l.seg.Messages...)
			size += l.size
			chain = &segRef{digest: refs[i], end: len(msgs), size: size, prev: chain}
			if l.canonical {
				chain.msgs = l.seg.Messages
			}
		}
		if len(msgs) != m.Count {
			return nil, nil, corrupt("holds %d messages, its record says %d", len(msgs), m.Count)
		}
		snap.State.Messages = msgs
	}
	if root.Custom != "" {
		data, err := blob("custom state", root.Custom)
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(data, &snap.State.Custom); err != nil {
			return nil, nil, corrupt("custom state does not decode into %T: %v", snap.State.Custom, err)
		}
	}
	for _, d := range root.Artifacts {
		data, err := blob("artifact", d)
		if err != nil {
			return nil, nil, err
		}
		var a abi.Artifact
		if err := json.Unmarshal(data, &a); err != nil {
			return nil, nil, corrupt("artifact %s: %v", d, err)
		}
		snap.State.Artifacts = append(snap.State.Artifacts, &a)
	}
	if root.PromptInput != "" {
		data, err := blob("prompt input", root.PromptInput)
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(data, &snap.State.PromptInput); err != nil {
			return nil, nil, corrupt("prompt input: %v", err)
		}
	}
	return snap, &known{chain: chain, root: root}, nil
}

// turnError decodes a record's error: a TurnError from format 3, an abi.Error (its
// code and message) from format 2.
func turnError(format int, raw json.RawMessage) (*TurnError, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if format >= 3 {
		var te TurnError
		err := json.Unmarshal(raw, &te)
		return &te, err
	}
	var e abi.Error
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, err
	}
	return &TurnError{Message: e.Message, Code: e.Code, Status: genkitStatus(e.Code)}, nil
}

// ListSnapshots implements SnapshotStore. A detached turn shows as its snapshot, pending
// or settled.
func (s *snapshotStore[State]) ListSnapshots(ctx context.Context, sessionID string) ([]*SessionSnapshot[State], error) {
	recs, err := s.st.Records(ctx, s.ns, sessionID)
	if err != nil {
		return nil, fmt.Errorf("session: listing the snapshots of session %s: %w", sessionID, damaged(err))
	}
	out := make([]*SessionSnapshot[State], 0, len(recs))
	for _, rec := range recs {
		snap, _, err := s.decode(ctx, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, snap)
	}
	return out, nil
}

// LatestSnapshot implements SnapshotStore: the session's head, its last snapshot.
func (s *snapshotStore[State]) LatestSnapshot(ctx context.Context, sessionID string) (*SessionSnapshot[State], error) {
	rec, err := s.st.Head(ctx, s.ns, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("session: %w: session %s has none", ErrSnapshotNotFound, sessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("session: loading the latest snapshot of session %s: %w", sessionID, damaged(err))
	}
	snap, k, err := s.decode(ctx, rec)
	if err != nil {
		return nil, err
	}
	s.recent.Add(snap.SnapshotID, k)
	return snap, nil
}
