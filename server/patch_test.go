package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// customPatches returns the customPatch chunks among a turn's server-sent events.
func customPatches(t *testing.T, events []event) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		var c struct {
			CustomPatch json.RawMessage `json:"customPatch"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err == nil && c.CustomPatch != nil {
			out = append(out, string(c.CustomPatch))
		}
	}
	return out
}

// replay applies a turn's patches, in order, to what a client that saw none holds.
func replay(t *testing.T, patches []string) string {
	t.Helper()
	doc := []byte("null")
	for _, p := range patches {
		patch, err := jsonpatch.DecodePatch([]byte(p))
		if err == nil {
			doc, err = patch.Apply(doc)
		}
		if err != nil {
			t.Fatalf("patch %s: %v", p, err)
		}
	}
	return string(doc)
}

// TestCustomPatchesWhenTheClientAsks: a turn's custom-state changes (a routed agent's
// route state) reach a client over server-sent events, a JSON answer and a WebSocket
// when its turn asks for them, its first patch the whole state; a turn that does not
// ask gets none.
func TestCustomPatchesWhenTheClientAsks(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "flights", nil)
	if _, events := ts.streamTurn(t, "flights", id, map[string]any{"text": "I want to fly"}); len(customPatches(t, events)) != 0 {
		t.Errorf("a turn that did not ask streamed %q", customPatches(t, events))
	}
	_, events := ts.streamTurn(t, "flights", id, map[string]any{"text": "destination=Lisbon", "customPatches": true})
	patches := customPatches(t, events)
	if len(patches) == 0 || !strings.HasPrefix(patches[0], `[{"op":"replace","path":"","value":{`) || !strings.Contains(replay(t, patches), `"dataByRoute":{"flight":{"destination":"Lisbon"}}`) {
		t.Errorf("a turn that asked streamed %q, want the whole route state first, then its changes", patches)
	}

	var res struct {
		Chunks []struct {
			CustomPatch json.RawMessage `json:"customPatch"`
		} `json:"chunks"`
	}
	ts.do(t, "POST", "/api/agents/flights/sessions/"+id+"/turns", map[string]any{"text": "passengers=2", "customPatches": true}, &res)
	patches = nil
	for _, c := range res.Chunks {
		if c.CustomPatch != nil {
			patches = append(patches, string(c.CustomPatch))
		}
	}
	if !strings.Contains(replay(t, patches), `"passengers":2`) {
		t.Errorf("a JSON answer's patches %q", patches)
	}

	w := dialWS(t, ts, "flights", "sessionId="+id)
	for _, ask := range []bool{false, true} {
		w.send(t, map[string]any{"text": "that is all", "customPatches": ask})
		n := 0
		for m := w.next(t); m.Chunk == nil || !m.Chunk.EndTurn; m = w.next(t) {
			if m.Type == "error" {
				t.Fatalf("error %+v", m.Error)
			}
			if m.Chunk != nil && m.Chunk.CustomPatch != nil {
				n++
			}
		}
		if (n > 0) != ask {
			t.Errorf("a WebSocket turn asking %v streamed %d patches", ask, n)
		}
	}
}
