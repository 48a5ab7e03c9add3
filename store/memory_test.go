package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
}

// TestMemoryOneIDCommittedToManySessions commits one record ID to several sessions
// at once, which content-addressed IDs never do but a caller could. The memory store
// locks per session, and still exactly one of the commits stores the record. Each
// commit writes many blobs first, so that the commits overlap.
func TestMemoryOneIDCommittedToManySessions(t *testing.T) {
	m := store.NewMemory()
	const n = 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		blobs := make([]store.Blob, 5000)
		for j := range blobs {
			blobs[j] = store.Blob{Key: fmt.Sprint(i, "-", j), Data: []byte{byte(j)}}
		}
		wg.Go(func() {
			<-start
			if err := m.Commit(t.Context(), "ns", store.Record{ID: "same", Session: fmt.Sprint("s", i), Data: []byte{byte(i)}}, blobs); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	rec, err := m.Record(t.Context(), "ns", "same")
	if err != nil {
		t.Fatal(err)
	}
	var holders []string
	for i := range n {
		recs, err := m.Records(t.Context(), "ns", fmt.Sprint("s", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			holders = append(holders, recs[0].Session)
		}
	}
	if stats, err := m.Stats(t.Context(), "ns"); err != nil || stats.Records != 1 || len(holders) != 1 || holders[0] != rec.Session {
		t.Errorf("stats %+v (%v), sessions holding the record %q, Record says %q: want one", stats, err, holders, rec.Session)
	}
	if listed, err := m.Sessions(t.Context(), "ns"); err != nil || !slices.Equal(listed, holders) {
		t.Errorf("Sessions = %q, %v; want only the one holding the record, %q", listed, err, holders)
	}
}

// TestMemoryLineOfAParentStoredLater continues a parent that is not stored yet, then
// stores it in the same session: its line is taken all the same. (The memory store
// keeps a line on the parent's record when there is one.)
func TestMemoryLineOfAParentStoredLater(t *testing.T) {
	m := store.NewMemory()
	ctx := t.Context()
	for _, r := range []store.Record{
		{ID: "child", Session: "s", Parent: "parent", Turn: 1},
		{ID: "parent", Session: "s", Turn: 0},
	} {
		if err := m.Commit(ctx, "ns", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	err := m.Commit(ctx, "ns", store.Record{ID: "child2", Session: "s", Parent: "parent", Turn: 1}, nil)
	var conflict *store.ConflictError
	if !errors.As(err, &conflict) || conflict.Continued != "child" {
		t.Errorf("continuing the parent again: %v, want a conflict with child", err)
	}
}
