package session_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/store"
)

// TestAttachDetachAbortPatchSequences is the property test of issue 28: random
// sequences of attached turns (some failing), detached turns (completing, or aborted
// while they run) and aborts of any snapshot, on one session. Whatever the sequence, a
// client applying every custom-state patch it is streamed (a replace resets its
// document) holds the custom state of the session's latest snapshot after each
// attached turn; aborts answer the status each snapshot had; a pending snapshot
// settles under its own ID; and every snapshot the store holds verifies.
func TestAttachDetachAbortPatchSequences(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 28))
			mem := store.NewMemory()
			snaps := session.NewSnapshotStore[Doc](mem)
			var mu sync.Mutex
			gates := map[string]chan struct{}{} // the detached turns', by input
			flow := session.DefineSessionFlow(agent.NewRegistry(), "seq", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, Doc]) error {
				for in := range inCh {
					text := in.Messages[0].Text()
					// Each input changes the state its own way, whichever goroutine runs it.
					h := fnv.New64a()
					h.Write([]byte(text))
					r := rand.New(rand.NewPCG(h.Sum64(), seed))
					for range 1 + r.IntN(4) {
						p.Session.UpdateCustom(func(d Doc) Doc { return mutate(r, d) })
					}
					mu.Lock()
					gate := gates[text]
					mu.Unlock()
					if gate != nil {
						select {
						case <-gate:
						case <-ctx.Done():
							return context.Cause(ctx)
						}
					}
					if strings.HasSuffix(text, "fail") {
						if err := resp.FailTurn(errors.New("planned failure")); err != nil {
							return err
						}
						continue
					}
					if err := resp.EndTurn(); err != nil {
						return err
					}
				}
				return nil
			}, session.WithSnapshotStore(snaps))
			ctx := context.Background()
			connect := func() *session.SessionFlowConnection[Status, Doc] {
				conn, err := flow.StreamBidi(ctx, session.WithSessionID[Doc]("s"))
				if err != nil {
					t.Fatal(err)
				}
				return conn
			}
			latest := func() []byte {
				snap, err := snaps.LatestSnapshot(ctx, "s")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(snap.State.Custom)
				return b
			}
			var client []byte // the document the client's patches made
			statuses := map[string]session.SnapshotStatus{}
			turn := 0
			for step := range 12 {
				switch a := rng.IntN(10); {
				case a < 6: // attached turns, some failing
					conn := connect()
					for range 1 + rng.IntN(3) {
						turn++
						text := fmt.Sprintf("turn %d", turn)
						if rng.IntN(4) == 0 {
							text += " fail"
						}
						conn.Send(&session.SessionFlowInput{Messages: say(text).Messages, CustomPatches: true})
						for c, err := range conn.Receive() {
							if err != nil && (c == nil || !c.EndTurn) {
								t.Fatalf("step %d, %q: %v", step, text, err)
							}
							if c.SnapshotCreated != "" {
								statuses[c.SnapshotCreated] = session.StatusCompleted
								if strings.HasSuffix(text, "fail") {
									statuses[c.SnapshotCreated] = session.StatusFailed
								}
							}
							if c.CustomPatch == nil {
								continue
							}
							client = applyPatch(t, client, c.CustomPatch)
						}
						if client == nil {
							client, _ = json.Marshal(Doc{}) // no patch yet: the client holds the zero state
						}
						if want := latest(); !sameJSON(client, want) {
							t.Fatalf("step %d, after %q: the client holds %s, the latest snapshot %s", step, text, client, want)
						}
					}
					finish(t, conn)
				case a < 9: // a detached turn, completing or aborted while it runs
					turn++
					text := fmt.Sprintf("turn %d gated", turn)
					gate := make(chan struct{})
					mu.Lock()
					gates[text] = gate
					mu.Unlock()
					conn := connect()
					conn.Detach(say(text))
					for c := range conn.Receive() {
						t.Fatalf("step %d: a detached turn streamed %s", step, jsonOf(c))
					}
					out, err := conn.Output()
					if err != nil || out.FinishReason != session.FinishDetached || out.SnapshotID == "" {
						t.Fatalf("step %d: detach: %s, %v", step, jsonOf(out), err)
					}
					pending := out.SnapshotID
					want := session.StatusCompleted
					if rng.IntN(2) == 0 {
						want = session.StatusAborted
						if prev, ok, err := flow.Abort(ctx, pending); err != nil || !ok || prev != session.StatusPending {
							t.Fatalf("step %d: aborting a running turn: %q, %v, %v", step, prev, ok, err)
						}
					} else {
						close(gate)
					}
					settled, err := flow.Wait(ctx, pending)
					if err != nil || settled.SnapshotID != pending || settled.Status != want {
						t.Fatalf("step %d: the detached turn settled as %s, %v; want %s under its own ID", step, jsonOf(settled), err, want)
					}
					statuses[pending] = want
				default: // abort any snapshot: it answers its status and changes nothing
					for id, status := range statuses {
						before, _ := snaps.GetSnapshot(ctx, id)
						if prev, ok, err := flow.Abort(ctx, id); err != nil || !ok || prev != status {
							t.Fatalf("step %d: aborting %s snapshot %s: %q, %v, %v", step, status, id, prev, ok, err)
						}
						if after, _ := snaps.GetSnapshot(ctx, id); jsonOf(after) != jsonOf(before) {
							t.Fatalf("step %d: the abort of a settled snapshot changed it: %s", step, jsonOf(after))
						}
						break
					}
				}
			}
			// Every snapshot the store holds verifies: its record hashes to its ID, and it
			// reads whole (its blobs and outcome checked).
			recs, err := mem.Records(ctx, "default", "s")
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(statuses) {
				t.Errorf("the store holds %d snapshots, the turns made %d", len(recs), len(statuses))
			}
			for _, rec := range recs {
				sum := sha256.Sum256(rec.Data)
				if hex.EncodeToString(sum[:]) != rec.ID {
					t.Errorf("snapshot %s does not hash to its ID", rec.ID)
				}
				snap, err := snaps.GetSnapshot(ctx, rec.ID)
				if err != nil {
					t.Errorf("snapshot %s: %v", rec.ID, err)
				} else if status := statuses[rec.ID]; snap.Status != status {
					t.Errorf("snapshot %s is %s, want %s", rec.ID, snap.Status, status)
				}
			}
		})
	}
}
