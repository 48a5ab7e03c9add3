package server

import (
	"context"
	"encoding/json"

	"github.com/terrarium-ai/terrarium/deploy"
)

// A person may name a snapshot by a unique prefix of its ID (at least
// session.MinSnapshotIDPrefix hex digits) wherever the API takes one: in a path, in the
// WebSocket's query, in a session's init. The agent's snapshot store resolves it
// (deploy.Agent.ResolveSnapshotID), within the session the request names if any.

// resolveInit returns a session's init with its snapshotId, if any, made whole.
func resolveInit(ctx context.Context, a *deploy.Agent, init json.RawMessage) (json.RawMessage, error) {
	var ids initIDs
	if len(init) == 0 || json.Unmarshal(init, &ids) != nil || ids.SnapshotID == "" || !a.ServerManaged() {
		// ConnectAny refuses what is malformed, with its own error.
		return init, nil
	}
	id, err := a.ResolveSnapshotID(ctx, ids.SessionID, ids.SnapshotID)
	if err != nil || id == ids.SnapshotID {
		return init, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(init, &fields); err != nil {
		return init, nil
	}
	fields["snapshotId"], _ = json.Marshal(id)
	return json.Marshal(fields)
}
