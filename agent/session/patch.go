package session

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/wI2L/jsondiff"
)

// customPatcher turns successive custom states into the customPatch chunks of one
// connection: the first carries the whole document (an RFC 6902 replace of the root),
// each later one the patch from the document streamed before it. A client applying them
// in order holds the session's custom state.
type customPatcher struct {
	mu   sync.Mutex
	sent []byte // the document last streamed; nil before the first
}

// next returns the patch from the last streamed document to doc, or nil when nothing
// changed, and records doc as streamed. send is called with the patch under the
// patcher's lock, so patches reach the client in the order they were computed.
func (p *customPatcher) next(doc []byte, send func(json.RawMessage) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var patch json.RawMessage
	if p.sent == nil {
		raw, err := json.Marshal([]map[string]any{{"op": "replace", "path": "", "value": json.RawMessage(doc)}})
		if err != nil {
			return err
		}
		patch = raw
	} else {
		ops, err := jsondiff.CompareJSON(p.sent, doc)
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
	p.sent = doc
	return send(patch)
}
