package session

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/wI2L/jsondiff"
)

// checkDiff diffs two documents and applies the patch to the first with another RFC
// 6902 implementation: it must give the second. Both are applied inside an object,
// {"v": doc}, as that implementation cannot replace a document that is not an object
// or an array.
func checkDiff(t *testing.T, old, cur []byte) {
	t.Helper()
	ops, err := diff(string(old), string(cur))
	if err != nil {
		t.Fatalf("diff %s -> %s: %v", old, cur, err)
	}
	if len(ops) == 0 {
		if string(old) != string(cur) {
			t.Fatalf("no patch from %s to %s", old, cur)
		}
		return
	}
	for i := range ops {
		ops[i].Path = "/v" + ops[i].Path
		if ops[i].From != "" {
			ops[i].From = "/v" + ops[i].From
		}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		t.Fatalf("patch %s: %v", raw, err)
	}
	got, err := patch.Apply([]byte(`{"v":` + string(old) + `}`))
	if err != nil {
		t.Fatalf("applying %s to %s: %v", raw, old, err)
	}
	var g, w any
	json.Unmarshal(got, &g)
	json.Unmarshal([]byte(`{"v":`+string(cur)+`}`), &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s patched by %s gives %s, want %s", old, raw, got, cur)
	}
}

// randomValue is a JSON value of at most depth levels, with member names that need
// escaping in a JSON Pointer (but not the empty name, which the other implementation
// does not resolve).
func randomValue(rng *rand.Rand, depth int) any {
	kind := rng.IntN(7)
	if depth == 0 {
		kind = rng.IntN(4)
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return float64(rng.IntN(100))
	case 3:
		return []string{"a", "b/c", "d~e", "é"}[rng.IntN(4)]
	case 4, 5:
		m := map[string]any{}
		for range rng.IntN(5) {
			m[[]string{"a", "b", "c/d", "e~f", "~1", "x y", "ü"}[rng.IntN(7)]] = randomValue(rng, depth-1)
		}
		return m
	default:
		a := make([]any, rng.IntN(5))
		for i := range a {
			a[i] = randomValue(rng, depth-1)
		}
		return a
	}
}

// change returns v with a few random changes, shared structure copied.
func change(rng *rand.Rand, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			switch rng.IntN(6) {
			case 0: // removed
			case 1:
				m[k] = change(rng, e, depth-1)
			default:
				m[k] = e
			}
		}
		if rng.IntN(3) == 0 {
			m["new"+strconv.Itoa(rng.IntN(3))] = randomValue(rng, depth-1)
		}
		return m
	case []any:
		a := append([]any(nil), x...)
		if len(a) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(a))
			a[i] = change(rng, a[i], depth-1)
		}
		if rng.IntN(3) == 0 {
			a = append(a, randomValue(rng, depth-1))
		}
		return a
	}
	if rng.IntN(2) == 0 {
		return randomValue(rng, depth)
	}
	return v
}

// TestDiffPatchesTheDocument: whatever two documents, the patch diff computes turns
// the first into the second.
func TestDiffPatchesTheDocument(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		a := randomValue(rng, 4)
		b := change(rng, a, 4)
		old, _ := json.Marshal(a)
		cur, _ := json.Marshal(b)
		checkDiff(t, old, cur)
	}
}

// TestDiffTouchesOnlyWhatChanged: in a large document, a change of one member patches
// that member alone.
func TestDiffTouchesOnlyWhatChanged(t *testing.T) {
	doc := map[string]any{}
	for i := range 1000 {
		doc["item"+strconv.Itoa(i)] = map[string]any{"name": "n" + strconv.Itoa(i), "tags": []any{"x", "y"}}
	}
	old, _ := json.Marshal(doc)
	doc["item500"] = map[string]any{"name": "n500", "tags": []any{"x", "z"}}
	cur, _ := json.Marshal(doc)
	ops, err := diff(string(old), string(cur))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Type != "replace" || ops[0].Path != "/item500/tags/1" || ops[0].Value != "z" {
		t.Errorf("patch %v, want one replace of /item500/tags/1 by z", ops)
	}
}

// FuzzDiff: any two JSON documents, encoded as encoding/json encodes a state.
func FuzzDiff(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1,2]}`), []byte(`{"a":2,"c":{"d":null}}`))
	f.Add([]byte(`[1,{"x/y":"~"}]`), []byte(`{"x":[]}`))
	f.Add([]byte(`null`), []byte(`"s"`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var x, y any
		if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
			return
		}
		old, _ := json.Marshal(x)
		cur, _ := json.Marshal(y)
		checkDiff(t, old, cur)
	})
}

// BenchmarkCustomPatchDiff diffs a custom state of n items before and after one item
// changed: the whole document decoded and diffed by jsondiff (what every change cost
// before), against diff, which decodes only what differs. The state's encoding, which
// both need first, is measured alone for scale.
func BenchmarkCustomPatchDiff(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		doc := map[string]any{}
		for i := range n {
			doc["item"+strconv.Itoa(i)] = map[string]any{"name": "n" + strconv.Itoa(i), "done": false, "tags": []any{"x", "y"}}
		}
		old, _ := json.Marshal(doc)
		doc["item7"] = map[string]any{"name": "n7", "done": true, "tags": []any{"x", "y"}}
		cur, _ := json.Marshal(doc)
		b.Run("items="+strconv.Itoa(n)+"/whole", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsondiff.CompareJSON(old, cur); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("items="+strconv.Itoa(n)+"/incremental", func(b *testing.B) {
			b.ReportAllocs()
			o, c := string(old), string(cur)
			for b.Loop() {
				if _, err := diff(o, c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("items="+strconv.Itoa(n)+"/encoding", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
