package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
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
	}
}

// BenchmarkSessionFlowTurn measures one SessionFlow turn (send, model, stream, EndTurn)
// with an instant model: without snapshots, and with a snapshot every turn in memory and
// in Badger (durable: each snapshot is synced to disk before EndTurn returns).
// Connections are renewed every 50 turns so the conversation stays short.
func BenchmarkSessionFlowTurn(b *testing.B) {
	model := instantModel()
	run := func(b *testing.B, opts ...session.SessionFlowOption[ChatState]) {
		flow := chatFlow(agent.NewRegistry(), model, opts...)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		var conn *session.SessionFlowConnection[ChatStatus, ChatState]
		for i := 0; i < b.N; i++ {
			if i%50 == 0 {
				if conn != nil {
					conn.Close()
					if _, err := conn.Output(); err != nil {
						b.Fatal(err)
					}
				}
				var err error
				if conn, err = flow.StreamBidi(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if err := conn.SendText("What are channels used for?"); err != nil {
				b.Fatal(err)
			}
			for _, err := range conn.Receive() {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		conn.Close()
		if _, err := conn.Output(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("snapshots=off", func(b *testing.B) { run(b) })
	stores := benchStores(b)
	for _, name := range []string{"memory", "badger"} {
		b.Run("snapshots="+name, func(b *testing.B) {
			run(b, session.WithSnapshotStore(session.NewSnapshotStore[ChatState](stores[name](b))))
		})
	}
}

// BenchmarkSnapshotStorageGrowth runs a 1,000-turn session with a snapshot every turn
// and reports the bytes stored divided by the bytes of all its messages (stored/msg):
// linear growth keeps it a small constant; storing every snapshot's full state would
// make it about 500.
func BenchmarkSnapshotStorageGrowth(b *testing.B) {
	const turns = 1000
	stores := benchStores(b)
	for _, name := range []string{"memory", "badger"} {
		b.Run(name, func(b *testing.B) {
			var ratio float64
			for i := 0; i < b.N; i++ {
				st := stores[name](b)
				snaps := session.NewSnapshotStore[ChatState](st)
				ctx := context.Background()
				var msgs []*abi.Message
				msgBytes := 0
				parent := ""
				for turn := range turns {
					// A short question and a paragraph of answer (about 100 and 600
					// characters), a typical chat turn.
					u := abi.NewUserTextMessage(fmt.Sprintf("Question %d: what changes when a channel is buffered, and when should I use one?", turn))
					m := abi.NewModelTextMessage(fmt.Sprintf("Answer %d: %s", turn, strings.Repeat("A buffered channel lets sends proceed until it is full. ", 11)))
					msgs = append(msgs, u, m)
					for _, x := range []*abi.Message{u, m} {
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
			}
			b.ReportMetric(ratio, "stored/msg")
		})
	}
}
