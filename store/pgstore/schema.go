package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions: migrations[i] takes it from version i to i+1.
// They are append-only: a released migration is never edited, a change is a new one.
//
// Names are bytea, not text: a namespace, session, record ID or blob key may hold any
// bytes, NUL and invalid UTF-8 included, which text columns refuse.
var migrations = []string{
	// 1: blobs, records, and each session's head.
	`
CREATE TABLE terrarium_blobs (
	ns   bytea NOT NULL,
	key  bytea NOT NULL,
	data bytea NOT NULL,
	PRIMARY KEY (ns, key)
);

CREATE TABLE terrarium_records (
	ns      bytea   NOT NULL,
	id      bytea   NOT NULL,
	session bytea   NOT NULL,
	parent  bytea   NOT NULL,
	branch  boolean NOT NULL,
	turn    bigint  NOT NULL,
	seq     bigint  NOT NULL, -- the session's commit counter when it was committed
	data    bytea   NOT NULL,
	PRIMARY KEY (ns, id)
);

-- Records lists a session by turn, then commit.
CREATE INDEX terrarium_records_turns ON terrarium_records (ns, session, turn, seq);

-- The line rule: one non-branch record per parent. The parent is indexed by its hash,
-- since three names of up to 1 KiB each exceed what a B-tree entry may hold.
CREATE UNIQUE INDEX terrarium_records_lines ON terrarium_records (ns, session, sha256(parent))
	WHERE NOT branch;

-- A session's head and commit counter. Commits to a session lock its row, which orders
-- them: the counter is commit order, and the head is the last commit.
CREATE TABLE terrarium_heads (
	ns      bytea  NOT NULL,
	session bytea  NOT NULL,
	seq     bigint NOT NULL,
	head    bytea  NOT NULL,
	PRIMARY KEY (ns, session)
);
`,
	// 2: what Settle records for a record after its commit (NULL until then).
	`
ALTER TABLE terrarium_records ADD COLUMN outcome bytea;
`,
}

// migrationLock is the advisory lock that hosts opening the store take in turn, so
// that each migration runs once and no host sees another's half done. The number is
// arbitrary; it only has to differ from other applications' advisory locks.
const migrationLock int64 = 0x7465_7272_6172_6d31

// migrate brings the schema to the newest version, in one transaction.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	// Transaction-scoped, so a host that dies mid-migration releases it with its
	// connection, and the migration it ran is rolled back.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS terrarium_schema (
	version    integer PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`)
	if err != nil {
		return err
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM terrarium_schema").Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("the database's schema is at version %d, newer than the %d this build knows: upgrade Terrarium", version, len(migrations))
	}
	for v := version + 1; v <= len(migrations); v++ {
		if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO terrarium_schema (version) VALUES ($1)", v); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return tx.Commit(ctx)
}
