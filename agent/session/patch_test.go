package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
)

// Doc is a custom state with every kind of JSON value in it.
type Doc struct {
	Counter int            `json:"counter"`
	Tags    []string       `json:"tags,omitempty"`
	Props   map[string]any `json:"props,omitempty"`
	Owner   *Owner         `json:"owner,omitempty"`
}

// Owner is a nested object of Doc.
type Owner struct {
	Name  string `json:"name"`
	Roles []int  `json:"roles"`
}

// mutate changes d at random, as a turn's tools would.
func mutate(rng *rand.Rand, d Doc) Doc {
	switch rng.IntN(7) {
	case 0:
		d.Counter += rng.IntN(5) - 2
	case 1:
		d.Tags = append(d.Tags, "t"+strconv.Itoa(rng.IntN(100)))
	case 2:
		if len(d.Tags) > 0 {
			i := rng.IntN(len(d.Tags))
			d.Tags = append(d.Tags[:i:i], d.Tags[i+1:]...)
		}
	case 3:
		props := map[string]any{}
		for k, v := range d.Props {
			props[k] = v
		}
		k := "k/" + strconv.Itoa(rng.IntN(6)) + "~" // keys that need RFC 6901 escaping
		switch rng.IntN(4) {
		case 0:
			delete(props, k)
		case 1:
			props[k] = nil
		case 2:
			props[k] = []any{float64(rng.IntN(3)), "x", map[string]any{"deep": true}}
		default:
			props[k] = float64(rng.IntN(1000))
		}
		d.Props = props
	case 4:
		d.Owner = &Owner{Name: "o" + strconv.Itoa(rng.IntN(3)), Roles: []int{rng.IntN(4), rng.IntN(4)}}
	case 5:
		d.Owner = nil
	case 6:
		d = Doc{}
	}
	return d
}

// applyPatch applies a customPatch chunk to the document a client holds ("null" before
// any), with an RFC 6902 implementation of its own.
func applyPatch(t *testing.T, doc, patch []byte) []byte {
	t.Helper()
	if doc == nil {
		doc = []byte("null")
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("applying %s to %s: %v", patch, doc, err)
	}
	return out
}

// sameJSON reports whether two documents hold the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestCustomPatchesReplayToTheSnapshotState is a property test: whatever changes the
// turns make, between chunks, between turns, in turns that ask for patches and turns
// that do not, a client applying every patch it is sent holds, after each turn that
// asked, exactly the custom state of the turn's snapshot; and a client that saw only
// that turn holds it too when the turn streamed a patch (its first replaces the whole
// document), or the state did not change since the last patch streamed.
func TestCustomPatchesReplayToTheSnapshotState(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))         // the flow's
			client := rand.New(rand.NewPCG(seed, seed+1000)) // the client's
			store := session.NewInMemorySnapshotStore[Doc]()
			flow := session.DefineSessionFlow(agent.NewRegistry(), "doc", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, Doc]) error {
				for range inCh {
					for range rng.IntN(8) {
						if rng.IntN(3) == 0 {
							if err := resp.SendStatus(Status{Note: "working"}); err != nil {
								return err
							}
							continue
						}
						p.Session.UpdateCustom(func(d Doc) Doc { return mutate(rng, d) })
					}
					if err := resp.EndTurn(); err != nil {
						return err
					}
					if rng.IntN(4) == 0 { // a change between turns
						p.Session.UpdateCustom(func(d Doc) Doc { return mutate(rng, d) })
					}
				}
				return nil
			}, session.WithSnapshotStore(store))
			conn, err := flow.StreamBidi(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var held []byte // what the client applying every patch holds
			for turn := range 1 + client.IntN(8) {
				ask := client.IntN(3) > 0
				conn.Send(&session.SessionFlowInput{Messages: say("go").Messages, CustomPatches: ask})
				var fresh []byte // what a client that saw only this turn holds
				var snapshot string
				for c, err := range conn.Receive() {
					if err != nil {
						t.Fatal(err)
					}
					if c.SnapshotCreated != "" {
						snapshot = c.SnapshotCreated
					}
					if c.CustomPatch == nil {
						continue
					}
					if !ask {
						t.Fatalf("turn %d did not ask, and streamed the patch %s", turn, c.CustomPatch)
					}
					held = applyPatch(t, held, c.CustomPatch)
					fresh = applyPatch(t, fresh, c.CustomPatch)
				}
				if !ask || snapshot == "" {
					continue
				}
				snap, err := store.GetSnapshot(context.Background(), snapshot)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := json.Marshal(snap.State.Custom)
				if held == nil {
					held, _ = json.Marshal(Doc{}) // never changed: the zero state
				}
				if !sameJSON(held, want) {
					t.Fatalf("turn %d: the client holds %s, the snapshot %s", turn, held, want)
				}
				if fresh != nil && !sameJSON(fresh, want) {
					t.Fatalf("turn %d: a client that saw only this turn holds %s, the snapshot %s", turn, fresh, want)
				}
			}
			conn.Close()
			if _, err := conn.Output(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCustomPatchesRebaseEachTurn: a turn's first patch replaces the whole document; the
// later ones patch the document streamed before them, computed at the chunk that
// follows the change, however many changes came before it.
func TestCustomPatchesRebaseEachTurn(t *testing.T) {
	flow := session.DefineSessionFlow(agent.NewRegistry(), "doc", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, Doc]) error {
		for range inCh {
			p.Session.UpdateCustom(func(d Doc) Doc { d.Counter++; return d })
			p.Session.UpdateCustom(func(d Doc) Doc { d.Counter++; return d })
			resp.SendStatus(Status{Note: "one"})
			p.Session.UpdateCustom(func(d Doc) Doc { return d }) // no change: no patch
			resp.SendStatus(Status{Note: "two"})
			p.Session.UpdateCustom(func(d Doc) Doc { d.Tags = append(slices.Clone(d.Tags), "a"); return d })
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		return nil
	})
	conn, _ := flow.StreamBidi(context.Background())
	var stream []string
	for range 2 {
		conn.Send(&session.SessionFlowInput{Messages: say("go").Messages, CustomPatches: true})
		for c, err := range conn.Receive() {
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.CustomPatch != nil:
				var v any
				json.Unmarshal(c.CustomPatch, &v)
				norm, _ := json.Marshal(v)
				stream = append(stream, string(norm))
			case c.EndTurn:
				stream = append(stream, "end")
			default:
				stream = append(stream, c.Status.Note)
			}
		}
	}
	conn.Close()
	conn.Output()
	want := []string{
		`[{"op":"replace","path":"","value":{"counter":2}}]`, "one", "two",
		`[{"op":"add","path":"/tags","value":["a"]}]`, "end",
		`[{"op":"replace","path":"","value":{"counter":4,"tags":["a"]}}]`, "one", "two",
		`[{"op":"add","path":"/tags/-","value":"a"}]`, "end",
	}
	if !slices.Equal(stream, want) {
		t.Errorf("stream:\n%s\nwant:\n%s", strings.Join(stream, "\n"), strings.Join(want, "\n"))
	}
}

// Counted is a custom state that counts its encodings, which is what a patch costs.
type Counted struct {
	N int `json:"n"`
}

var encodings atomic.Int64

// MarshalJSON implements json.Marshaler, counting.
func (c Counted) MarshalJSON() ([]byte, error) {
	encodings.Add(1)
	type plain Counted
	return json.Marshal(plain(c))
}

// countedBody is a flow's body whose every turn makes chunks chunks, each after
// changes changes of its Counted state. A detached turn waits for gate (when not nil)
// first, so that its changes come after the pending snapshot, whatever the timing.
func countedBody(chunks, changes int, gate <-chan struct{}) session.SessionFlowFunc[Status, Counted] {
	return func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, Counted]) error {
		for in := range inCh {
			if in.Detach && gate != nil {
				<-gate
			}
			for range chunks {
				for range changes {
					p.Session.UpdateCustom(func(c Counted) Counted { c.N++; return c })
				}
				if err := resp.SendStatus(Status{Note: "working"}); err != nil {
					return err
				}
			}
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestCustomPatchesOnlyWhenAsked counts the custom state's encodings besides the one
// copy a turn that changes the state keeps of it as the turn found it (what a failed
// turn goes back to): none in a turn that does not ask for patches, a client-managed
// flow's included; one per chunk that follows a change (not one per change) in a turn
// that asks; none in a detached turn, even one that asks.
func TestCustomPatchesOnlyWhenAsked(t *testing.T) {
	// No span records the state either: a provider another test installed may still be
	// the global one's delegate.
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	body := countedBody(4, 3, nil)
	count := func(t *testing.T, conn *session.SessionFlowConnection[Status, Counted], in *session.SessionFlowInput) (encoded int64, patches int) {
		t.Helper()
		before := encodings.Load()
		if err := conn.Send(in); err != nil {
			t.Fatal(err)
		}
		for c, err := range conn.Receive() {
			if err != nil {
				t.Fatal(err)
			}
			if c.CustomPatch != nil {
				patches++
			}
		}
		return encodings.Load() - before, patches
	}
	flow := session.DefineSessionFlow(agent.NewRegistry(), "counted", body) // client-managed
	conn, _ := flow.StreamBidi(context.Background())
	const kept = 1 // the copy of the state the turn found
	if n, p := count(t, conn, say("go")); n != kept || p != 0 {
		t.Errorf("a turn that did not ask: %d encodings, %d patches; want only the kept copy", n, p)
	}
	ask := say("go")
	ask.CustomPatches = true
	if n, p := count(t, conn, ask); n != kept+4 || p != 4 {
		t.Errorf("a turn that asked, 12 changes before 4 chunks: %d encodings, %d patches; want the kept copy, 4 and 4", n, p)
	}
	conn.Close()
	conn.Output()

	// Detached: the state is encoded for the snapshots only (counted apart, by the
	// store), whether the detached turn, or the attached turn before it, asked for
	// patches or not.
	detached := func(before, ask bool) int64 {
		store := &savesCounted{SnapshotStore: session.NewInMemorySnapshotStore[Counted]()}
		gate := make(chan struct{})
		flow := session.DefineSessionFlow(agent.NewRegistry(), "counted", countedBody(4, 3, gate), session.WithSnapshotStore(store))
		conn, _ := flow.StreamBidi(context.Background())
		first := say("first")
		first.CustomPatches = before
		count(t, conn, first)
		start, startSaves := encodings.Load(), store.encodings()
		conn.Detach(&session.SessionFlowInput{Messages: say("go").Messages, CustomPatches: ask})
		for c, err := range conn.Receive() {
			if err != nil {
				t.Fatal(err)
			}
			if c.CustomPatch != nil {
				t.Errorf("a detached turn streamed the patch %s", c.CustomPatch)
			}
		}
		out, err := conn.Output()
		if err != nil {
			t.Fatal(err)
		}
		close(gate)
		if _, err := flow.Wait(context.Background(), out.SnapshotID); err != nil {
			t.Fatal(err)
		}
		return encodings.Load() - start - (store.encodings() - startSaves) - kept
	}
	for _, c := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		if n := detached(c[0], c[1]); n != 0 {
			t.Errorf("a detached turn (asking %v, after a turn asking %v) encoded its state %d times besides its snapshots", c[1], c[0], n)
		}
	}
}

// savesCounted is a snapshot store that counts the Counted encodings it makes, saving
// and verifying what it reads.
type savesCounted struct {
	session.SnapshotStore[Counted]
	mu      sync.Mutex
	saving  int // calls under way
	encoded int64
}

// counted runs a call of the store, counting its encodings.
func counted[T any](s *savesCounted, call func() (T, error)) (T, error) {
	s.mu.Lock()
	s.saving++
	s.mu.Unlock()
	before := encodings.Load()
	v, err := call()
	s.mu.Lock()
	s.saving--
	s.encoded += encodings.Load() - before
	s.mu.Unlock()
	return v, err
}

// SaveSnapshot saves, counting.
func (s *savesCounted) SaveSnapshot(ctx context.Context, snap *session.SessionSnapshot[Counted]) error {
	_, err := counted(s, func() (struct{}, error) { return struct{}{}, s.SnapshotStore.SaveSnapshot(ctx, snap) })
	return err
}

// SettleSnapshot settles a pending snapshot, counting.
func (s *savesCounted) SettleSnapshot(ctx context.Context, snap *session.SessionSnapshot[Counted]) error {
	_, err := counted(s, func() (struct{}, error) { return struct{}{}, s.SnapshotStore.SettleSnapshot(ctx, snap) })
	return err
}

// GetSnapshot reads, counting.
func (s *savesCounted) GetSnapshot(ctx context.Context, id string) (*session.SessionSnapshot[Counted], error) {
	return counted(s, func() (*session.SessionSnapshot[Counted], error) { return s.SnapshotStore.GetSnapshot(ctx, id) })
}

// LatestSnapshot reads, counting.
func (s *savesCounted) LatestSnapshot(ctx context.Context, sessionID string) (*session.SessionSnapshot[Counted], error) {
	return counted(s, func() (*session.SessionSnapshot[Counted], error) {
		return s.SnapshotStore.LatestSnapshot(ctx, sessionID)
	})
}

// ListSnapshots reads, counting.
func (s *savesCounted) ListSnapshots(ctx context.Context, sessionID string) ([]*session.SessionSnapshot[Counted], error) {
	return counted(s, func() ([]*session.SessionSnapshot[Counted], error) {
		return s.SnapshotStore.ListSnapshots(ctx, sessionID)
	})
}

// encodings returns the encodings the store made, once no call is under way (a save
// may follow a turn's end, as the flow's invocation ends).
func (s *savesCounted) encodings() int64 {
	for {
		s.mu.Lock()
		saving, n := s.saving, s.encoded
		s.mu.Unlock()
		if saving == 0 {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDetachedTurnStreamsNoCustomPatch(t *testing.T) {
	store := session.NewInMemorySnapshotStore[Doc]()
	flow := session.DefineSessionFlow(agent.NewRegistry(), "counter", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, Doc]) error {
		for range inCh {
			p.Session.UpdateCustom(func(d Doc) Doc { d.Counter++; return d })
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		return nil
	}, session.WithSnapshotStore(store))
	conn, _ := flow.StreamBidi(context.Background())
	conn.Send(&session.SessionFlowInput{Messages: say("one").Messages, CustomPatches: true})
	patches := 0
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.CustomPatch != nil {
			patches++
		}
	}
	conn.Detach(&session.SessionFlowInput{Messages: say("two").Messages, CustomPatches: true})
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.CustomPatch != nil {
			t.Errorf("a detached turn streamed a patch: %s", c.CustomPatch)
		}
	}
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	settled, err := flow.Wait(context.Background(), out.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	if patches != 1 || settled.State.Custom.Counter != 2 {
		t.Errorf("attached turn streamed %d patches; the detached turn left counter %d", patches, settled.State.Custom.Counter)
	}
}
