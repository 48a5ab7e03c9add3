package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"github.com/wI2L/jsondiff"
)

// customPatcher turns a connection's custom-state changes into customPatch chunks, for
// the turns whose input asked for them (SessionFlowInput.CustomPatches). A change only
// marks the state changed; the patch is computed at the next chunk boundary (before any
// other chunk of the turn, and at its end), so a turn encodes its state at most once per
// chunk it streams, and never when no one asked. A turn's first patch replaces the whole
// document, so that a client that missed earlier turns is re-based; each later one
// patches the document streamed before it.
type customPatcher struct {
	changed atomic.Bool // since the last patch; set by every change, without the lock
	want    atomic.Bool // the running turn asked for patches

	mu   sync.Mutex
	sent string // the document last streamed in this turn; "" before its first patch
}

// change records that the custom state changed.
func (p *customPatcher) change() { p.changed.Store(true) }

// startTurn begins a turn, which asked for patches or not.
func (p *customPatcher) startTurn(want bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want.Store(want)
	p.sent = ""
}

// endTurn ends the running turn: nothing is streamed until the next one asks.
func (p *customPatcher) endTurn() { p.startTurn(false) }

// flush streams the change since the last patch, if there is one and the running turn
// asked for it: doc encodes the custom state, send streams the patch. The patch is
// sent under the patcher's lock, so patches reach the client in the order they were
// computed.
func (p *customPatcher) flush(doc func() ([]byte, error), send func(json.RawMessage) error) error {
	if !p.want.Load() || !p.changed.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.want.Load() || !p.changed.Swap(false) {
		return nil
	}
	b, err := doc()
	if err != nil {
		return fmt.Errorf("session: encoding the custom state: %w", err)
	}
	cur := string(b)
	var patch json.RawMessage
	if p.sent == "" {
		patch = make(json.RawMessage, 0, len(cur)+40)
		patch = append(patch, `[{"op":"replace","path":"","value":`...)
		patch = append(patch, cur...)
		patch = append(patch, "}]"...)
	} else {
		ops, err := diff(p.sent, cur)
		if err != nil {
			return fmt.Errorf("session: diffing the custom state: %w", err)
		}
		if len(ops) == 0 {
			return nil
		}
		if patch, err = json.Marshal(ops); err != nil {
			return err
		}
	}
	p.sent = cur
	return send(patch)
}

// diff returns the JSON Patch from the document old to cur, both encoded by
// encoding/json (so an equal value is equal bytes). Objects are compared member by
// member as raw JSON, descending only into members whose bytes differ; jsondiff, which
// works on decoded documents, is handed only the differing values that are not both
// objects (arrays, mostly). So a change costs what it touches, not the decoding of the
// whole state, however large.
func diff(old, cur string) (jsondiff.Patch, error) {
	var ops jsondiff.Patch
	err := diffValue(&ops, "", gjson.Parse(old), gjson.Parse(cur))
	return ops, err
}

func diffValue(ops *jsondiff.Patch, path string, old, cur gjson.Result) error {
	switch {
	case old.Raw == cur.Raw:
		return nil
	case old.IsObject() && cur.IsObject():
		return diffObject(ops, path, old, cur)
	case old.IsArray() && cur.IsArray():
		sub, err := jsondiff.CompareJSON([]byte(old.Raw), []byte(cur.Raw))
		if err != nil {
			return err
		}
		for _, op := range sub {
			op.Path = path + op.Path
			if op.From != "" {
				op.From = path + op.From
			}
			*ops = append(*ops, op)
		}
		return nil
	default:
		*ops = append(*ops, jsondiff.Operation{Type: jsondiff.OperationReplace, Path: path, Value: json.RawMessage(cur.Raw)})
		return nil
	}
}

// diffObject patches the members of the object old into those of cur. encoding/json
// writes a type's members in one order (a struct's fields as declared, a map's keys
// sorted), so the two lists line up but where members were added or removed: the
// common head and tail are compared pairwise, and only the members between them are
// matched by name.
func diffObject(ops *jsondiff.Patch, path string, old, cur gjson.Result) error {
	o, c := members(old), members(cur)
	head := 0
	for head < len(o) && head < len(c) && o[head].name == c[head].name {
		head++
	}
	oe, ce := len(o), len(c)
	for oe > head && ce > head && o[oe-1].name == c[ce-1].name {
		oe--
		ce--
	}
	member := func(name string) string { return path + "/" + pointerEscaper.Replace(name) }
	pairs := func(o, c []rawMember) error {
		for i := range o {
			if o[i].raw == c[i].raw {
				continue
			}
			if err := diffValue(ops, member(o[i].name), gjson.Parse(o[i].raw), gjson.Parse(c[i].raw)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := pairs(o[:head], c[:head]); err != nil {
		return err
	}
	if oe > head || ce > head {
		was := make(map[string]int, oe-head)
		for i, m := range o[head:oe] {
			was[m.name] = i
		}
		kept := make([]bool, oe-head)
		for _, m := range c[head:ce] {
			i, ok := was[m.name]
			if !ok {
				*ops = append(*ops, jsondiff.Operation{Type: jsondiff.OperationAdd, Path: member(m.name), Value: json.RawMessage(m.raw)})
				continue
			}
			kept[i] = true
			if err := diffValue(ops, member(m.name), gjson.Parse(o[head+i].raw), gjson.Parse(m.raw)); err != nil {
				return err
			}
		}
		for i, m := range o[head:oe] {
			if !kept[i] {
				*ops = append(*ops, jsondiff.Operation{Type: jsondiff.OperationRemove, Path: member(m.name)})
			}
		}
	}
	return pairs(o[oe:], c[ce:])
}

// rawMember is an object's member, its value as raw JSON.
type rawMember struct{ name, raw string }

// members lists the members of an object, in order, without decoding their values.
func members(obj gjson.Result) []rawMember {
	var out []rawMember
	obj.ForEach(func(k, v gjson.Result) bool {
		out = append(out, rawMember{k.Str, v.Raw})
		return true
	})
	return out
}

// pointerEscaper escapes an object member's name as a JSON Pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
