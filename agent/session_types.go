package agent

import (
	"time"

	"github.com/terrarium-ai/terrarium/abi"
)

// SessionState is the portable state of a conversation: what a snapshot stores and what
// a client managing its own state sends back. (Seed 003 calls it AgentState.)
type SessionState[State any] struct {
	// Messages is the conversation: user inputs, model answers, tool exchanges and any
	// initial context, but never the messages a prompt renders each turn.
	Messages []*abi.Message `json:"messages,omitempty"`
	// Custom is the application's own state.
	Custom State `json:"custom,omitzero"`
	// Artifacts are named outputs of the session (files, images, documents).
	Artifacts []*Artifact `json:"artifacts,omitempty"`
	// PromptInput is the input a DefineAgent prompt is rendered with each turn.
	PromptInput any `json:"promptInput,omitempty"`
}

// Artifact is a named collection of parts a session produced.
type Artifact struct {
	Name     string         `json:"name,omitempty"`
	Parts    []*abi.Part    `json:"parts"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// SnapshotEvent names the moment a snapshot was considered.
type SnapshotEvent string

// The snapshot events.
const (
	// SnapshotEventTurnEnd: the flow called Responder.EndTurn.
	SnapshotEventTurnEnd SnapshotEvent = "turnEnd"
	// SnapshotEventInvocationEnd: the flow function returned.
	SnapshotEventInvocationEnd SnapshotEvent = "invocationEnd"
)

// SessionSnapshot is a persisted point-in-time capture of a session. (Seed 003 calls it
// AgentSnapshot.)
type SessionSnapshot[State any] struct {
	// SnapshotID is the content address of the snapshot's record (see
	// docs/architecture.md): set by SaveSnapshot.
	SnapshotID string `json:"snapshotId"`
	SessionID  string `json:"sessionId"`
	// ParentID is the snapshot this one continues from, empty for a session's first.
	ParentID  string              `json:"parentId,omitempty"`
	CreatedAt time.Time           `json:"createdAt"`
	TurnIndex int                 `json:"turnIndex"`
	Event     SnapshotEvent       `json:"event"`
	State     SessionState[State] `json:"state"`
}

// SessionFlowInit starts a connection: from a stored snapshot, from state the client
// kept, or as a new session. At most one of SnapshotID and State is set.
type SessionFlowInit[State any] struct {
	// SnapshotID resumes from a stored snapshot (server-managed state).
	SnapshotID string `json:"snapshotId,omitempty"`
	// State starts from state the client kept (client-managed state).
	State *SessionState[State] `json:"state,omitempty"`
	// SessionID resumes that session's latest snapshot, or starts a new session with
	// this ID when it has none.
	SessionID string `json:"sessionId,omitempty"`
	// PromptInput overrides a DefineAgent prompt's default input for this session.
	PromptInput any `json:"promptInput,omitempty"`
}

// SessionFlowInput is what a client sends for one turn.
type SessionFlowInput struct {
	// Messages is the user's input for the turn.
	Messages []*abi.Message `json:"messages,omitempty"`
	// Resume answers tool requests that interrupted the previous turn (DefineAgent).
	Resume *abi.Resume `json:"resume,omitempty"`
}

// SessionFlowOutput is the final result of a connection. (Seed 003 calls it
// AgentResponse.)
type SessionFlowOutput[State any] struct {
	SessionID string               `json:"sessionId"`
	State     *SessionState[State] `json:"state"`
	// SnapshotIDs lists the snapshots this connection created, in order.
	SnapshotIDs []string `json:"snapshotIds,omitempty"`
}

// SessionFlowStreamChunk is one item of a session flow's stream; several fields may be
// set at once. (Seed 003 calls it AgentStreamChunk.)
type SessionFlowStreamChunk[Stream any] struct {
	// Chunk is token-level generation output.
	Chunk *abi.GenerateResponseChunk `json:"chunk,omitempty"`
	// Status is the flow's own structured progress report.
	Status Stream `json:"status,omitzero"`
	// Artifact is an artifact just produced.
	Artifact *Artifact `json:"artifact,omitempty"`
	// SnapshotCreated is the ID of a snapshot just persisted.
	SnapshotCreated string `json:"snapshotCreated,omitempty"`
	// Error reports that the flow refused the turn's input (the session is unchanged
	// and stays open); Receive yields it as its error.
	Error *TurnError `json:"error,omitempty"`
	// EndTurn marks the end of the flow's answer to the last input: the client may
	// send the next one.
	EndTurn bool `json:"endTurn,omitempty"`
	// FinishReason, on the EndTurn chunk of a DefineAgent turn, says why the turn
	// ended: "stop", or "interrupted" when tool requests wait for an answer.
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
}

// TurnError is a refused turn, as streamed to the client.
type TurnError struct {
	Message string `json:"message"`
	err     error  // the original error, for clients in the same process
}

// Error implements error.
func (e *TurnError) Error() string { return e.Message }

// Unwrap returns the original error when the client runs in the flow's process, so
// errors.Is works across the connection.
func (e *TurnError) Unwrap() error { return e.err }
