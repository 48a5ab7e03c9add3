package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
	"github.com/terrarium-ai/terrarium/store/storetest"
)

func open(t testing.TB, url string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgtest.URL(t)) })
}

// Three names of the longest length, in one B-tree entry, would exceed what PostgreSQL
// lets an index entry hold; the line index holds the parent's hash instead.
func TestLongNamesContinueALine(t *testing.T) {
	s := open(t, pgtest.URL(t))
	defer s.Close()
	long := func(c string) string { return strings.Repeat(c, store.MaxNameLen) }
	ns, session := long("n"), long("s")
	first := store.Record{ID: long("a"), Session: session}
	second := store.Record{ID: long("b"), Session: session, Parent: first.ID, Turn: 1}
	for _, r := range []store.Record{first, second} {
		if err := s.Commit(t.Context(), ns, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	rival := store.Record{ID: long("c"), Session: session, Parent: first.ID, Turn: 1}
	var conflict *store.ConflictError
	if err := s.Commit(t.Context(), ns, rival, nil); !errors.As(err, &conflict) || conflict.Continued != second.ID {
		t.Fatalf("second continuation of a long-named parent: %v", err)
	}
}

func TestReopen(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	r := store.Record{ID: "r", Session: "s", Data: []byte("data")}
	if err := s.Commit(t.Context(), "ns", r, []store.Blob{{Key: "k", Data: []byte("blob")}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, url)
	defer s.Close()
	if got, err := s.Head(t.Context(), "ns", "s"); err != nil || string(got.Data) != "data" {
		t.Fatalf("Head after reopening = %+v, %v", got, err)
	}
	if got, err := s.Blob(t.Context(), "ns", "k"); err != nil || string(got) != "blob" {
		t.Fatalf("Blob after reopening = %q, %v", got, err)
	}
	checkSchemaVersions(t, s)
}

// checkSchemaVersions checks that each migration was applied exactly once.
func checkSchemaVersions(t *testing.T, s *Store) {
	t.Helper()
	var n, top int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*), max(version) FROM terrarium_schema").Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations) || top != len(migrations) {
		t.Fatalf("terrarium_schema holds %d versions up to %d, want %d", n, top, len(migrations))
	}
}

// Hosts of a fleet start together and each opens the store on the same, empty schema.
func TestConcurrentOpen(t *testing.T) {
	url := pgtest.URL(t)
	const hosts = 8
	stores := make([]*Store, hosts)
	errs := make([]error, hosts)
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), url, WithRetryPeriod(0)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("host %d: Open: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	checkSchemaVersions(t, stores[0])
}

// A database migrated by a newer build is refused, not misread.
func TestSchemaNewerThanBuild(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	if _, err := s.pool.Exec(t.Context(), "INSERT INTO terrarium_schema (version) VALUES ($1)", len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(t.Context(), url)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded on a schema newer than the build")
	}
	if want := fmt.Sprintf("version %d", len(migrations)+1); !strings.Contains(err.Error(), want) {
		t.Fatalf("Open error %q does not name the schema's %s", err, want)
	}
}

// A commit is durable when acknowledged even if the URL (or the server, or the role)
// turned synchronous_commit off.
func TestSynchronousCommitStaysOn(t *testing.T) {
	s := open(t, pgtest.URL(t)+"&synchronous_commit=off")
	defer s.Close()
	var setting string
	if err := s.pool.QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "on" {
		t.Fatalf("synchronous_commit = %q on the store's connections, want on", setting)
	}
}

func TestInvalidURL(t *testing.T) {
	if _, err := Open(t.Context(), "postgres://%zz"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open of a malformed URL = %v, want ErrInvalid", err)
	}
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, false},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), false},
		{errors.New("cannot encode"), false},
		{fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "23505"}, true},
		{&pgconn.PgError{Code: "42P01"}, false},
		{&pgconn.PgError{Code: "22P02"}, false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// DiskSize counts the store's own tables: what a commit adds, and not the tables of
// another deployment's schema.
func TestDiskSize(t *testing.T) {
	s := open(t, pgtest.URL(t))
	defer s.Close()
	other := open(t, pgtest.URL(t))
	defer other.Close()
	before, err := s.DiskSize(t.Context())
	if err != nil || before <= 0 {
		t.Fatalf("DiskSize of an empty store = %d, %v; want the empty tables' size", before, err)
	}
	big := []store.Blob{{Key: "k", Data: []byte(strings.Repeat("incompressible? no, but large ", 1<<12))}}
	if err := s.Commit(t.Context(), "ns", store.Record{ID: "r", Session: "s"}, big); err != nil {
		t.Fatal(err)
	}
	if after, err := s.DiskSize(t.Context()); err != nil || after <= before {
		t.Fatalf("DiskSize after a commit = %d, %v; was %d", after, err, before)
	}
	if n, err := other.DiskSize(t.Context()); err != nil || n != before {
		t.Fatalf("DiskSize of another schema's store = %d, %v; want %d, untouched", n, err, before)
	}
}
