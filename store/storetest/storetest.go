// Package storetest is the conformance suite of store.Store. Every implementation runs
// it from its own tests, so they all keep the contract written in package store the same
// way and callers can swap one for another.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/store"
)

// Run runs the suite against the stores open returns, as subtests. open is called once
// per subtest and must return an empty store; Run closes it when the subtest ends, so
// open should register only the cleanup of what outlives the store (a temporary
// directory, say).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CommitAndRead", testCommitAndRead},
		{"NoAliasing", testNoAliasing},
		{"NotFound", testNotFound},
		{"Invalid", testInvalid},
		{"InvalidCommitWritesNothing", testInvalidCommitWritesNothing},
		{"MaxNameLen", testMaxNameLen},
		{"NamespacesIsolated", testNamespacesIsolated},
		{"NoConcatenationCollisions", testNoConcatenationCollisions},
		{"TurnOrder", testTurnOrder},
		{"NegativeAndLargeTurns", testNegativeAndLargeTurns},
		{"HeadIsByCommitNotTurn", testHeadIsByCommitNotTurn},
		{"RecommitIsNoop", testRecommitIsNoop},
		{"BlobDeduplicated", testBlobDeduplicated},
		{"EmptySession", testEmptySession},
		{"EmptyData", testEmptyData},
		{"LargeBlob", testLargeBlob},
		{"LargeCommit", testLargeCommit},
		{"ConcurrentCommits", testConcurrentCommits},
		{"ConcurrentSameRecord", testConcurrentSameRecord},
		{"LineConflict", testLineConflict},
		{"FirstRecordConflict", testFirstRecordConflict},
		{"BranchContinuesOwnLine", testBranchContinuesOwnLine},
		{"LinesPerSessionAndNamespace", testLinesPerSessionAndNamespace},
		{"ConcurrentContinuation", testConcurrentContinuation},
		{"Settle", testSettle},
		{"SettleOnce", testSettleOnce},
		{"SettleInvalid", testSettleInvalid},
		{"ConcurrentSettles", testConcurrentSettles},
		{"Stats", testStats},
		{"Sessions", testSessions},
		{"RecordIDs", testRecordIDs},
		{"CancelledContext", testCancelledContext},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// rec is a record that branches, so that the cases about order, names and data need
// not chain their records; the line cases build theirs with next.
func rec(id, session string, turn int, data string) store.Record {
	return store.Record{ID: id, Session: session, Turn: turn, Data: []byte(data), Branch: true}
}

// next is a record continuing parent's line.
func next(id, session, parent string, turn int) store.Record {
	return store.Record{ID: id, Session: session, Parent: parent, Turn: turn, Data: []byte(id)}
}

func blob(key, data string) store.Blob {
	return store.Blob{Key: key, Data: []byte(data)}
}

func commit(t *testing.T, s store.Store, ns string, r store.Record, blobs ...store.Blob) {
	t.Helper()
	if err := s.Commit(t.Context(), ns, r, blobs); err != nil {
		t.Fatalf("Commit(%q, %q): %v", ns, r.ID, err)
	}
}

// sameRecord compares records treating nil and empty Data alike: the store does not
// promise to keep the difference.
func sameRecord(a, b store.Record) bool {
	return a.ID == b.ID && a.Session == b.Session && a.Parent == b.Parent && a.Branch == b.Branch &&
		a.Turn == b.Turn && bytes.Equal(a.Data, b.Data)
}

func checkRecord(t *testing.T, s store.Store, ns string, want store.Record) {
	t.Helper()
	got, err := s.Record(t.Context(), ns, want.ID)
	if err != nil {
		t.Fatalf("Record(%q, %q): %v", ns, want.ID, err)
	}
	if !sameRecord(got, want) {
		t.Fatalf("Record(%q, %q) = %s, want %s", ns, want.ID, show(got), show(want))
	}
}

func checkBlob(t *testing.T, s store.Store, ns, key string, want []byte) {
	t.Helper()
	got, err := s.Blob(t.Context(), ns, key)
	if err != nil {
		t.Fatalf("Blob(%q, %q): %v", ns, key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Blob(%q, %q) = %q, want %q", ns, key, trunc(got), trunc(want))
	}
}

// checkRecords checks a session's records by ID, in order.
func checkRecords(t *testing.T, s store.Store, ns, session string, wantIDs ...string) []store.Record {
	t.Helper()
	got, err := s.Records(t.Context(), ns, session)
	if err != nil {
		t.Fatalf("Records(%q, %q): %v", ns, session, err)
	}
	ids := []string{}
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if wantIDs == nil {
		wantIDs = []string{}
	}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("Records(%q, %q) IDs = %q, want %q", ns, session, ids, wantIDs)
	}
	return got
}

func checkHead(t *testing.T, s store.Store, ns, session, wantID string) {
	t.Helper()
	got, err := s.Head(t.Context(), ns, session)
	if err != nil {
		t.Fatalf("Head(%q, %q): %v", ns, session, err)
	}
	if got.ID != wantID {
		t.Fatalf("Head(%q, %q) = %q, want %q", ns, session, got.ID, wantID)
	}
}

func checkStats(t *testing.T, s store.Store, ns string, records, blobs int) store.Stats {
	t.Helper()
	st, err := s.Stats(t.Context(), ns)
	if err != nil {
		t.Fatalf("Stats(%q): %v", ns, err)
	}
	if st.Records != records || st.Blobs != blobs {
		t.Fatalf("Stats(%q) = %+v, want %d records and %d blobs", ns, st, records, blobs)
	}
	return st
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one wrapping %v", what, err, target)
	}
}

func show(r store.Record) string {
	return fmt.Sprintf("{ID:%q Session:%q Turn:%d Data:%q Outcome:%q}", r.ID, r.Session, r.Turn, trunc(r.Data), trunc(r.Outcome))
}

// settle settles a record, failing the test on an error.
func settle(t *testing.T, s store.Store, ns, id, outcome string, blobs ...store.Blob) {
	t.Helper()
	if err := s.Settle(t.Context(), ns, id, []byte(outcome), blobs); err != nil {
		t.Fatalf("Settle(%q, %q): %v", ns, id, err)
	}
}

// checkOutcome checks a record's outcome as Record, Records and (when it is the head)
// Head read it.
func checkOutcome(t *testing.T, s store.Store, ns, id, want string) {
	t.Helper()
	got, err := s.Record(t.Context(), ns, id)
	if err != nil {
		t.Fatalf("Record(%q, %q): %v", ns, id, err)
	}
	if string(got.Outcome) != want || (want == "" && got.Outcome != nil) {
		t.Fatalf("Record(%q, %q).Outcome = %q, want %q", ns, id, got.Outcome, want)
	}
	all, err := s.Records(t.Context(), ns, got.Session)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.ID == id && string(r.Outcome) != want {
			t.Fatalf("Records lists %q with outcome %q, want %q", id, r.Outcome, want)
		}
	}
	if head, err := s.Head(t.Context(), ns, got.Session); err == nil && head.ID == id && string(head.Outcome) != want {
		t.Fatalf("Head %q has outcome %q, want %q", id, head.Outcome, want)
	}
}

func trunc(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

func testCommitAndRead(t *testing.T, s store.Store) {
	r := rec("r1", "s1", 3, "record data")
	b1, b2 := blob("k1", "blob one"), blob("k2", "blob two")
	commit(t, s, "ns", r, b1, b2)
	checkRecord(t, s, "ns", r)
	checkBlob(t, s, "ns", "k1", b1.Data)
	checkBlob(t, s, "ns", "k2", b2.Data)
	checkRecords(t, s, "ns", "s1", "r1")
	checkHead(t, s, "ns", "s1", "r1")
	checkStats(t, s, "ns", 1, 2)
}

func testNoAliasing(t *testing.T, s store.Store) {
	r := rec("r1", "s1", 0, "record data")
	b := blob("k1", "blob data")
	commit(t, s, "ns", r, b)

	// The caller reuses its buffers after Commit.
	r.Data[0] = 'X'
	b.Data[0] = 'X'
	checkRecord(t, s, "ns", rec("r1", "s1", 0, "record data"))
	checkBlob(t, s, "ns", "k1", []byte("blob data"))

	// The caller edits what it read.
	got, err := s.Record(t.Context(), "ns", "r1")
	if err != nil {
		t.Fatal(err)
	}
	got.Data[0] = 'Y'
	data, err := s.Blob(t.Context(), "ns", "k1")
	if err != nil {
		t.Fatal(err)
	}
	data[0] = 'Y'
	all, err := s.Records(t.Context(), "ns", "s1")
	if err != nil {
		t.Fatal(err)
	}
	all[0].Data[1] = 'Y'
	latest, err := s.Head(t.Context(), "ns", "s1")
	if err != nil {
		t.Fatal(err)
	}
	latest.Data[2] = 'Y'
	checkRecord(t, s, "ns", rec("r1", "s1", 0, "record data"))
	checkBlob(t, s, "ns", "k1", []byte("blob data"))
	checkRecords(t, s, "ns", "s1", "r1")
	if got, _ := s.Head(t.Context(), "ns", "s1"); string(got.Data) != "record data" {
		t.Fatalf("Head data = %q after the caller edited earlier reads", got.Data)
	}

	// The caller reuses its buffers after Settle.
	outcome, ob := []byte("outcome data"), blob("k2", "outcome blob")
	if err := s.Settle(t.Context(), "ns", "r1", outcome, []store.Blob{ob}); err != nil {
		t.Fatal(err)
	}
	outcome[0], ob.Data[0] = 'X', 'X'
	checkOutcome(t, s, "ns", "r1", "outcome data")
	checkBlob(t, s, "ns", "k2", []byte("outcome blob"))
}

func testNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	commit(t, s, "ns", rec("r1", "s1", 0, "x"), blob("k1", "y"))

	_, err := s.Record(ctx, "ns", "missing-record")
	wantErr(t, "Record of a missing ID", err, store.ErrNotFound)
	if err != nil && !strings.Contains(err.Error(), "missing-record") {
		t.Errorf("Record error %q does not name the missing ID", err)
	}
	_, err = s.Blob(ctx, "ns", "missing-blob")
	wantErr(t, "Blob of a missing key", err, store.ErrNotFound)
	if err != nil && !strings.Contains(err.Error(), "missing-blob") {
		t.Errorf("Blob error %q does not name the missing key", err)
	}
	_, err = s.Head(ctx, "ns", "missing-session")
	wantErr(t, "Head of a missing session", err, store.ErrNotFound)
	if err != nil && !strings.Contains(err.Error(), "missing-session") {
		t.Errorf("Head error %q does not name the missing session", err)
	}
	// A namespace nothing was ever written to.
	_, err = s.Record(ctx, "other-ns", "r1")
	wantErr(t, "Record in an unused namespace", err, store.ErrNotFound)
	_, err = s.Blob(ctx, "other-ns", "k1")
	wantErr(t, "Blob in an unused namespace", err, store.ErrNotFound)
	_, err = s.Head(ctx, "other-ns", "s1")
	wantErr(t, "Head in an unused namespace", err, store.ErrNotFound)
}

func testInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	long := strings.Repeat("x", store.MaxNameLen+1)
	good := rec("r1", "s1", 0, "x")
	for _, bad := range []string{"", long} {
		what := "empty"
		if bad != "" {
			what = "too long"
		}
		r := good
		r.ID = bad
		wantErr(t, "Commit, "+what+" record ID", s.Commit(ctx, "ns", r, nil), store.ErrInvalid)
		r = good
		r.Session = bad
		wantErr(t, "Commit, "+what+" session", s.Commit(ctx, "ns", r, nil), store.ErrInvalid)
		wantErr(t, "Commit, "+what+" namespace", s.Commit(ctx, bad, good, nil), store.ErrInvalid)
		wantErr(t, "Commit, "+what+" blob key",
			s.Commit(ctx, "ns", good, []store.Blob{{Key: bad, Data: []byte("x")}}), store.ErrInvalid)

		_, err := s.Record(ctx, bad, "r1")
		wantErr(t, "Record, "+what+" namespace", err, store.ErrInvalid)
		_, err = s.Record(ctx, "ns", bad)
		wantErr(t, "Record, "+what+" ID", err, store.ErrInvalid)
		_, err = s.Records(ctx, bad, "s1")
		wantErr(t, "Records, "+what+" namespace", err, store.ErrInvalid)
		_, err = s.Records(ctx, "ns", bad)
		wantErr(t, "Records, "+what+" session", err, store.ErrInvalid)
		_, err = s.Head(ctx, bad, "s1")
		wantErr(t, "Head, "+what+" namespace", err, store.ErrInvalid)
		_, err = s.Head(ctx, "ns", bad)
		wantErr(t, "Head, "+what+" session", err, store.ErrInvalid)
		_, err = s.Blob(ctx, bad, "k1")
		wantErr(t, "Blob, "+what+" namespace", err, store.ErrInvalid)
		_, err = s.Blob(ctx, "ns", bad)
		wantErr(t, "Blob, "+what+" key", err, store.ErrInvalid)
		_, err = s.Stats(ctx, bad)
		wantErr(t, "Stats, "+what+" namespace", err, store.ErrInvalid)
	}
	checkStats(t, s, "ns", 0, 0)
}

func testInvalidCommitWritesNothing(t *testing.T, s store.Store) {
	err := s.Commit(t.Context(), "ns", rec("r1", "s1", 0, "x"), []store.Blob{blob("good", "g"), blob("", "bad")})
	wantErr(t, "Commit with an empty blob key", err, store.ErrInvalid)
	_, err = s.Record(t.Context(), "ns", "r1")
	wantErr(t, "Record after a rejected commit", err, store.ErrNotFound)
	_, err = s.Blob(t.Context(), "ns", "good")
	wantErr(t, "Blob after a rejected commit", err, store.ErrNotFound)
	_, err = s.Head(t.Context(), "ns", "s1")
	wantErr(t, "Head after a rejected commit", err, store.ErrNotFound)
	checkRecords(t, s, "ns", "s1")
	checkStats(t, s, "ns", 0, 0)
}

func testMaxNameLen(t *testing.T, s store.Store) {
	ns := strings.Repeat("n", store.MaxNameLen)
	r := rec(strings.Repeat("i", store.MaxNameLen), strings.Repeat("s", store.MaxNameLen), 1, "x")
	key := strings.Repeat("k", store.MaxNameLen)
	commit(t, s, ns, r, blob(key, "y"))
	checkRecord(t, s, ns, r)
	checkBlob(t, s, ns, key, []byte("y"))
	checkRecords(t, s, ns, r.Session, r.ID)
	checkHead(t, s, ns, r.Session, r.ID)
	checkStats(t, s, ns, 1, 1)
}

// testSessions checks store.SessionLister, for stores that implement it.
func testSessions(t *testing.T, s store.Store) {
	l, ok := s.(store.SessionLister)
	if !ok {
		t.Skipf("%T does not implement store.SessionLister", s)
	}
	list := func(ns string) []string {
		t.Helper()
		ids, err := l.Sessions(t.Context(), ns)
		if err != nil {
			t.Fatalf("Sessions(%q): %v", ns, err)
		}
		return ids
	}
	if ids := list("ns"); ids == nil || len(ids) != 0 {
		t.Errorf("Sessions of an empty namespace = %#v, want an empty list", ids)
	}
	commit(t, s, "ns", rec("r1", "b", 0, "x"))
	commit(t, s, "ns", rec("r2", "a", 0, "x"))
	r3 := rec("r3", "a", 1, "x")
	r3.Parent = "r2"
	commit(t, s, "ns", r3)
	commit(t, s, "ns2", rec("r4", "c", 0, "x"))
	if ids := list("ns"); !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("Sessions(ns) = %q, want [a b]", ids)
	}
	// "n" is a prefix of both namespaces and sees neither.
	if ids := list("n"); len(ids) != 0 {
		t.Errorf("Sessions(n) = %q, want none", ids)
	}
	if _, err := l.Sessions(t.Context(), ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Sessions of an empty namespace name: %v, want ErrInvalid", err)
	}
}

// testRecordIDs checks store.PrefixFinder, for stores that implement it.
func testRecordIDs(t *testing.T, s store.Store) {
	f, ok := s.(store.PrefixFinder)
	if !ok {
		t.Skipf("%T does not implement store.PrefixFinder", s)
	}
	find := func(ns, prefix string, limit int) []string {
		t.Helper()
		ids, err := f.RecordIDs(t.Context(), ns, prefix, limit)
		if err != nil {
			t.Fatalf("RecordIDs(%q, %q, %d): %v", ns, prefix, limit, err)
		}
		if ids == nil {
			t.Errorf("RecordIDs(%q, %q, %d) = nil, want a slice", ns, prefix, limit)
		}
		return ids
	}
	if ids := find("ns", "ab", 10); len(ids) != 0 {
		t.Errorf("RecordIDs of an empty namespace = %q, want none", ids)
	}
	// Committed out of order, in two sessions; "\xff\xff" has no successor of its
	// length, and "a" sorts before the IDs it begins.
	for i, id := range []string{"ab1", "ac", "ab02", "\xff\xffa", "a", "ab01", "\xff\xff", "b"} {
		commit(t, s, "ns", rec(id, fmt.Sprint("s", i%2), i, id))
	}
	commit(t, s, "ns2", rec("ab03", "s0", 0, "x"))
	commit(t, s, "nsx", rec("ab04", "s0", 0, "x"))
	for _, c := range []struct {
		ns, prefix string
		limit      int
		want       []string
	}{
		{"ns", "ab", 10, []string{"ab01", "ab02", "ab1"}},
		{"ns", "ab", 2, []string{"ab01", "ab02"}},
		{"ns", "ab0", 10, []string{"ab01", "ab02"}},
		{"ns", "ab01", 10, []string{"ab01"}},
		{"ns", "ab011", 10, []string{}},
		{"ns", "a", 10, []string{"a", "ab01", "ab02", "ab1", "ac"}},
		{"ns", "a", 1, []string{"a"}},
		{"ns", "abc", 10, []string{}},
		{"ns", "\xff", 10, []string{"\xff\xff", "\xff\xffa"}},
		{"ns", "\xff\xff", 10, []string{"\xff\xff", "\xff\xffa"}},
		{"ns", "c", 10, []string{}},
		// Namespaces see only their own: "n" and "ns" are prefixes of others.
		{"ns2", "ab", 10, []string{"ab03"}},
		{"n", "ab", 10, []string{}},
	} {
		if got := find(c.ns, c.prefix, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("RecordIDs(%q, %q, %d) = %q, want %q", c.ns, c.prefix, c.limit, got, c.want)
		}
	}
	for _, c := range []struct {
		ns, prefix string
		limit      int
	}{{"", "ab", 1}, {"ns", "", 1}, {"ns", "ab", 0}, {"ns", "ab", -1}, {"ns", strings.Repeat("a", store.MaxNameLen+1), 1}} {
		if _, err := f.RecordIDs(t.Context(), c.ns, c.prefix, c.limit); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecordIDs(%q, %.8q, %d): %v, want ErrInvalid", c.ns, c.prefix, c.limit, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := f.RecordIDs(ctx, "ns", "ab", 1)
	wantErr(t, "RecordIDs with a cancelled context", err, context.Canceled)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err = f.RecordIDs(t.Context(), "ns", "ab", 1)
	wantErr(t, "RecordIDs after Close", err, store.ErrClosed)
}

func testNamespacesIsolated(t *testing.T, s store.Store) {
	// "a" is a prefix of "ab"; the others hold bytes a store might use as separators.
	namespaces := []string{"a", "ab", "a/b", "a|b", "a\x00", "a\x00b", "\xff", "a:"}
	for _, ns := range namespaces {
		commit(t, s, ns, rec("r1", "s1", 0, "record of "+ns), blob("k1", "blob of "+ns))
		commit(t, s, ns, rec("only-"+ns, "only-"+ns, 0, ns), blob("only-"+ns, ns))
	}
	for _, ns := range namespaces {
		checkRecord(t, s, ns, rec("r1", "s1", 0, "record of "+ns))
		checkBlob(t, s, ns, "k1", []byte("blob of "+ns))
		checkRecords(t, s, ns, "s1", "r1")
		checkHead(t, s, ns, "s1", "r1")
		checkStats(t, s, ns, 2, 2)
		for _, other := range namespaces {
			if other == ns {
				continue
			}
			_, err := s.Record(t.Context(), ns, "only-"+other)
			wantErr(t, fmt.Sprintf("Record in %q of a record of %q", ns, other), err, store.ErrNotFound)
			_, err = s.Blob(t.Context(), ns, "only-"+other)
			wantErr(t, fmt.Sprintf("Blob in %q of a blob of %q", ns, other), err, store.ErrNotFound)
			_, err = s.Head(t.Context(), ns, "only-"+other)
			wantErr(t, fmt.Sprintf("Head in %q of a session of %q", ns, other), err, store.ErrNotFound)
			checkRecords(t, s, ns, "only-"+other)
		}
	}
	// A namespace that is a prefix of used ones sees nothing.
	checkStats(t, s, "\x00", 0, 0)
	_, err := s.Record(t.Context(), "\x00", "r1")
	wantErr(t, "Record in an unused namespace", err, store.ErrNotFound)
}

func testNoConcatenationCollisions(t *testing.T, s store.Store) {
	// Each pair concatenates to the same string: ns+session, ns+id, ns+key, session+turn.
	commit(t, s, "a", rec("bc", "bc", 0, "a/bc"), blob("bc", "a/bc"))
	commit(t, s, "ab", rec("c", "c", 0, "ab/c"), blob("c", "ab/c"))
	checkRecords(t, s, "a", "bc", "bc")
	checkRecords(t, s, "ab", "c", "c")
	checkRecords(t, s, "a", "b")
	checkRecords(t, s, "ab", "bc")
	checkHead(t, s, "a", "bc", "bc")
	checkHead(t, s, "ab", "c", "c")
	_, err := s.Head(t.Context(), "a", "b")
	wantErr(t, `Head("a", "b")`, err, store.ErrNotFound)
	_, err = s.Record(t.Context(), "a", "c")
	wantErr(t, `Record("a", "c")`, err, store.ErrNotFound)
	_, err = s.Record(t.Context(), "ab", "bc")
	wantErr(t, `Record("ab", "bc")`, err, store.ErrNotFound)
	_, err = s.Blob(t.Context(), "a", "c")
	wantErr(t, `Blob("a", "c")`, err, store.ErrNotFound)
	_, err = s.Blob(t.Context(), "ab", "bc")
	wantErr(t, `Blob("ab", "bc")`, err, store.ErrNotFound)
	checkStats(t, s, "a", 1, 1)
	checkStats(t, s, "ab", 1, 1)

	// Sessions that are prefixes of each other, in one namespace.
	commit(t, s, "n", rec("x1", "s", 1, "x"))
	commit(t, s, "n", rec("x2", "s1", 0, "x"))
	commit(t, s, "n", rec("x3", "s\x00", 0, "x"))
	checkRecords(t, s, "n", "s", "x1")
	checkRecords(t, s, "n", "s1", "x2")
	checkRecords(t, s, "n", "s\x00", "x3")
	checkHead(t, s, "n", "s", "x1")
}

func testTurnOrder(t *testing.T, s store.Store) {
	commit(t, s, "ns", rec("t0", "s", 0, "0"))
	commit(t, s, "ns", rec("t1", "s", 1, "1"))
	commit(t, s, "ns", rec("t2", "s", 2, "2"))
	checkHead(t, s, "ns", "s", "t2")
	// The session resumed from turn 0's snapshot: a second turn 1.
	commit(t, s, "ns", rec("t1b", "s", 1, "1b"))
	got := checkRecords(t, s, "ns", "s", "t0", "t1", "t1b", "t2")
	for i, want := range []store.Record{rec("t0", "s", 0, "0"), rec("t1", "s", 1, "1"), rec("t1b", "s", 1, "1b"), rec("t2", "s", 2, "2")} {
		if !sameRecord(got[i], want) {
			t.Errorf("Records[%d] = %s, want %s", i, show(got[i]), show(want))
		}
	}
	checkHead(t, s, "ns", "s", "t1b")
	// A third branch at turn 1 goes after the other two.
	commit(t, s, "ns", rec("t1c", "s", 1, "1c"))
	checkRecords(t, s, "ns", "s", "t0", "t1", "t1b", "t1c", "t2")
	checkHead(t, s, "ns", "s", "t1c")
}

func testNegativeAndLargeTurns(t *testing.T, s store.Store) {
	turns := []int{5, -3, 0, 1 << 40, -1, 256, 255, -(1 << 40), 1<<62 + 1, -1 << 62}
	for i, turn := range turns {
		commit(t, s, "ns", rec(fmt.Sprintf("r%d", i), "s", turn, fmt.Sprint(turn)))
	}
	sorted := slices.Clone(turns)
	slices.Sort(sorted)
	got, err := s.Records(t.Context(), "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	var gotTurns []int
	for _, r := range got {
		gotTurns = append(gotTurns, r.Turn)
		if string(r.Data) != fmt.Sprint(r.Turn) {
			t.Errorf("record %q of turn %d holds %q", r.ID, r.Turn, r.Data)
		}
	}
	if !slices.Equal(gotTurns, sorted) {
		t.Fatalf("Records turns = %v, want %v", gotTurns, sorted)
	}
	checkHead(t, s, "ns", "s", fmt.Sprintf("r%d", len(turns)-1))
}

func testHeadIsByCommitNotTurn(t *testing.T, s store.Store) {
	commit(t, s, "ns", rec("late", "s", 9, "x"))
	commit(t, s, "ns", rec("early", "s", 2, "x"))
	checkHead(t, s, "ns", "s", "early")
	checkRecords(t, s, "ns", "s", "early", "late")
}

func testRecommitIsNoop(t *testing.T, s store.Store) {
	commit(t, s, "ns", rec("r1", "s", 0, "first"), blob("k1", "one"))
	commit(t, s, "ns", rec("r2", "s", 1, "second"))
	st := checkStats(t, s, "ns", 2, 1)

	// Same ID: nothing changes, not even with other data, another turn or new blobs.
	commit(t, s, "ns", rec("r1", "s", 0, "first"), blob("k1", "one"))
	commit(t, s, "ns", rec("r1", "s", 7, "changed"), blob("k-new", "new"))
	commit(t, s, "ns", rec("r1", "other-session", 0, "changed"))
	checkRecords(t, s, "ns", "s", "r1", "r2")
	checkRecords(t, s, "ns", "other-session")
	checkHead(t, s, "ns", "s", "r2")
	checkRecord(t, s, "ns", rec("r1", "s", 0, "first"))
	_, err := s.Blob(t.Context(), "ns", "k-new")
	wantErr(t, "Blob committed with an already stored record", err, store.ErrNotFound)
	if st2 := checkStats(t, s, "ns", 2, 1); st2.Bytes != st.Bytes {
		t.Errorf("Stats.Bytes went from %d to %d on no-op commits", st.Bytes, st2.Bytes)
	}
}

func testBlobDeduplicated(t *testing.T, s store.Store) {
	commit(t, s, "ns", rec("r1", "s", 0, "x"), blob("k", "original"), blob("k2", "two"))
	st := checkStats(t, s, "ns", 1, 2)
	commit(t, s, "ns", rec("r2", "s", 1, "x"), blob("k", "original"))
	// A stored key is not written again, whatever the data: the key is the caller's
	// content address and the store does not check it.
	commit(t, s, "ns", rec("r3", "s", 2, "x"), blob("k", "other data"), blob("k2", "two"))
	// A key repeated within one commit is stored once.
	commit(t, s, "ns", rec("r4", "s", 3, "x"), blob("dup", "first"), blob("dup", "second"))
	st2 := checkStats(t, s, "ns", 4, 3)
	checkBlob(t, s, "ns", "k", []byte("original"))
	checkBlob(t, s, "ns", "dup", []byte("first"))
	if st2.Bytes <= st.Bytes {
		t.Errorf("Stats.Bytes = %d after three more records, was %d", st2.Bytes, st.Bytes)
	}
}

func testEmptySession(t *testing.T, s store.Store) {
	got, err := s.Records(t.Context(), "ns", "nothing")
	if err != nil {
		t.Fatalf("Records of an empty session: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("Records of an empty session = %d records", len(got))
	}
	_, err = s.Head(t.Context(), "ns", "nothing")
	wantErr(t, "Head of an empty session", err, store.ErrNotFound)
	st := checkStats(t, s, "ns", 0, 0)
	if st.Bytes != 0 {
		t.Errorf("Stats of an empty namespace: Bytes = %d", st.Bytes)
	}
}

func testEmptyData(t *testing.T, s store.Store) {
	commit(t, s, "ns", store.Record{ID: "nil", Session: "s", Turn: 0, Branch: true}, store.Blob{Key: "nil"})
	commit(t, s, "ns", store.Record{ID: "empty", Session: "s", Turn: 1, Data: []byte{}, Branch: true}, store.Blob{Key: "empty", Data: []byte{}})
	checkRecord(t, s, "ns", store.Record{ID: "nil", Session: "s", Turn: 0, Branch: true})
	checkRecord(t, s, "ns", store.Record{ID: "empty", Session: "s", Turn: 1, Branch: true})
	checkBlob(t, s, "ns", "nil", nil)
	checkBlob(t, s, "ns", "empty", nil)
	checkRecords(t, s, "ns", "s", "nil", "empty")
	checkStats(t, s, "ns", 2, 2)
}

func testLargeBlob(t *testing.T, s store.Store) {
	// Larger than the values some stores keep inline with their keys.
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16)
	big[12345] = 'X'
	commit(t, s, "ns", store.Record{ID: "r", Session: "s", Data: big[:1<<20+7], Branch: true}, store.Blob{Key: "big", Data: big})
	checkBlob(t, s, "ns", "big", big)
	checkRecord(t, s, "ns", store.Record{ID: "r", Session: "s", Data: big[:1<<20+7], Branch: true})
	st := checkStats(t, s, "ns", 1, 1)
	if st.Bytes < int64(len(big)) {
		t.Errorf("Stats.Bytes = %d, less than the %d-byte blob", st.Bytes, len(big))
	}
}

func testLargeCommit(t *testing.T, s store.Store) {
	// Many blobs just under 1 MiB: a store that keeps such values inline and bounds the
	// size of a transaction must still take them in one commit.
	const n = 24
	var blobs []store.Blob
	for i := range n {
		blobs = append(blobs, store.Blob{Key: fmt.Sprintf("k%02d", i), Data: bytes.Repeat([]byte{byte(i)}, 1<<20-100)})
	}
	commit(t, s, "ns", rec("r", "s", 0, "x"), blobs...)
	for _, b := range blobs {
		checkBlob(t, s, "ns", b.Key, b.Data)
	}
	checkStats(t, s, "ns", 1, n)
}

func testConcurrentCommits(t *testing.T, s store.Store) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		// All into one session, sharing a blob.
		go func() {
			defer wg.Done()
			r := rec(fmt.Sprintf("shared-%02d", i), "shared", i, fmt.Sprint(i))
			errs <- s.Commit(context.Background(), "ns", r, []store.Blob{blob("common", "c"), blob(fmt.Sprintf("own-%02d", i), "o")})
		}()
		// One session each.
		go func() {
			defer wg.Done()
			r := rec(fmt.Sprintf("solo-%02d", i), fmt.Sprintf("solo-%02d", i), 0, fmt.Sprint(i))
			errs <- s.Commit(context.Background(), "ns", r, []store.Blob{blob(fmt.Sprintf("solo-%02d", i), "s")})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Commit: %v", err)
		}
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("shared-%02d", i))
		checkRecords(t, s, "ns", fmt.Sprintf("solo-%02d", i), fmt.Sprintf("solo-%02d", i))
		checkHead(t, s, "ns", fmt.Sprintf("solo-%02d", i), fmt.Sprintf("solo-%02d", i))
	}
	checkRecords(t, s, "ns", "shared", want...)
	latest, err := s.Head(t.Context(), "ns", "shared")
	if err != nil || !slices.Contains(want, latest.ID) {
		t.Errorf("Head of the shared session = %q, %v", latest.ID, err)
	}
	checkStats(t, s, "ns", 2*n, 1+2*n)
}

func testConcurrentSameRecord(t *testing.T, s store.Store) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- s.Commit(context.Background(), "ns", rec("same", "s", 0, "x"), []store.Blob{blob("k", "b")})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Commit of one record: %v", err)
		}
	}
	checkRecords(t, s, "ns", "s", "same")
	checkStats(t, s, "ns", 1, 1)
}

func testStats(t *testing.T, s store.Store) {
	st0 := checkStats(t, s, "ns", 0, 0)
	if st0.Bytes != 0 {
		t.Errorf("Stats of an empty namespace: Bytes = %d", st0.Bytes)
	}
	commit(t, s, "ns", rec("r1", "s", 0, strings.Repeat("r", 100)), blob("k1", strings.Repeat("a", 1000)), blob("k2", "b"))
	st1 := checkStats(t, s, "ns", 1, 2)
	// At least every key and every byte of data it was given.
	if least := int64(len("r1") + 100 + len("k1") + 1000 + len("k2") + 1); st1.Bytes < least {
		t.Errorf("Stats.Bytes = %d, less than the %d bytes committed", st1.Bytes, least)
	}
	commit(t, s, "ns", rec("r2", "s", 1, "x"), blob("k3", strings.Repeat("c", 5000)))
	st2 := checkStats(t, s, "ns", 2, 3)
	if st2.Bytes < st1.Bytes+5000 {
		t.Errorf("Stats.Bytes went from %d to %d after committing a 5000-byte blob", st1.Bytes, st2.Bytes)
	}
	// Other namespaces do not count.
	commit(t, s, "ns2", rec("r1", "s", 0, "x"), blob("k1", strings.Repeat("z", 10000)))
	if st3 := checkStats(t, s, "ns", 2, 3); st3 != st2 {
		t.Errorf("Stats of ns went from %+v to %+v after a commit to ns2", st2, st3)
	}
	checkStats(t, s, "ns2", 1, 1)
}

func testCancelledContext(t *testing.T, s store.Store) {
	commit(t, s, "ns", rec("r1", "s", 0, "x"), blob("k1", "y"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	wantErr(t, "Commit with a cancelled context", s.Commit(ctx, "ns", rec("r2", "s", 1, "x"), nil), context.Canceled)
	_, err := s.Record(ctx, "ns", "r1")
	wantErr(t, "Record with a cancelled context", err, context.Canceled)
	_, err = s.Records(ctx, "ns", "s")
	wantErr(t, "Records with a cancelled context", err, context.Canceled)
	_, err = s.Head(ctx, "ns", "s")
	wantErr(t, "Head with a cancelled context", err, context.Canceled)
	_, err = s.Blob(ctx, "ns", "k1")
	wantErr(t, "Blob with a cancelled context", err, context.Canceled)
	_, err = s.Stats(ctx, "ns")
	wantErr(t, "Stats with a cancelled context", err, context.Canceled)
	wantErr(t, "Settle with a cancelled context", s.Settle(ctx, "ns", "r1", []byte("o"), nil), context.Canceled)
	if got, err := s.Record(t.Context(), "ns", "r1"); err != nil || got.Outcome != nil {
		t.Errorf("after a cancelled settle: %s, %v", show(got), err)
	}
	// The cancelled commit wrote nothing.
	checkRecords(t, s, "ns", "s", "r1")
}

func testClosed(t *testing.T, s store.Store) {
	commit(t, s, "ns", rec("r1", "s", 0, "x"), blob("k1", "y"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	wantErr(t, "Commit after Close", s.Commit(ctx, "ns", rec("r2", "s", 1, "x"), nil), store.ErrClosed)
	_, err := s.Record(ctx, "ns", "r1")
	wantErr(t, "Record after Close", err, store.ErrClosed)
	_, err = s.Records(ctx, "ns", "s")
	wantErr(t, "Records after Close", err, store.ErrClosed)
	_, err = s.Head(ctx, "ns", "s")
	wantErr(t, "Head after Close", err, store.ErrClosed)
	_, err = s.Blob(ctx, "ns", "k1")
	wantErr(t, "Blob after Close", err, store.ErrClosed)
	_, err = s.Stats(ctx, "ns")
	wantErr(t, "Stats after Close", err, store.ErrClosed)
	wantErr(t, "Settle after Close", s.Settle(ctx, "ns", "r1", []byte("o"), nil), store.ErrClosed)
	if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// wantConflict checks a refused commit: a *ConflictError naming the session, the parent,
// the record that continued it, and the head.
func wantConflict(t *testing.T, err error, session, parent, continued, head string) {
	t.Helper()
	var ce *store.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Commit = %v, want a *store.ConflictError wrapping ErrConflict", err)
	}
	want := store.ConflictError{Session: session, Parent: parent, Continued: continued, Head: head}
	if *ce != want {
		t.Errorf("conflict = %+v, want %+v", *ce, want)
	}
	if !strings.Contains(err.Error(), session) || !strings.Contains(err.Error(), head) {
		t.Errorf("conflict error %q names neither the session nor the head", err)
	}
}

func testLineConflict(t *testing.T, s store.Store) {
	commit(t, s, "ns", next("a", "s", "", 0))
	commit(t, s, "ns", next("b", "s", "a", 1), blob("kb", "b"))
	commit(t, s, "ns", next("c", "s", "b", 2))
	st := checkStats(t, s, "ns", 3, 1)

	// A second record continuing a: refused, and nothing of it written.
	err := s.Commit(t.Context(), "ns", next("b2", "s", "a", 1), []store.Blob{blob("kb2", "b2")})
	wantConflict(t, err, "s", "a", "b", "c")
	checkRecords(t, s, "ns", "s", "a", "b", "c")
	checkHead(t, s, "ns", "s", "c")
	_, err = s.Record(t.Context(), "ns", "b2")
	wantErr(t, "Record of a refused commit", err, store.ErrNotFound)
	_, err = s.Blob(t.Context(), "ns", "kb2")
	wantErr(t, "Blob of a refused commit", err, store.ErrNotFound)
	if st2 := checkStats(t, s, "ns", 3, 1); st2.Bytes != st.Bytes {
		t.Errorf("Stats.Bytes went from %d to %d on a refused commit", st.Bytes, st2.Bytes)
	}
	// The winner committed again is a no-op, not a conflict with itself.
	commit(t, s, "ns", next("b", "s", "a", 1))
	checkRecord(t, s, "ns", next("b", "s", "a", 1))
}

func testFirstRecordConflict(t *testing.T, s store.Store) {
	commit(t, s, "ns", next("first", "s", "", 0))
	err := s.Commit(t.Context(), "ns", next("other-first", "s", "", 0), nil)
	wantConflict(t, err, "s", "", "first", "first")
	checkRecords(t, s, "ns", "s", "first")
}

func testBranchContinuesOwnLine(t *testing.T, s store.Store) {
	commit(t, s, "ns", next("a", "s", "", 0))
	commit(t, s, "ns", next("b", "s", "a", 1))
	branch := next("x", "s", "a", 1)
	branch.Branch = true
	commit(t, s, "ns", branch)
	checkRecord(t, s, "ns", branch)
	checkHead(t, s, "ns", "s", "x")
	// The branch is a line of its own: it can be continued once.
	commit(t, s, "ns", next("y", "s", "x", 2))
	wantConflict(t, s.Commit(t.Context(), "ns", next("y2", "s", "x", 2), nil), "s", "x", "y", "y")
	// The first line goes on, unaffected by the branch.
	commit(t, s, "ns", next("c", "s", "b", 2))
	checkHead(t, s, "ns", "s", "c")
	checkRecords(t, s, "ns", "s", "a", "b", "x", "y", "c")
}

func testLinesPerSessionAndNamespace(t *testing.T, s store.Store) {
	commit(t, s, "ns", next("a", "s1", "p", 1))
	commit(t, s, "ns", next("b", "s2", "p", 1))
	commit(t, s, "other", next("c", "s1", "p", 1))
	checkHead(t, s, "ns", "s1", "a")
	checkHead(t, s, "ns", "s2", "b")
	checkHead(t, s, "other", "s1", "c")
}

func testConcurrentContinuation(t *testing.T, s store.Store) {
	commit(t, s, "ns", next("root", "s", "", 0))
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- s.Commit(context.Background(), "ns", next(fmt.Sprintf("child-%02d", i), "s", "root", 1), []store.Blob{blob(fmt.Sprintf("k%02d", i), "x")})
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("concurrent continuation: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent continuations of one record succeeded, want exactly 1", won, n)
	}
	recs, err := s.Records(t.Context(), "ns", "s")
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d records after the race (%v), want 2", len(recs), err)
	}
	checkHead(t, s, "ns", "s", recs[1].ID)
	checkStats(t, s, "ns", 2, 1)
}

func testSettle(t *testing.T, s store.Store) {
	a, b := next("a", "s", "", 0), next("b", "s", "a", 1)
	commit(t, s, "ns", a)
	commit(t, s, "ns", b)
	checkOutcome(t, s, "ns", "a", "")
	st := checkStats(t, s, "ns", 2, 0)

	settle(t, s, "ns", "b", "done", blob("k1", "final state"))
	checkOutcome(t, s, "ns", "b", "done")
	checkOutcome(t, s, "ns", "a", "")
	checkBlob(t, s, "ns", "k1", []byte("final state"))
	// The record itself, the head and the line are as committed.
	checkRecord(t, s, "ns", b)
	checkHead(t, s, "ns", "s", "b")
	checkRecords(t, s, "ns", "s", "a", "b")
	if st2 := checkStats(t, s, "ns", 2, 1); st2.Bytes < st.Bytes+int64(len("done")+len("final state")) {
		t.Errorf("Stats.Bytes went from %d to %d after a settle", st.Bytes, st2.Bytes)
	}
	wantConflict(t, s.Commit(t.Context(), "ns", next("b2", "s", "a", 1), nil), "s", "a", "b", "b")
	// A settled record is continued as any other.
	commit(t, s, "ns", next("c", "s", "b", 2))
	checkOutcome(t, s, "ns", "b", "done")

	// Namespaces do not share outcomes, and a settle names a record of its own.
	commit(t, s, "ns2", next("b", "s", "", 0))
	checkOutcome(t, s, "ns2", "b", "")
	wantErr(t, "Settle of a record of another namespace", s.Settle(t.Context(), "ns3", "b", []byte("x"), nil), store.ErrNotFound)

	// What is read is a copy.
	got, _ := s.Record(t.Context(), "ns", "b")
	got.Outcome[0] = 'X'
	checkOutcome(t, s, "ns", "b", "done")
	// And what was given is copied.
	buf := []byte("given")
	commit(t, s, "ns", next("d", "s", "c", 3))
	if err := s.Settle(t.Context(), "ns", "d", buf, nil); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X'
	checkOutcome(t, s, "ns", "d", "given")
}

func testSettleOnce(t *testing.T, s store.Store) {
	commit(t, s, "ns", next("a", "s", "", 0))
	settle(t, s, "ns", "a", "completed")
	// The same outcome again: a retry, which changes nothing.
	settle(t, s, "ns", "a", "completed")
	// Another: refused, and nothing of it written.
	err := s.Settle(t.Context(), "ns", "a", []byte("aborted"), []store.Blob{blob("k", "other")})
	wantErr(t, "a second settle", err, store.ErrConflict)
	checkOutcome(t, s, "ns", "a", "completed")
	if _, err := s.Blob(t.Context(), "ns", "k"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused settle wrote its blob: %v", err)
	}
	checkStats(t, s, "ns", 1, 0)
}

func testSettleInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	wantErr(t, "Settle of an unknown record", s.Settle(ctx, "ns", "nope", []byte("x"), nil), store.ErrNotFound)
	commit(t, s, "ns", next("a", "s", "", 0))
	for _, tc := range []struct {
		what    string
		ns, id  string
		outcome []byte
		blobs   []store.Blob
	}{
		{"an empty outcome", "ns", "a", nil, nil},
		{"an empty namespace", "", "a", []byte("x"), nil},
		{"an empty ID", "ns", "", []byte("x"), nil},
		{"an empty blob key", "ns", "a", []byte("x"), []store.Blob{blob("", "d")}},
		{"a long ID", "ns", strings.Repeat("i", store.MaxNameLen+1), []byte("x"), nil},
	} {
		wantErr(t, "Settle with "+tc.what, s.Settle(ctx, tc.ns, tc.id, tc.outcome, tc.blobs), store.ErrInvalid)
	}
	checkOutcome(t, s, "ns", "a", "")
	checkStats(t, s, "ns", 1, 0)
}

func testConcurrentSettles(t *testing.T, s store.Store) {
	commit(t, s, "ns", next("a", "s", "", 0))
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Settle(t.Context(), "ns", "a", fmt.Appendf(nil, "outcome %d", i), []store.Blob{blob(fmt.Sprintf("k%d", i), "d")})
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("settles %d and %d both won", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("settle %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no settle won")
	}
	checkOutcome(t, s, "ns", "a", fmt.Sprintf("outcome %d", won))
	// Only the winner's blob was written.
	checkStats(t, s, "ns", 1, 1)
	checkBlob(t, s, "ns", fmt.Sprintf("k%d", won), []byte("d"))
}
