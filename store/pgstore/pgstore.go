// Package pgstore is a store.Store kept in PostgreSQL, for hosts that share sessions:
// any number of processes on any number of machines can use one database at once.
//
// The store creates and migrates its own tables (terrarium_*) in the first schema of
// the connection's search_path; give each deployment its own schema or database with
// search_path in the URL. Several hosts may open the store at once, older and newer
// builds included: migrations take turns under an advisory lock, and a build refuses a
// schema newer than it knows.
//
// Commits are one transaction each and durable once acknowledged (the store turns
// synchronous_commit back on where it was off). Connection failures and a restarting
// server are retried with backoff, for WithRetryPeriod (30 seconds by default), and then
// reported as store.ErrUnavailable: a commit is never reported done unless it is stored.
package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/terrarium-ai/terrarium/store"
)

// Store is a store.Store in a PostgreSQL database, used through a connection pool. It
// is safe for concurrent use.
type Store struct {
	pool        *pgxpool.Pool
	logger      *slog.Logger
	retryPeriod time.Duration

	// mu is held shared by every call and exclusively by Close, so the pool is never
	// used after it is closed; done, closed first, cuts the waits of calls retrying.
	mu        sync.RWMutex
	closed    bool
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.SessionLister = (*Store)(nil)
	_ store.PrefixFinder  = (*Store)(nil)
	_ store.Pinger        = (*Store)(nil)
)

// Option configures Open.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	logger      *slog.Logger
	retryPeriod time.Duration
}

// WithLogger sends the store's log lines (retries of failed operations) to l instead
// of slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// WithRetryPeriod sets how long an operation that fails for a reason that may pass (a
// broken connection, a server restarting, a lost race with another transaction) is
// retried before it fails with store.ErrUnavailable. Zero turns retries off.
func WithRetryPeriod(d time.Duration) Option {
	return optionFunc(func(c *config) { c.retryPeriod = d })
}

// Open connects to the database at url (postgres://user:password@host:port/database?...;
// pgxpool's settings, such as pool_max_conns, may be added as parameters) and brings its
// schema up to date. The database need not be up yet: Open retries like every other
// operation.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	c := config{logger: slog.Default(), retryPeriod: 30 * time.Second}
	for _, o := range opts {
		o.apply(&c)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w: %w", store.ErrInvalid, err)
	}
	// With synchronous_commit off (in the server's settings, the role's or the URL) the
	// server acknowledges a commit before its WAL is on disk, and a crash loses it.
	// Stronger settings (remote_write, remote_apply) are kept.
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT set_config('synchronous_commit', 'on', false) WHERE current_setting('synchronous_commit') = 'off'")
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s := &Store{pool: pool, logger: c.logger, retryPeriod: c.retryPeriod, done: make(chan struct{})}
	if err := s.retry(ctx, "migrate", func(ctx context.Context) error { return migrate(ctx, pool) }); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: open: migrating the schema: %w", err)
	}
	return s, nil
}

// enter starts a call: it checks the context and the call's (label, name) pairs, then
// holds the store open until the returned release is called.
func (s *Store) enter(ctx context.Context, names ...string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckNamed(names...); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// Ping checks that the database answers, without retrying: what a readiness probe
// asks. Its errors wrap store.ErrUnavailable, or store.ErrClosed after Close.
func (s *Store) Ping(ctx context.Context) error {
	release, err := s.enter(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	defer release()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pgstore: ping: %w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// Commit implements store.Store. The record, its blobs and the session's new head are
// one transaction; it returns nil once that transaction is durably committed.
func (s *Store) Commit(ctx context.Context, ns string, rec store.Record, blobs []store.Blob) error {
	if err := store.CheckCommit(ns, rec, blobs); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	release, err := s.enter(ctx)
	if err != nil {
		return fmt.Errorf("commit record %q: %w", rec.ID, err)
	}
	defer release()
	keys, datas := blobColumns(blobs)
	err = s.retry(ctx, "commit", func(ctx context.Context) error {
		return s.commitTx(ctx, ns, rec, keys, datas)
	})
	var conflict *store.ConflictError
	if err != nil && !errors.As(err, &conflict) {
		return fmt.Errorf("commit record %q in namespace %q: %w", rec.ID, ns, err)
	}
	return err
}

// blobColumns turns blobs into the key and data arrays commitTx inserts: a key given
// twice keeps its first data, as in the other stores, and keys are sorted so that
// concurrent commits sharing blobs lock them in one order rather than deadlock.
func blobColumns(blobs []store.Blob) (keys, datas [][]byte) {
	first := make(map[string]int, len(blobs))
	for i, b := range blobs {
		if _, ok := first[b.Key]; !ok {
			first[b.Key] = i
		}
	}
	order := make([]string, 0, len(first))
	for k := range first {
		order = append(order, k)
	}
	slices.Sort(order)
	for _, k := range order {
		keys = append(keys, []byte(k))
		datas = append(datas, notNil(blobs[first[k]].Data))
	}
	return keys, datas
}

// commitTx is one attempt at a commit. It locks the session's head first: every commit
// to the session does, so they run one at a time, and each statement after the lock
// (read committed) sees everything the commits before it did. Looking for the record
// under that lock is what makes an attempt safe to repeat: if an earlier attempt
// committed and only its acknowledgement was lost, this one finds the record and
// returns nil instead of writing it twice or reporting a conflict with itself.
func (s *Store) commitTx(ctx context.Context, ns string, rec store.Record, keys, datas [][]byte) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	// Nothing is kept unless Commit runs: not even the head row a new session gets.
	defer tx.Rollback(ctx)

	nsb, session, id, parent := []byte(ns), []byte(rec.Session), []byte(rec.ID), []byte(rec.Parent)
	var (
		seq         int64
		head        []byte
		stored      bool
		continuedBy []byte // the record that continued rec.Parent, if one did
	)
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO terrarium_heads (ns, session, seq, head) VALUES ($1, $2, 0, '') ON CONFLICT DO NOTHING`, nsb, session)
	b.Queue(`SELECT seq, head FROM terrarium_heads WHERE ns = $1 AND session = $2 FOR UPDATE`, nsb, session).
		QueryRow(func(row pgx.Row) error { return row.Scan(&seq, &head) })
	b.Queue(`SELECT EXISTS (SELECT FROM terrarium_records WHERE ns = $1 AND id = $2)`, nsb, id).
		QueryRow(func(row pgx.Row) error { return row.Scan(&stored) })
	if !rec.Branch {
		b.Queue(`SELECT id FROM terrarium_records WHERE ns = $1 AND session = $2 AND sha256(parent) = sha256($3) AND parent = $3 AND NOT branch`, nsb, session, parent).
			QueryRow(func(row pgx.Row) error {
				if err := row.Scan(&continuedBy); !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				return nil
			})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if stored {
		return nil
	}
	if continuedBy != nil {
		return &store.ConflictError{Session: rec.Session, Parent: rec.Parent, Continued: string(continuedBy), Head: string(head)}
	}

	seq++
	b = &pgx.Batch{}
	if len(keys) > 0 {
		b.Queue(`INSERT INTO terrarium_blobs (ns, key, data) SELECT $1, k, d FROM unnest($2::bytea[], $3::bytea[]) AS b(k, d) ON CONFLICT DO NOTHING`, nsb, keys, datas)
	}
	b.Queue(`INSERT INTO terrarium_records (ns, id, session, parent, branch, turn, seq, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		nsb, id, session, parent, rec.Branch, int64(rec.Turn), seq, notNil(rec.Data))
	b.Queue(`UPDATE terrarium_heads SET seq = $3, head = $4 WHERE ns = $1 AND session = $2`, nsb, session, seq, id)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Settle implements store.Store: the blobs and the outcome are one transaction,
// durable once it returns nil. The outcome is set only where none is, so of two
// settles one wins; the retry of a settle whose first attempt landed finds its own
// outcome and returns nil.
func (s *Store) Settle(ctx context.Context, ns, id string, outcome []byte, blobs []store.Blob) error {
	if err := store.CheckSettle(ns, id, outcome, blobs); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	release, err := s.enter(ctx)
	if err != nil {
		return fmt.Errorf("settle record %q: %w", id, err)
	}
	defer release()
	keys, datas := blobColumns(blobs)
	err = s.retry(ctx, "settle", func(ctx context.Context) error {
		return s.settleTx(ctx, ns, id, outcome, keys, datas)
	})
	if err != nil {
		return fmt.Errorf("settle record %q in namespace %q: %w", id, ns, err)
	}
	return nil
}

// settleTx is one attempt at a settle.
func (s *Store) settleTx(ctx context.Context, ns, id string, outcome []byte, keys, datas [][]byte) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	nsb, idb := []byte(ns), []byte(id)
	// The row lock orders settles of one record: the second sees the first's outcome.
	var prev []byte
	err = tx.QueryRow(ctx, `SELECT outcome FROM terrarium_records WHERE ns = $1 AND id = $2 FOR UPDATE`, nsb, idb).Scan(&prev)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return err
	case prev != nil && bytes.Equal(prev, outcome):
		return nil
	case prev != nil:
		return fmt.Errorf("%w: it was settled already", store.ErrConflict)
	}
	b := &pgx.Batch{}
	if len(keys) > 0 {
		b.Queue(`INSERT INTO terrarium_blobs (ns, key, data) SELECT $1, k, d FROM unnest($2::bytea[], $3::bytea[]) AS b(k, d) ON CONFLICT DO NOTHING`, nsb, keys, datas)
	}
	b.Queue(`UPDATE terrarium_records SET outcome = $3 WHERE ns = $1 AND id = $2`, nsb, idb, outcome)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// notNil maps nil to empty: the columns are NOT NULL, and the store does not tell nil
// from empty data.
func notNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// recordColumns are what scanRecord reads, in its order.
const recordColumns = "r.id, r.session, r.parent, r.branch, r.turn, r.data, r.outcome"

func scanRecord(row pgx.Row) (store.Record, error) {
	var (
		id, session, parent []byte
		turn                int64
		rec                 store.Record
	)
	if err := row.Scan(&id, &session, &parent, &rec.Branch, &turn, &rec.Data, &rec.Outcome); err != nil {
		return store.Record{}, err
	}
	rec.ID, rec.Session, rec.Parent, rec.Turn = string(id), string(session), string(parent), int(turn)
	return rec, nil
}

// Record implements store.Store.
func (s *Store) Record(ctx context.Context, ns, id string) (store.Record, error) {
	release, err := s.enter(ctx, "namespace", ns, "record ID", id)
	if err != nil {
		return store.Record{}, fmt.Errorf("record %q: %w", id, err)
	}
	defer release()
	var rec store.Record
	err = s.retry(ctx, "record", func(ctx context.Context) error {
		var err error
		rec, err = scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM terrarium_records r WHERE r.ns = $1 AND r.id = $2`, []byte(ns), []byte(id)))
		return err
	})
	if err != nil {
		return store.Record{}, fmt.Errorf("record %q in namespace %q: %w", id, ns, notFound(err))
	}
	return rec, nil
}

// Records implements store.Store.
func (s *Store) Records(ctx context.Context, ns, session string) ([]store.Record, error) {
	release, err := s.enter(ctx, "namespace", ns, "session", session)
	if err != nil {
		return nil, fmt.Errorf("records of session %q: %w", session, err)
	}
	defer release()
	var out []store.Record
	err = s.retry(ctx, "records", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+` FROM terrarium_records r WHERE r.ns = $1 AND r.session = $2 ORDER BY r.turn, r.seq`, []byte(ns), []byte(session))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Record, error) { return scanRecord(row) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("records of session %q in namespace %q: %w", session, ns, err)
	}
	if out == nil {
		out = []store.Record{}
	}
	return out, nil
}

// Head implements store.Store.
func (s *Store) Head(ctx context.Context, ns, session string) (store.Record, error) {
	release, err := s.enter(ctx, "namespace", ns, "session", session)
	if err != nil {
		return store.Record{}, fmt.Errorf("head of session %q: %w", session, err)
	}
	defer release()
	var rec store.Record
	err = s.retry(ctx, "head", func(ctx context.Context) error {
		var err error
		rec, err = scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM terrarium_heads h JOIN terrarium_records r ON r.ns = h.ns AND r.id = h.head WHERE h.ns = $1 AND h.session = $2`, []byte(ns), []byte(session)))
		return err
	})
	if err != nil {
		return store.Record{}, fmt.Errorf("head of session %q in namespace %q: %w", session, ns, notFound(err))
	}
	return rec, nil
}

// RecordIDs implements store.PrefixFinder: a range of the primary key's index, from
// the prefix to the first name after every name it begins.
func (s *Store) RecordIDs(ctx context.Context, ns, prefix string, limit int) ([]string, error) {
	if err := store.CheckPrefixQuery(ns, prefix, limit); err != nil {
		return nil, fmt.Errorf("records by prefix: %w", err)
	}
	release, err := s.enter(ctx)
	if err != nil {
		return nil, fmt.Errorf("records beginning %q: %w", prefix, err)
	}
	defer release()
	query := `SELECT id FROM terrarium_records WHERE ns = $1 AND id >= $2 ORDER BY id LIMIT $3`
	args := []any{[]byte(ns), []byte(prefix), limit}
	if end := prefixEnd([]byte(prefix)); end != nil {
		query = `SELECT id FROM terrarium_records WHERE ns = $1 AND id >= $2 AND id < $4 ORDER BY id LIMIT $3`
		args = append(args, end)
	}
	var out []string
	err = s.retry(ctx, "records by prefix", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
			var id []byte
			err := row.Scan(&id)
			return string(id), err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("records beginning %q in namespace %q: %w", prefix, ns, err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// prefixEnd returns the least name greater than every name that begins with prefix,
// or nil when there is none (prefix is all 0xff bytes).
func prefixEnd(prefix []byte) []byte {
	end := slices.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Sessions implements store.SessionLister: the sessions with a head, sorted byte by
// byte (bytea order).
func (s *Store) Sessions(ctx context.Context, ns string) ([]string, error) {
	release, err := s.enter(ctx, "namespace", ns)
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	defer release()
	var out []string
	err = s.retry(ctx, "sessions", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT session FROM terrarium_heads WHERE ns = $1 ORDER BY session`, []byte(ns))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
			var session []byte
			err := row.Scan(&session)
			return string(session), err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sessions of namespace %q: %w", ns, err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// Blob implements store.Store.
func (s *Store) Blob(ctx context.Context, ns, key string) ([]byte, error) {
	release, err := s.enter(ctx, "namespace", ns, "blob key", key)
	if err != nil {
		return nil, fmt.Errorf("blob %q: %w", key, err)
	}
	defer release()
	var data []byte
	err = s.retry(ctx, "blob", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT data FROM terrarium_blobs WHERE ns = $1 AND key = $2`, []byte(ns), []byte(key)).Scan(&data)
	})
	if err != nil {
		return nil, fmt.Errorf("blob %q in namespace %q: %w", key, ns, notFound(err))
	}
	return data, nil
}

// Stats implements store.Store. Bytes counts names and data as stored (before
// PostgreSQL's compression), plus 16 bytes per record and 8 per session for turn and
// commit counters; not PostgreSQL's own overhead or indexes.
func (s *Store) Stats(ctx context.Context, ns string) (store.Stats, error) {
	release, err := s.enter(ctx, "namespace", ns)
	if err != nil {
		return store.Stats{}, fmt.Errorf("stats of namespace %q: %w", ns, err)
	}
	defer release()
	var st store.Stats
	err = s.retry(ctx, "stats", func(ctx context.Context) error {
		// octet_length reads a stored value's size without fetching the value.
		return s.pool.QueryRow(ctx, `
SELECT r.n, b.n, r.bytes + b.bytes + h.bytes
FROM (SELECT count(*) AS n,
             coalesce(sum(octet_length(id) + octet_length(session) + octet_length(parent) + 16 + octet_length(data) + coalesce(octet_length(outcome), 0)), 0) AS bytes
      FROM terrarium_records WHERE ns = $1) r,
     (SELECT count(*) AS n, coalesce(sum(octet_length(key) + octet_length(data)), 0) AS bytes
      FROM terrarium_blobs WHERE ns = $1) b,
     (SELECT coalesce(sum(octet_length(session) + 8 + octet_length(head)), 0) AS bytes
      FROM terrarium_heads WHERE ns = $1) h`, []byte(ns)).Scan(&st.Records, &st.Blobs, &st.Bytes)
	})
	if err != nil {
		return store.Stats{}, fmt.Errorf("stats of namespace %q: %w", ns, err)
	}
	return st, nil
}

// DiskSize returns the bytes the store's tables take in the database, all namespaces
// together: rows, indexes and TOAST, as pg_total_relation_size counts them.
func (s *Store) DiskSize(ctx context.Context) (int64, error) {
	release, err := s.enter(ctx)
	if err != nil {
		return 0, fmt.Errorf("disk size: %w", err)
	}
	defer release()
	var n int64
	err = s.retry(ctx, "disk size", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'terrarium\_%'`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("disk size: %w", err)
	}
	return n, nil
}

// Close stops retries in progress, waits for calls in flight, and closes the pool.
// Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.pool.Close()
	}
	return nil
}

// notFound maps "no rows" to store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}
