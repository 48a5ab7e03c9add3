package store_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
	"github.com/terrarium-ai/terrarium/store/pgstore"
	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// benchStores are the stores the commit benchmarks compare, each opened empty.
var benchStores = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"memory", func(b *testing.B) store.Store { return store.NewMemory() }},
	{"badger", func(b *testing.B) store.Store {
		s, err := badgerstore.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"postgres", func(b *testing.B) store.Store {
		s, err := pgstore.Open(b.Context(), pgtest.URL(b))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

// sessionTurns is how many turns a benchmark commits to a session before it starts
// the next: sessions of realistic length, whatever b.N is.
const sessionTurns = 1000

// BenchmarkCommit commits turns one after another: each a record continuing the last
// and three small new blobs, as an agent's turn does.
func BenchmarkCommit(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.open(b)
			defer s.Close()
			ctx := context.Background()
			data := bytes.Repeat([]byte("r"), 512)
			blobData := [3][]byte{bytes.Repeat([]byte("a"), 64), bytes.Repeat([]byte("b"), 256), bytes.Repeat([]byte("c"), 1024)}
			b.ReportAllocs()
			parent := ""
			for i := 0; b.Loop(); i++ {
				turn := i % sessionTurns
				if turn == 0 {
					parent = ""
				}
				id := fmt.Sprintf("%064x", i)
				blobs := []store.Blob{
					{Key: fmt.Sprintf("a%063x", i), Data: blobData[0]},
					{Key: fmt.Sprintf("b%063x", i), Data: blobData[1]},
					{Key: fmt.Sprintf("c%063x", i), Data: blobData[2]},
				}
				r := store.Record{ID: id, Session: fmt.Sprint("s", i/sessionTurns), Parent: parent, Turn: turn, Data: data}
				if err := s.Commit(ctx, "bench", r, blobs); err != nil {
					b.Fatal(err)
				}
				parent = id
			}
		})
	}
}

// BenchmarkCommitParallel commits from 8 goroutines per CPU, one session each: stores
// that share a disk flush among the commits waiting for it gain throughput.
func BenchmarkCommitParallel(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.open(b)
			defer s.Close()
			var next atomic.Int64
			data := bytes.Repeat([]byte("r"), 512)
			blobData := bytes.Repeat([]byte("b"), 256)
			b.ReportAllocs()
			b.SetParallelism(8)
			// Opening the store (Badger's files, PostgreSQL's schema) is no commit's
			// cost: without this, a run of few iterations is mostly the open.
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var session, parent string
				for turn := 0; pb.Next(); turn = (turn + 1) % sessionTurns {
					if turn == 0 {
						session, parent = fmt.Sprint("s", next.Add(1)), ""
					}
					i := next.Add(1)
					id := fmt.Sprintf("%064x", i)
					blobs := []store.Blob{
						{Key: fmt.Sprintf("a%063x", i), Data: blobData},
						{Key: fmt.Sprintf("b%063x", i), Data: blobData},
						{Key: fmt.Sprintf("c%063x", i), Data: blobData},
					}
					r := store.Record{ID: id, Session: session, Parent: parent, Turn: turn, Data: data}
					if err := s.Commit(context.Background(), "bench", r, blobs); err != nil {
						b.Error(err)
						return
					}
					parent = id
				}
			})
		})
	}
}
