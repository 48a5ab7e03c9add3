package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
	"github.com/terrarium-ai/terrarium/store/pgstore"
	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// instantModel answers at once with a fixed message: what remains of a turn's cost is
// the framework's.
func instantModel() agent.Model {
	answer := abi.NewModelTextMessage("Channels let goroutines communicate: one sends, another receives, and the send waits for the receive.")
	return agent.NewModel("bench/instant", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		if cb != nil {
			if err := cb(ctx, &abi.GenerateResponseChunk{Content: answer.Content}); err != nil {
				return nil, err
			}
		}
		return &abi.GenerateResponse{Message: answer, FinishReason: abi.FinishStop}, nil
	})
}

// benchStores opens each store kind the benchmarks compare.
func benchStores(b *testing.B) map[string]func(b *testing.B) store.Store {
	return map[string]func(b *testing.B) store.Store{
		"memory": func(b *testing.B) store.Store { return store.NewMemory() },
		"badger": func(b *testing.B) store.Store {
			db, err := badgerstore.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		},
		"postgres": func(b *testing.B) store.Store {
			db, err := pgstore.Open(b.Context(), pgtest.URL(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		},
	}
}

// BenchmarkSnapshotStorageGrowth runs a 1,000-turn session with a snapshot every turn
// and reports the bytes stored divided by the bytes of all its messages (stored/msg):
// linear growth keeps it a small constant; storing every snapshot's full state would
// make it about 500. For PostgreSQL it also reports what its tables take on disk
// (disk-bytes, and disk/msg), indexes and page overhead included.
func BenchmarkSnapshotStorageGrowth(b *testing.B) {
	const turns = 1000
	stores := benchStores(b)
	for _, name := range []string{"memory", "badger", "postgres"} {
		b.Run(name, func(b *testing.B) {
			var ratio, disk, diskBytes float64
			for i := 0; i < b.N; i++ {
				st := stores[name](b)
				snaps := session.NewSnapshotStore[ChatState](st)
				ctx := context.Background()
				var msgs []*abi.Message
				msgBytes := 0
				parent := ""
				for turn := range turns {
					added := chatTurn(turn)
					msgs = append(msgs, added...)
					for _, x := range added {
						data, _ := json.Marshal(x)
						msgBytes += len(data)
					}
					snap := &session.SessionSnapshot[ChatState]{
						SessionID: "growth", ParentID: parent, TurnIndex: turn, Event: session.SnapshotEventTurnEnd,
						State: session.SessionState[ChatState]{Messages: msgs, Custom: ChatState{Topics: []string{"channels"}}},
					}
					if err := snaps.SaveSnapshot(ctx, snap); err != nil {
						b.Fatal(err)
					}
					parent = snap.SnapshotID
				}
				stats, err := st.Stats(ctx, "default")
				if err != nil {
					b.Fatal(err)
				}
				ratio = float64(stats.Bytes) / float64(msgBytes)
				if pg, ok := st.(*pgstore.Store); ok {
					n, err := pg.DiskSize(ctx)
					if err != nil {
						b.Fatal(err)
					}
					disk, diskBytes = float64(n)/float64(msgBytes), float64(n)
				}
			}
			b.ReportMetric(ratio, "stored/msg")
			if disk > 0 {
				b.ReportMetric(disk, "disk/msg")
				b.ReportMetric(diskBytes, "disk-bytes")
			}
		})
	}
}

// BenchmarkSessionFlowConcurrent is the operator's load test (issue 20): 10,000
// connections open at once, each runs two turns, all started together; without
// snapshots, with a snapshot every turn in memory, and the same with the snapshot
// store's caches off. Each op is one such round. Reported: failed turns (any fails the
// benchmark), the p50 and p99 latency of a turn (send to EndTurn), turns per second,
// the memory of a live connection (heap and stacks while all are open after their
// turns) and of an idle session (what the flow keeps once all are closed: the
// snapshots and the store's caches).
func BenchmarkSessionFlowConcurrent(b *testing.B) {
	const conns = 10_000
	model := instantModel()
	// opts is called each round, so that each round has a store of its own.
	run := func(b *testing.B, opts func() []session.SessionFlowOption[ChatState]) {
		ctx := context.Background()
		var lat []time.Duration
		var failed atomic.Int64
		var busy time.Duration
		var live, idle float64
		for range b.N {
			flow := chatFlow(agent.NewRegistry(), model, opts()...)
			base := heapAndStacks()
			all := make([]*session.SessionFlowConnection[ChatStatus, ChatState], conns)
			for i := range all {
				var err error
				if all[i], err = flow.StreamBidi(ctx); err != nil {
					b.Fatal(err)
				}
			}
			round := make([]time.Duration, 2*conns)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, conn := range all {
				wg.Go(func() {
					<-start
					for t := range 2 {
						begin := time.Now()
						if err := benchTurn(conn); err != nil {
							failed.Add(1)
							b.Error(err)
							return
						}
						round[2*i+t] = time.Since(begin)
					}
				})
			}
			begin := time.Now()
			close(start)
			wg.Wait()
			busy += time.Since(begin)
			lat = append(lat, round...)
			live += float64(heapAndStacks()-base) / conns
			for _, conn := range all {
				conn.Close()
				if _, err := conn.Output(); err != nil {
					b.Fatal(err)
				}
			}
			all = nil
			idle += float64(heapAndStacks()-base) / conns
			runtime.KeepAlive(flow)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(failed.Load()), "failed")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(len(lat))/busy.Seconds(), "turns/s")
		b.ReportMetric(live/float64(b.N), "B/live-conn")
		b.ReportMetric(idle/float64(b.N), "B/idle-session")
	}
	b.Run("snapshots=off", func(b *testing.B) {
		run(b, func() []session.SessionFlowOption[ChatState] { return nil })
	})
	b.Run("snapshots=memory", func(b *testing.B) {
		run(b, func() []session.SessionFlowOption[ChatState] {
			return []session.SessionFlowOption[ChatState]{session.WithSnapshotStore(session.NewInMemorySnapshotStore[ChatState]())}
		})
	})
	// The same without the snapshot store's caches: every save loads its parent.
	b.Run("snapshots=memory,cache=off", func(b *testing.B) {
		run(b, func() []session.SessionFlowOption[ChatState] {
			snaps := session.NewSnapshotStore[ChatState](store.NewMemory(), session.WithCacheBytes(0))
			return []session.SessionFlowOption[ChatState]{session.WithSnapshotStore(snaps)}
		})
	})
}

// benchTurn runs one turn and reads its stream to the end.
func benchTurn(conn *session.SessionFlowConnection[ChatStatus, ChatState]) error {
	if err := conn.SendText("What are channels used for?"); err != nil {
		return err
	}
	for _, err := range conn.Receive() {
		if err != nil {
			return err
		}
	}
	return nil
}

// heapAndStacks returns the bytes of live heap objects and goroutine stacks after a
// full collection.
func heapAndStacks() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// BenchmarkSnapshotSave saves the next turn of a long conversation (about 700 bytes of
// JSON a turn), its parent cached or not: what a cache miss costs, which grows with
// the conversation, against a hit, which does not.
func BenchmarkSnapshotSave(b *testing.B) {
	for _, turns := range []int{10, 100, 1000} {
		for _, cache := range []string{"on", "off"} {
			b.Run(fmt.Sprintf("turns=%d/cache=%s", turns, cache), func(b *testing.B) {
				var opts []session.SnapshotStoreOption
				if cache == "off" {
					opts = append(opts, session.WithCacheBytes(0))
				}
				snaps := session.NewSnapshotStore[ChatState](store.NewMemory(), opts...)
				ctx := context.Background()
				var msgs []*abi.Message
				parent := ""
				for turn := range turns {
					msgs = append(msgs, chatTurn(turn)...)
					snap := &session.SessionSnapshot[ChatState]{SessionID: "long", ParentID: parent, TurnIndex: turn, Event: session.SnapshotEventTurnEnd,
						State: session.SessionState[ChatState]{Messages: slices.Clone(msgs)}}
					if err := snaps.SaveSnapshot(ctx, snap); err != nil {
						b.Fatal(err)
					}
					parent = snap.SnapshotID
				}
				next := append(slices.Clip(msgs), chatTurn(turns)...)
				b.ReportAllocs()
				for b.Loop() {
					// A branch, so that every iteration may continue the same parent.
					snap := &session.SessionSnapshot[ChatState]{SessionID: "long", ParentID: parent, Branch: true, TurnIndex: turns, Event: session.SnapshotEventTurnEnd,
						State: session.SessionState[ChatState]{Messages: next}}
					if err := snaps.SaveSnapshot(ctx, snap); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// chatTurn is a typical chat turn: a short question and a paragraph of answer (about
// 100 and 600 characters).
func chatTurn(turn int) []*abi.Message {
	return []*abi.Message{
		abi.NewUserTextMessage(fmt.Sprintf("Question %d: what changes when a channel is buffered, and when should I use one?", turn)),
		abi.NewModelTextMessage(fmt.Sprintf("Answer %d: %s", turn, strings.Repeat("A buffered channel lets sends proceed until it is full. ", 11))),
	}
}
