// Package badgerstore is the embedded on-disk store.Store, built on Badger: one
// directory, no server, and durable commits (a commit that returned survives the process
// being killed).
//
// # Key layout
//
// Every key starts with a one-byte kind, then the namespace as a uvarint length and its
// bytes. Uvarints are prefix-free, so the prefix of one namespace is never a prefix of
// another's ("a" and "ab" included) and no scan or lookup can cross namespaces.
//
//	b ns key                      -> blob data
//	r ns id                       -> record: version, session, parent, flags, turn, seq, data
//	i ns session turn seq         -> record id (the turn index)
//	l ns session                  -> seq of the session's last commit (its head), then its record id
//	c ns session parent           -> the non-branch record that continued parent
//
// In the index key the session is length-prefixed too, since the turn follows it; turn
// and seq are 8-byte big-endian, the turn with its sign bit flipped, so byte order is
// (turn, commit) order with negative turns first. seq counts a session's commits; it is
// read and bumped from the "l" key inside the committing transaction, so two commits to
// one session conflict and one of them retries with the next seq.
//
// # Damage
//
// A damaged store fails with an error wrapping store.ErrCorrupt, from Open or from the
// read, rather than panic, return other data, or roll back: Open verifies every table
// (verify.go) and that no acknowledged commit was cut from Badger's write-ahead log
// (WitnessFile); reads check checksums. docs/architecture.md says what is and is not
// detected.
package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/terrarium-ai/terrarium/store"
)

// Key kinds: the first byte of every key.
const (
	kindBlob   = 'b'
	kindRecord = 'r'
	kindIndex  = 'i'
	kindLatest = 'l'
	kindLine   = 'c'
	// kindOutcome keys what Settle recorded for a record, beside the record, which is
	// written once.
	kindOutcome = 'o'
)

// recordVersion is the first byte of an encoded record, so the encoding can change
// without guessing what an old value holds.
const recordVersion = 2

// valueThreshold is the size from which Badger keeps a value in its value log rather
// than in the LSM tree next to the key. Badger's default (1 MiB) counts every smaller
// value in full against a transaction's size limit (about 10 MiB with the default
// memtable), so a snapshot with a few dozen medium blobs could not be committed at all.
// Above the threshold only a pointer counts, and the value log suits blobs: they are
// written once and never overwritten, so it accumulates no garbage to collect.
const valueThreshold = 64 << 10

// maxCommitAttempts bounds the retries of a commit that keeps losing conflicts to other
// commits to the same session. Each lost attempt means another commit landed, so this
// many attempts only fail under sustained contention on a single session.
const maxCommitAttempts = 100

// Store is a store.Store kept in a Badger database. It is safe for concurrent use.
type Store struct {
	// mu is held shared by every call for its whole duration and exclusively by Close,
	// so Close waits for calls in flight and Badger is never used after it is closed.
	mu      sync.RWMutex
	closed  bool
	db      *badger.DB
	witness *witness
	logger  *slog.Logger
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.SessionLister = (*Store)(nil)
	_ store.PrefixFinder  = (*Store)(nil)
)

// Option configures Open.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	logger    *slog.Logger
	loggerSet bool
}

// WithLogger sends Badger's log lines, at every level, to l; l's handler decides what
// to keep. A nil l discards them. Without this option only Badger's warnings and errors
// are logged, to slog.Default(): its info lines (tables opened, files replayed) are noise
// to a host that embeds it.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		c.logger = l
		c.loggerSet = true
	})
}

// Open opens the store in dir, creating it if needed. Badger locks the directory, so
// only one process (and one Store) can have it open at a time.
//
// Open verifies every table's checksums and that no acknowledged commit is missing
// (see WitnessFile); damage is an error wrapping store.ErrCorrupt. Verifying reads the
// whole store, so Open takes longer as the store grows.
func Open(dir string, opts ...Option) (*Store, error) {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if dir == "" {
		return nil, fmt.Errorf("badgerstore: open: empty directory: %w", store.ErrInvalid)
	}
	// Without SyncWrites a commit is only in the OS page cache when it returns and can
	// be lost with the machine; the store's contract is that it is durable. Checksums
	// are verified on every block read from a table (a block that fails reads as
	// absent, which Open's verification of every table makes rare: see verifyTables)
	// and on every value read from the value log.
	bo := badger.DefaultOptions(dir).WithValueThreshold(valueThreshold).WithSyncWrites(true).
		WithChecksumVerificationMode(options.OnBlockRead).WithVerifyValueChecksum(true)
	logger := slog.Default()
	switch {
	case !c.loggerSet:
		bo = bo.WithLogger(slogLogger{min: slog.LevelWarn})
	case c.logger == nil:
		logger = slog.New(slog.DiscardHandler)
		bo = bo.WithLogger(nil)
	default:
		logger = c.logger
		bo = bo.WithLogger(slogLogger{l: c.logger, min: slog.LevelDebug})
	}
	db, err := open(bo)
	if err != nil {
		return nil, fmt.Errorf("badgerstore: open %q: %w", dir, err)
	}
	w, err := openWitness(dir, db.MaxVersion())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("badgerstore: open %q: %w", dir, err)
	}
	return &Store{db: db, witness: w, logger: logger}, nil
}

// open verifies the tables in bo.Dir, then opens Badger there.
func open(bo badger.Options) (*badger.DB, error) {
	if err := os.MkdirAll(bo.Dir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := lockDir(bo.Dir)
	if err != nil {
		return nil, err
	}
	err = verifyTables(bo.Dir, bo)
	unlock()
	if err != nil {
		return nil, err
	}
	return badger.Open(bo)
}

// recoverDamage turns a panic of Badger's into an error wrapping store.ErrCorrupt. It
// panics on damaged files (a block's entry count pointing outside the block); the
// damage is the caller's to report, not a reason to stop the process. The stack goes
// to the log, in case the panic was a bug rather than damage.
func recoverDamage(err *error, logger *slog.Logger) {
	if r := recover(); r != nil {
		logger.Error("badgerstore: recovered from a panic reading the store", "panic", r, "stack", string(debug.Stack()))
		*err = fmt.Errorf("%w: badger panicked reading it: %v", store.ErrCorrupt, r)
	}
}

// view runs fn in a read transaction. Badger reads memory-mapped files, so a read
// fails only when what it finds does not decode: whatever error fn returns other than
// the store's own and the context's is damage.
func (s *Store) view(fn func(txn *badger.Txn) error) (err error) {
	defer recoverDamage(&err, s.logger)
	err = s.db.View(fn)
	switch {
	case err == nil, errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrCorrupt),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrCorrupt, err)
}

// enter starts a call: it holds the store open until the returned release is called.
func (s *Store) enter() (release func(), err error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// Commit implements store.Store. It is a single Badger transaction: the record, its
// index entries and the new blobs are written together or not at all.
func (s *Store) Commit(ctx context.Context, ns string, rec store.Record, blobs []store.Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckCommit(ns, rec, blobs); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return fmt.Errorf("commit record %q: %w", rec.ID, err)
	}
	defer release()
	for attempt := 1; ; attempt++ {
		err := s.update(ns, rec, blobs)
		var conflict *store.ConflictError
		switch {
		case err == nil:
			// Durable in Badger now; acknowledged once the witness says so.
			if err := s.witnessCommit(recordKey(ns, rec.ID)); err != nil {
				return fmt.Errorf("commit record %q in namespace %q: %w", rec.ID, ns, err)
			}
			return nil
		case errors.Is(err, errStored):
			return nil
		case errors.As(err, &conflict):
			return err
		case !errors.Is(err, badger.ErrConflict):
			return fmt.Errorf("commit record %q in namespace %q: %w", rec.ID, ns, err)
		}
		if attempt == maxCommitAttempts {
			return fmt.Errorf("commit record %q in namespace %q: gave up after %d conflicting attempts: %w", rec.ID, ns, attempt, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// The winners of a conflict have already landed, so retrying at once would
		// succeed; the jitter only keeps a crowd of losers from colliding again.
		time.Sleep(rand.N(time.Duration(attempt) * 20 * time.Microsecond))
	}
}

// update runs one attempt at a commit.
func (s *Store) update(ns string, rec store.Record, blobs []store.Blob) (err error) {
	defer recoverDamage(&err, s.logger)
	return s.db.Update(func(txn *badger.Txn) error { return commitTxn(txn, ns, rec, blobs) })
}

// witnessCommit records the commit that wrote the record key rk in the witness. Its
// version is the record's: a record is written once, by its commit alone.
func (s *Store) witnessCommit(rk []byte) error {
	var version uint64
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(rk)
		if err != nil {
			return err
		}
		version = item.Version()
		return nil
	})
	if err != nil {
		return err
	}
	return s.witness.advance(version)
}

// errStored is commitTxn's answer when the record is already stored: the commit is a
// no-op, and the transaction must write nothing.
var errStored = errors.New("record already stored")

func commitTxn(txn *badger.Txn, ns string, rec store.Record, blobs []store.Blob) error {
	rk := recordKey(ns, rec.ID)
	switch found, err := exists(txn, rk); {
	case err != nil:
		return err
	case found:
		return errStored
	}
	lk := latestKey(ns, rec.Session)
	var seq uint64
	var head string
	switch item, err := txn.Get(lk); {
	case err == nil:
		v, err := valueOf(item)
		if err != nil {
			return err
		}
		if seq, head, err = decodeLatest(v); err != nil {
			return fmt.Errorf("session %q: %w", rec.Session, err)
		}
	case !errors.Is(err, badger.ErrKeyNotFound):
		return err
	}
	seq++
	if !rec.Branch {
		// Reading the line key makes two commits continuing one parent conflict in
		// Badger, so the loser retries and then finds the winner's key.
		ck := lineKey(ns, rec.Session, rec.Parent)
		switch item, err := txn.Get(ck); {
		case err == nil:
			cont, err := valueOf(item)
			if err != nil {
				return err
			}
			return &store.ConflictError{Session: rec.Session, Parent: rec.Parent, Continued: string(cont), Head: head}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		if err := txn.Set(ck, []byte(rec.ID)); err != nil {
			return err
		}
	}
	if err := setBlobs(txn, ns, blobs); err != nil {
		return err
	}
	if err := txn.Set(rk, encodeRecord(rec, seq)); err != nil {
		return err
	}
	if err := txn.Set(indexKey(ns, rec.Session, int64(rec.Turn), seq), []byte(rec.ID)); err != nil {
		return err
	}
	return txn.Set(lk, encodeLatest(seq, rec.ID))
}

// Settle implements store.Store. It is a single Badger transaction: the outcome and
// the new blobs are written together or not at all, and acknowledged once the witness
// holds the outcome's version.
func (s *Store) Settle(ctx context.Context, ns, id string, outcome []byte, blobs []store.Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckSettle(ns, id, outcome, blobs); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return fmt.Errorf("settle record %q: %w", id, err)
	}
	defer release()
	for attempt := 1; ; attempt++ {
		err := s.settle(ns, id, outcome, blobs)
		switch {
		case err == nil:
			if err := s.witnessCommit(outcomeKey(ns, id)); err != nil {
				return fmt.Errorf("settle record %q in namespace %q: %w", id, ns, err)
			}
			return nil
		case errors.Is(err, errStored):
			return nil
		case !errors.Is(err, badger.ErrConflict):
			return fmt.Errorf("settle record %q in namespace %q: %w", id, ns, err)
		}
		// Another settle of the record landed meanwhile: the next attempt finds it.
		if attempt == maxCommitAttempts {
			return fmt.Errorf("settle record %q in namespace %q: gave up after %d conflicting attempts: %w", id, ns, attempt, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// settle runs one attempt at a settle.
func (s *Store) settle(ns, id string, outcome []byte, blobs []store.Blob) (err error) {
	defer recoverDamage(&err, s.logger)
	return s.db.Update(func(txn *badger.Txn) error {
		switch found, err := exists(txn, recordKey(ns, id)); {
		case err != nil:
			return err
		case !found:
			return store.ErrNotFound
		}
		// Reading the outcome key makes two settles of one record conflict in Badger,
		// so the loser retries and then finds the winner's outcome.
		ok := outcomeKey(ns, id)
		switch item, err := txn.Get(ok); {
		case err == nil:
			prev, err := valueOf(item)
			if err != nil {
				return err
			}
			if bytes.Equal(prev, outcome) {
				return errStored
			}
			return fmt.Errorf("%w: it was settled already", store.ErrConflict)
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		if err := setBlobs(txn, ns, blobs); err != nil {
			return err
		}
		return txn.Set(ok, outcome)
	})
}

// setBlobs writes the blobs not stored yet. Reading a blob key before writing it makes
// concurrent transactions writing the same blob conflict, so it is written once; txn
// also sees its own writes, so a key repeated within blobs keeps its first data, as in
// the memory store.
func setBlobs(txn *badger.Txn, ns string, blobs []store.Blob) error {
	for _, b := range blobs {
		bk := blobKey(ns, b.Key)
		found, err := exists(txn, bk)
		if err != nil {
			return err
		}
		if !found {
			if err := txn.Set(bk, b.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// valueOf copies an item's value. Badger logs a value it cannot read from the value
// log (a failed checksum, a pointer past the log's end) and returns it empty, without
// an error: an empty value where the item's size says otherwise is that damage.
func valueOf(item *badger.Item) ([]byte, error) {
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 && item.ValueSize() > 0 {
		return nil, fmt.Errorf("%w: a value of %d bytes cannot be read from the value log", store.ErrCorrupt, item.ValueSize())
	}
	return v, nil
}

func exists(txn *badger.Txn, key []byte) (bool, error) {
	_, err := txn.Get(key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	default:
		return false, err
	}
}

// Record implements store.Store.
func (s *Store) Record(ctx context.Context, ns, id string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckNamed("namespace", ns, "record ID", id); err != nil {
		return store.Record{}, fmt.Errorf("record: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return store.Record{}, fmt.Errorf("record %q: %w", id, err)
	}
	defer release()
	var rec store.Record
	err = s.view(func(txn *badger.Txn) error {
		var err error
		rec, err = getRecord(txn, ns, id)
		return err
	})
	if err != nil {
		return store.Record{}, fmt.Errorf("record %q in namespace %q: %w", id, ns, err)
	}
	return rec, nil
}

// getRecord reads one record. Its errors leave naming the record to the caller.
func getRecord(txn *badger.Txn, ns, id string) (store.Record, error) {
	item, err := txn.Get(recordKey(ns, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return store.Record{}, store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, err
	}
	v, err := valueOf(item)
	if err != nil {
		return store.Record{}, err
	}
	rec, _, err := decodeRecord(v)
	if err != nil {
		return store.Record{}, err
	}
	rec.ID = id
	switch item, err := txn.Get(outcomeKey(ns, id)); {
	case err == nil:
		if rec.Outcome, err = valueOf(item); err != nil {
			return store.Record{}, err
		}
		if len(rec.Outcome) == 0 {
			return store.Record{}, fmt.Errorf("%w: record %q has an empty outcome", store.ErrCorrupt, id)
		}
	case !errors.Is(err, badger.ErrKeyNotFound):
		return store.Record{}, err
	}
	return rec, nil
}

// Records implements store.Store.
func (s *Store) Records(ctx context.Context, ns, session string) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckNamed("namespace", ns, "session", session); err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return nil, fmt.Errorf("records of session %q: %w", session, err)
	}
	defer release()
	out := []store.Record{}
	err = s.view(func(txn *badger.Txn) error {
		ids, err := sessionIDs(txn, ns, session)
		if err != nil {
			return err
		}
		for i, id := range ids {
			if i%256 == 255 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			rec, err := getRecord(txn, ns, id)
			if errors.Is(err, store.ErrNotFound) {
				// The database is damaged, which must not read as "no such session".
				return fmt.Errorf("%w: turn index names missing record %q", store.ErrCorrupt, id)
			}
			if err != nil {
				return fmt.Errorf("record %q: %w", id, err)
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("records of session %q in namespace %q: %w", session, ns, err)
	}
	return out, nil
}

// sessionIDs returns the IDs the turn index lists for a session, in order. Collecting
// them before looking the records up keeps point reads out of the scan.
func sessionIDs(txn *badger.Txn, ns, session string) ([]string, error) {
	var ids []string
	prefix := indexPrefix(ns, session)
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	// Deferred, so that the iterator is closed even when Badger panics on damage:
	// Badger panics again if a transaction ends with an iterator open.
	defer it.Close()
	for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
		v, err := valueOf(it.Item())
		if err != nil {
			return nil, err
		}
		ids = append(ids, string(v))
	}
	return ids, nil
}

// Head implements store.Store.
func (s *Store) Head(ctx context.Context, ns, session string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckNamed("namespace", ns, "session", session); err != nil {
		return store.Record{}, fmt.Errorf("head: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return store.Record{}, fmt.Errorf("head of session %q: %w", session, err)
	}
	defer release()
	var rec store.Record
	err = s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(latestKey(ns, session))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		v, err := valueOf(item)
		if err != nil {
			return err
		}
		_, id, err := decodeLatest(v)
		if err != nil {
			return err
		}
		rec, err = getRecord(txn, ns, id)
		if errors.Is(err, store.ErrNotFound) {
			// The database is damaged, which must not read as "no such session".
			return fmt.Errorf("%w: names missing record %q", store.ErrCorrupt, id)
		}
		if err != nil {
			return fmt.Errorf("record %q: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return store.Record{}, fmt.Errorf("head of session %q in namespace %q: %w", session, ns, err)
	}
	return rec, nil
}

// Sessions implements store.SessionLister. Each session has one head key, so this
// reads keys only, one per session.
func (s *Store) Sessions(ctx context.Context, ns string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckNamed("namespace", ns); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return nil, fmt.Errorf("sessions of namespace %q: %w", ns, err)
	}
	defer release()
	out := []string{}
	err = s.view(func(txn *badger.Txn) error {
		prefix := nsPrefix(kindLatest, ns, 0)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			out = append(out, string(it.Item().Key()[len(prefix):]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sessions of namespace %q: %w", ns, err)
	}
	return out, nil
}

// RecordIDs implements store.PrefixFinder: records are keyed by ID, so this reads the
// keys of the matching records only.
func (s *Store) RecordIDs(ctx context.Context, ns, prefix string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckPrefixQuery(ns, prefix, limit); err != nil {
		return nil, fmt.Errorf("records by prefix: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return nil, fmt.Errorf("records beginning %q: %w", prefix, err)
	}
	defer release()
	out := []string{}
	err = s.view(func(txn *badger.Txn) error {
		keys := nsPrefix(kindRecord, ns, 0)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = recordKey(ns, prefix)
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix) && len(out) < limit; it.Next() {
			out = append(out, string(it.Item().Key()[len(keys):]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("records beginning %q in namespace %q: %w", prefix, ns, err)
	}
	return out, nil
}

// Blob implements store.Store.
func (s *Store) Blob(ctx context.Context, ns, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckNamed("namespace", ns, "blob key", key); err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return nil, fmt.Errorf("blob %q: %w", key, err)
	}
	defer release()
	var data []byte
	err = s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(blobKey(ns, key))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		data, err = valueOf(item)
		if data == nil {
			data = []byte{}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("blob %q in namespace %q: %w", key, ns, err)
	}
	return data, nil
}

// Stats implements store.Store. It scans every key of the namespace, so its cost grows
// with what the namespace holds; it is meant for operators, not for hot paths.
func (s *Store) Stats(ctx context.Context, ns string) (store.Stats, error) {
	if err := ctx.Err(); err != nil {
		return store.Stats{}, err
	}
	if err := store.CheckNamed("namespace", ns); err != nil {
		return store.Stats{}, fmt.Errorf("stats: %w", err)
	}
	release, err := s.enter()
	if err != nil {
		return store.Stats{}, fmt.Errorf("stats of namespace %q: %w", ns, err)
	}
	defer release()
	var st store.Stats
	err = s.view(func(txn *badger.Txn) error {
		for _, kind := range []byte{kindBlob, kindRecord, kindIndex, kindLatest, kindLine, kindOutcome} {
			n, bytes, err := measure(ctx, txn, nsPrefix(kind, ns, 0))
			if err != nil {
				return err
			}
			st.Bytes += bytes
			switch kind {
			case kindBlob:
				st.Blobs = n
			case kindRecord:
				st.Records = n
			}
		}
		return nil
	})
	if err != nil {
		return store.Stats{}, fmt.Errorf("stats of namespace %q: %w", ns, err)
	}
	return st, nil
}

// measure counts the keys under prefix and the bytes of their keys and values.
func measure(ctx context.Context, txn *badger.Txn, prefix []byte) (n int, bytes int64, err error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	// Sizes come from the key and the value's metadata; fetching blob values just to
	// measure them would read the whole namespace.
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close() // deferred: see sessionIDs
	for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		bytes += item.KeySize() + item.ValueSize()
		n++
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
		}
	}
	return n, bytes, nil
}

// Close waits for calls in flight, then closes the database, flushing it to disk.
// Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := errors.Join(s.db.Close(), s.witness.close()); err != nil {
		return fmt.Errorf("badgerstore: close: %w", err)
	}
	return nil
}

// nsPrefix returns kind and the length-prefixed namespace, with room for extra bytes.
func nsPrefix(kind byte, ns string, extra int) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(ns)+extra)
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(ns)))
	return append(b, ns...)
}

// The last component of a key needs no length prefix: everything before it is
// self-delimiting, so two keys of one kind and namespace differ exactly where their
// last components do.

func blobKey(ns, key string) []byte {
	return append(nsPrefix(kindBlob, ns, len(key)), key...)
}

func recordKey(ns, id string) []byte {
	return append(nsPrefix(kindRecord, ns, len(id)), id...)
}

func outcomeKey(ns, id string) []byte {
	return append(nsPrefix(kindOutcome, ns, len(id)), id...)
}

func latestKey(ns, session string) []byte {
	return append(nsPrefix(kindLatest, ns, len(session)), session...)
}

func lineKey(ns, session, parent string) []byte {
	b := nsPrefix(kindLine, ns, binary.MaxVarintLen64+len(session)+len(parent))
	b = binary.AppendUvarint(b, uint64(len(session)))
	b = append(b, session...)
	return append(b, parent...)
}

func indexPrefix(ns, session string) []byte {
	b := nsPrefix(kindIndex, ns, binary.MaxVarintLen64+len(session)+16)
	b = binary.AppendUvarint(b, uint64(len(session)))
	return append(b, session...)
}

func indexKey(ns, session string, turn int64, seq uint64) []byte {
	b := indexPrefix(ns, session)
	b = binary.BigEndian.AppendUint64(b, uint64(turn)^(1<<63))
	return binary.BigEndian.AppendUint64(b, seq)
}

// encodeRecord lays a record out as: version byte, uvarint session length, session,
// uvarint parent length, parent, a flags byte (1: branch), zigzag varint turn, uvarint
// seq, then the data to the end.
func encodeRecord(rec store.Record, seq uint64) []byte {
	b := make([]byte, 0, 2+4*binary.MaxVarintLen64+len(rec.Session)+len(rec.Parent)+len(rec.Data))
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, uint64(len(rec.Session)))
	b = append(b, rec.Session...)
	b = binary.AppendUvarint(b, uint64(len(rec.Parent)))
	b = append(b, rec.Parent...)
	var flags byte
	if rec.Branch {
		flags = 1
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, int64(rec.Turn))
	b = binary.AppendUvarint(b, seq)
	return append(b, rec.Data...)
}

// decodeRecord is encodeRecord's inverse. The record's Data aliases v; its ID is the
// caller's to fill in, since it lives in the key.
func decodeRecord(v []byte) (store.Record, uint64, error) {
	if len(v) == 0 || v[0] != recordVersion {
		return store.Record{}, 0, fmt.Errorf("%w: record: unknown version", store.ErrCorrupt)
	}
	v = v[1:]
	name := func(what string, min uint64) (string, error) {
		n, k := binary.Uvarint(v)
		if k <= 0 || n < min || n > store.MaxNameLen || n > uint64(len(v)-k) {
			return "", fmt.Errorf("%w: record: bad %s length", store.ErrCorrupt, what)
		}
		out := string(v[k : k+int(n)])
		v = v[k+int(n):]
		return out, nil
	}
	session, err := name("session", 1)
	if err != nil {
		return store.Record{}, 0, err
	}
	parent, err := name("parent", 0)
	if err != nil {
		return store.Record{}, 0, err
	}
	if len(v) == 0 || v[0] > 1 {
		return store.Record{}, 0, fmt.Errorf("%w: record: bad flags", store.ErrCorrupt)
	}
	branch := v[0] == 1
	v = v[1:]
	turn, k := binary.Varint(v)
	if k <= 0 || turn < math.MinInt || turn > math.MaxInt {
		return store.Record{}, 0, fmt.Errorf("%w: record: bad turn", store.ErrCorrupt)
	}
	v = v[k:]
	seq, k := binary.Uvarint(v)
	if k <= 0 {
		return store.Record{}, 0, fmt.Errorf("%w: record: bad sequence number", store.ErrCorrupt)
	}
	return store.Record{Session: session, Parent: parent, Branch: branch, Turn: int(turn), Data: v[k:]}, seq, nil
}

// encodeLatest lays out a session's "l" value: the 8-byte big-endian seq of its last
// commit, then that commit's record ID.
func encodeLatest(seq uint64, id string) []byte {
	b := make([]byte, 0, 8+len(id))
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, id...)
}

func decodeLatest(v []byte) (seq uint64, id string, err error) {
	if len(v) <= 8 || len(v) > 8+store.MaxNameLen {
		return 0, "", fmt.Errorf("%w: latest record: bad length %d", store.ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), string(v[8:]), nil
}

// slogLogger adapts slog to Badger's printf-style Logger.
type slogLogger struct {
	l   *slog.Logger // nil: slog.Default() at the time of logging
	min slog.Level
}

func (a slogLogger) Errorf(f string, v ...any)   { a.log(slog.LevelError, f, v) }
func (a slogLogger) Warningf(f string, v ...any) { a.log(slog.LevelWarn, f, v) }
func (a slogLogger) Infof(f string, v ...any)    { a.log(slog.LevelInfo, f, v) }
func (a slogLogger) Debugf(f string, v ...any)   { a.log(slog.LevelDebug, f, v) }

func (a slogLogger) log(level slog.Level, f string, v []any) {
	if level < a.min {
		return
	}
	l := a.l
	if l == nil {
		l = slog.Default()
	}
	ctx := context.Background()
	if !l.Enabled(ctx, level) {
		return
	}
	l.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(f, v...)), "component", "badger")
}
