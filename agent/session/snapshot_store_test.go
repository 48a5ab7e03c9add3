package session_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/store"
)

// toolOutput is a tool's result as a Go struct whose fields are not in alphabetical
// order: decoded, it comes back as a map whose keys encode sorted, so its stored
// segment is one whose decoded messages do not encode to the same bytes again.
type toolOutput struct {
	Zone  string `json:"zone"`
	Count int    `json:"count"`
}

// history is what a chat makes a snapshot store do, one step per value yielded (the
// ID saved, "conflict", or the error): turns, a resumption from storage, a branch, a rewritten
// history, a detached turn settled, a late abort that must conflict, and a branch from
// the settled pending snapshot. Every save's CreatedAt is fixed, so the IDs depend on
// nothing but what is stored.
func history(ctx context.Context, snaps session.SnapshotStore[ChatState], sid string) iter.Seq[string] {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	save := func(parent string, turn int, branch bool, status session.SnapshotStatus, msgs []*abi.Message) string {
		snap := &session.SessionSnapshot[ChatState]{
			SessionID: sid, ParentID: parent, Branch: branch, TurnIndex: turn, CreatedAt: at,
			Event: session.SnapshotEventTurnEnd, Status: status,
			State: session.SessionState[ChatState]{Messages: msgs, Custom: ChatState{Topics: []string{fmt.Sprint("turn ", turn)}}},
		}
		err := snaps.SaveSnapshot(ctx, snap)
		switch {
		case errors.Is(err, session.ErrConflict):
			return "conflict"
		case err != nil:
			return "error: " + err.Error()
		}
		return snap.SnapshotID
	}
	text := func(role abi.Role, format string, args ...any) *abi.Message {
		return abi.NewMessage(role, abi.NewTextPart(fmt.Sprintf(format, args...)))
	}
	return func(yield func(string) bool) {
		msgs0 := []*abi.Message{
			text(abi.RoleUser, "%s: how many open tickets in zone 4?", sid),
			abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Name: "tickets", Input: map[string]any{"zone": "4"}})),
			abi.NewMessage(abi.RoleTool, abi.NewToolResponsePart(&abi.ToolResponse{Name: "tickets", Output: toolOutput{Zone: "4", Count: 7}})),
			text(abi.RoleModel, "Seven."),
		}
		s0 := save("", 0, false, session.StatusCompleted, msgs0)
		if !yield(s0) {
			return
		}
		msgs1 := append(slices.Clip(msgs0), text(abi.RoleUser, "%s: and zone 5?", sid), text(abi.RoleModel, "None."))
		s1 := save(s0, 1, false, session.StatusCompleted, msgs1)
		if !yield(s1) {
			return
		}
		// Resumed from storage: the session holds decoded messages.
		loaded, err := snaps.GetSnapshot(ctx, s1)
		if err != nil {
			yield("error: " + err.Error())
			return
		}
		msgs2 := append(slices.Clip(loaded.State.Messages), text(abi.RoleUser, "thanks"), text(abi.RoleModel, "Welcome."))
		s2 := save(s1, 2, false, session.StatusCompleted, msgs2)
		if !yield(s2) {
			return
		}
		if !yield(save(s0, 1, true, session.StatusCompleted, append(slices.Clip(msgs0), text(abi.RoleUser, "%s: zone 6 instead", sid)))) {
			return
		}
		// Rewritten: the first message kept, the rest replaced.
		msgs3 := append(slices.Clip(msgs2[:1]), text(abi.RoleModel, "%s: rewritten", sid))
		s3 := save(s2, 3, false, session.StatusCompleted, msgs3)
		if !yield(s3) {
			return
		}
		asked := append(slices.Clip(msgs3), text(abi.RoleUser, "%s: long question", sid))
		pending := save(s3, 4, false, session.StatusPending, asked)
		if !yield(pending) {
			return
		}
		if !yield(save(pending, 4, false, session.StatusCompleted, append(slices.Clip(asked), text(abi.RoleModel, "long answer")))) {
			return
		}
		if !yield(save(pending, 4, false, session.StatusAborted, msgs3)) {
			return
		}
		yield(save(pending, 5, true, session.StatusCompleted, append(slices.Clip(msgs3), text(abi.RoleUser, "%s: again", sid))))
	}
}

// interleaved runs the histories of sessions one step of each at a time, so that with
// a small cache every save's parent was evicted by the saves of other sessions.
func interleaved(ctx context.Context, snaps session.SnapshotStore[ChatState], sessions int) map[string][]string {
	out := map[string][]string{}
	var nexts []func() (string, bool)
	var ids []string
	for i := range sessions {
		next, stop := iter.Pull(history(ctx, snaps, fmt.Sprint("s", i)))
		defer stop()
		nexts = append(nexts, next)
		ids = append(ids, fmt.Sprint("s", i))
	}
	for more := true; more; {
		more = false
		for i, next := range nexts {
			if v, ok := next(); ok {
				out[ids[i]] = append(out[ids[i]], v)
				more = true
			}
		}
	}
	return out
}

// concurrent runs the histories of sessions at once, one goroutine each.
func concurrent(ctx context.Context, snaps session.SnapshotStore[ChatState], sessions int) map[string][]string {
	var mu sync.Mutex
	out := map[string][]string{}
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			sid := fmt.Sprint("s", i)
			steps := slices.Collect(history(ctx, snaps, sid))
			mu.Lock()
			out[sid] = steps
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// TestSnapshotCachesChangeNoResult saves the same histories through stores whose
// caches keep nothing, or a few entries evicted all the time, and through one with the
// default caches: no save may fail for it (a cache used to be read again after a load,
// and a save failed with "evicted while loading"), and every snapshot must be stored
// byte for byte the same (a save after a miss used to write the whole conversation
// again, as messages decoded from storage are not the ones the session holds).
func TestSnapshotCachesChangeNoResult(t *testing.T) {
	const sessions = 24
	ctx := context.Background()
	refStore := store.NewMemory()
	want := interleaved(ctx, session.NewSnapshotStore[ChatState](refStore), sessions)
	wantStats, err := refStore.Stats(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	for sid, steps := range want {
		if len(steps) != 9 || steps[7] != "conflict" || slices.ContainsFunc(steps, func(s string) bool { return strings.HasPrefix(s, "error") }) {
			t.Fatalf("session %s with the default caches: %q, want 9 steps, the 8th a conflict", sid, steps)
		}
	}
	for _, budget := range []int{0, 24 << 10} {
		for name, run := range map[string]func(context.Context, session.SnapshotStore[ChatState], int) map[string][]string{"interleaved": interleaved, "concurrent": concurrent} {
			t.Run(fmt.Sprintf("%s/cache=%dB", name, budget), func(t *testing.T) {
				mem := store.NewMemory()
				got := run(ctx, session.NewSnapshotStore[ChatState](mem, session.WithCacheBytes(budget)), sessions)
				for _, sid := range slices.Sorted(maps.Keys(want)) {
					if !slices.Equal(got[sid], want[sid]) {
						t.Errorf("session %s:\n got %q\nwant %q", sid, got[sid], want[sid])
					}
				}
				if stats, err := mem.Stats(ctx, "default"); err != nil || stats != wantStats {
					t.Errorf("stored %+v (%v), want %+v", stats, err, wantStats)
				}
			})
		}
	}
}

// TestSessionFlowTurnsWithoutCache is the operator's load in small: many connections
// run two turns at once through a snapshot store whose caches keep nothing, so every
// save loads its parent while others save. No turn may fail, and every session's
// last snapshot holds its whole conversation.
func TestSessionFlowTurnsWithoutCache(t *testing.T) {
	const conns = 64
	snaps := session.NewSnapshotStore[ChatState](store.NewMemory(), session.WithCacheBytes(0))
	flow := chatFlow(agent.NewRegistry(), echoModel(), session.WithSnapshotStore(snaps), session.WithSnapshotCallback(session.SnapshotOn[ChatState](session.SnapshotEventTurnEnd)))
	ctx := context.Background()
	last := make([]string, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			conn, err := flow.StreamBidi(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Output()
			defer conn.Close()
			for turn := range 2 {
				if err := conn.SendText(fmt.Sprintf("connection %d, turn %d", i, turn)); err != nil {
					t.Error(err)
					return
				}
				for c, err := range conn.Receive() {
					if err != nil {
						t.Errorf("connection %d, turn %d: %v", i, turn, err)
						return
					}
					if c.SnapshotCreated != "" {
						last[i] = c.SnapshotCreated
					}
				}
			}
		})
	}
	wg.Wait()
	for i, id := range last {
		snap, err := snaps.GetSnapshot(ctx, id)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if msgs := snap.State.Messages; len(msgs) != 4 || msgs[2].Text() != fmt.Sprintf("connection %d, turn 1", i) {
			t.Errorf("connection %d: last snapshot holds %s", i, mustJSON(t, msgs))
		}
	}
}

func TestWithCacheBytesRefusesANegativeSize(t *testing.T) {
	defer func() {
		err, _ := recover().(error)
		if !errors.Is(err, agent.ErrInvalidOption) || !strings.Contains(err.Error(), "WithCacheBytes(-1)") {
			t.Errorf("NewSnapshotStore with WithCacheBytes(-1) panicked with %v, want ErrInvalidOption naming it", err)
		}
	}()
	session.NewSnapshotStore[ChatState](store.NewMemory(), session.WithCacheBytes(-1))
}
