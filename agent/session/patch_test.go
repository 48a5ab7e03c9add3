package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"

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

// TestCustomPatchesReplayToTheSnapshotState is a property test: whatever changes the
// turns make, a client applying the streamed patches in order ends with exactly the
// custom state of the snapshot.
func TestCustomPatchesReplayToTheSnapshotState(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			store := session.NewInMemorySnapshotStore[Doc]()
			flow := session.DefineSessionFlow(agent.NewRegistry(), "doc", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, Doc]) error {
				for range inCh {
					for range rng.IntN(6) {
						p.Session.UpdateCustom(func(d Doc) Doc { return mutate(rng, d) })
					}
					if err := resp.EndTurn(); err != nil {
						return err
					}
				}
				return nil
			}, session.WithSnapshotStore(store))
			conn, err := flow.StreamBidi(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var client []byte // what the client holds
			var last string
			for range 1 + rng.IntN(5) {
				conn.SendText("go")
				for c, err := range conn.Receive() {
					if err != nil {
						t.Fatal(err)
					}
					if c.SnapshotCreated != "" {
						last = c.SnapshotCreated
					}
					if c.CustomPatch == nil {
						continue
					}
					if client == nil {
						client = []byte("null")
					}
					patch, err := jsonpatch.DecodePatch(c.CustomPatch)
					if err != nil {
						t.Fatalf("patch %s: %v", c.CustomPatch, err)
					}
					if client, err = patch.Apply(client); err != nil {
						t.Fatalf("applying %s: %v", c.CustomPatch, err)
					}
				}
			}
			conn.Close()
			if _, err := conn.Output(); err != nil {
				t.Fatal(err)
			}
			if last == "" {
				return
			}
			snap, err := store.GetSnapshot(context.Background(), last)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(snap.State.Custom)
			if client == nil {
				client, _ = json.Marshal(Doc{}) // nothing changed: the client keeps the zero state
			}
			var got, exp any
			json.Unmarshal(client, &got)
			json.Unmarshal(want, &exp)
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("the client holds %s, the snapshot %s", client, want)
			}
		})
	}
}

func TestCustomPatchFirstIsWholeThenDiffs(t *testing.T) {
	flow := session.DefineSessionFlow(agent.NewRegistry(), "doc", func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[Status], p *session.SessionFlowParams[Status, Doc]) error {
		for range inCh {
			p.Session.UpdateCustom(func(d Doc) Doc { d.Counter++; return d })
			p.Session.UpdateCustom(func(d Doc) Doc { return d }) // no change: no chunk
			p.Session.UpdateCustom(func(d Doc) Doc { d.Tags = []string{"a"}; return d })
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		return nil
	})
	conn, _ := flow.StreamBidi(context.Background())
	var patches []string
	for range 2 {
		conn.SendText("go")
		for c, err := range conn.Receive() {
			if err != nil {
				t.Fatal(err)
			}
			if c.CustomPatch != nil {
				patches = append(patches, string(c.CustomPatch))
			}
		}
	}
	conn.Close()
	conn.Output()
	want := []string{
		`[{"op":"replace","path":"","value":{"counter":1}}]`,
		`[{"op":"add","path":"/tags","value":["a"]}]`,
		`[{"op":"replace","path":"/counter","value":2}]`,
	}
	decode := func(ps []string) (out []any) {
		for _, p := range ps {
			var v any
			json.Unmarshal([]byte(p), &v)
			out = append(out, v)
		}
		return out
	}
	if !reflect.DeepEqual(decode(patches), decode(want)) {
		t.Errorf("patches = %q\nwant %q", patches, want)
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
	conn.SendText("one")
	patches := 0
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.CustomPatch != nil {
			patches++
		}
	}
	conn.Detach(&session.SessionFlowInput{Messages: say("two").Messages})
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
