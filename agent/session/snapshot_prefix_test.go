package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/store"
)

// onlyExact is a store that cannot find records by prefix.
type onlyExact struct{ store.Store }

func TestResolveSnapshotID(t *testing.T) {
	ctx := t.Context()
	mem := store.NewMemory()
	snaps := session.NewSnapshotStore[ChatState](mem)
	save := func(sid, text string) string {
		t.Helper()
		snap := &session.SessionSnapshot[ChatState]{SessionID: sid, Event: session.SnapshotEventTurnEnd,
			State: session.SessionState[ChatState]{Messages: []*abi.Message{abi.NewUserTextMessage(text)}}}
		if err := snaps.SaveSnapshot(ctx, snap); err != nil {
			t.Fatal(err)
		}
		return snap.SnapshotID
	}
	a, b := save("s1", "a"), save("s2", "b")
	// Two records of session s3 whose IDs share their first 9 digits, and a third
	// sharing 8 of them in session s4: SHA-256 IDs would need billions of tries.
	for _, r := range []store.Record{
		{ID: "0123456780" + strings.Repeat("0", 54), Session: "s3", Branch: true},
		{ID: "0123456781" + strings.Repeat("0", 54), Session: "s3", Branch: true},
		{ID: "0123456700" + strings.Repeat("0", 54), Session: "s4", Branch: true},
	} {
		if err := mem.Commit(ctx, "default", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	r := snaps.(session.SnapshotResolver)
	for _, c := range []struct {
		session, id, want string
		err               error
	}{
		{"", a, a, nil},
		{"", a[:8], a, nil},
		{"", strings.ToUpper(b[:20]), b, nil},
		{"s2", b[:8], b, nil},
		// A whole ID is taken as it is, found or not.
		{"", strings.Repeat("f", 64), strings.Repeat("f", 64), nil},
		{"", strings.ToUpper(a), a, nil},
		{"", "012345678", "", session.ErrSnapshotAmbiguous},
		{"s3", "01234567", "", session.ErrSnapshotAmbiguous},
		{"", "0123456781", "0123456781" + strings.Repeat("0", 54), nil},
		// Within a session, a prefix ambiguous in the store may be unique.
		{"s4", "01234567", "0123456700" + strings.Repeat("0", 54), nil},
		{"s1", b[:8], "", session.ErrSnapshotNotFound},
		{"", "ffffffff", "", session.ErrSnapshotNotFound},
		{"", a[:7], "", session.ErrSnapshotNotFound},
		{"", a + "0", "", session.ErrSnapshotNotFound},
		{"", "not-an-id", "", session.ErrSnapshotNotFound},
		{"", "", "", session.ErrSnapshotNotFound},
		{"", strings.Repeat("x", store.MaxNameLen+1), "", store.ErrInvalid},
		{strings.Repeat("s", store.MaxNameLen+1), a[:8], "", store.ErrInvalid},
	} {
		got, err := r.ResolveSnapshotID(ctx, c.session, c.id)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("ResolveSnapshotID(%q, %q) = %q, %v; want %q, %v", c.session, c.id, got, err, c.want, c.err)
		}
	}
	// The errors say what to do.
	if _, err := r.ResolveSnapshotID(ctx, "", "012345678"); err == nil || !strings.Contains(err.Error(), "give more of its digits") {
		t.Errorf("ambiguous: %v", err)
	}
	if _, err := r.ResolveSnapshotID(ctx, "", "0123"); err == nil || !strings.Contains(err.Error(), "at least its first 8 hex digits") {
		t.Errorf("too short: %v", err)
	}

	// A store that cannot look up prefixes still resolves whole IDs, and prefixes
	// within a session.
	exact := session.NewSnapshotStore[ChatState](onlyExact{mem}).(session.SnapshotResolver)
	if got, err := exact.ResolveSnapshotID(ctx, "", a); got != a || err != nil {
		t.Errorf("a whole ID without prefix lookup: %q, %v", got, err)
	}
	if got, err := exact.ResolveSnapshotID(ctx, "s1", a[:8]); got != a || err != nil {
		t.Errorf("a session's prefix without prefix lookup: %q, %v", got, err)
	}
	if _, err := exact.ResolveSnapshotID(ctx, "", a[:8]); !errors.Is(err, session.ErrSnapshotNotFound) {
		t.Errorf("a prefix without prefix lookup: %v", err)
	}

	// A store that fails is not "not found".
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.ResolveSnapshotID(cancelled, "", a[:8]); !errors.Is(err, context.Canceled) || errors.Is(err, session.ErrSnapshotNotFound) {
		t.Errorf("a failing store: %v", err)
	}
}
