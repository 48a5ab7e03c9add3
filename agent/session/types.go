package session

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/tracing"
)

// SessionState is the portable state of a conversation: what a snapshot stores and what
// a client managing its own state sends back. (Seed 003 calls it AgentState.)
type SessionState[State any] struct {
	// SessionID is the identity of a client-managed session, which travels inside its
	// state so it keeps its ID from one connection to the next. For a server-managed
	// session the snapshot's SessionID is authoritative.
	SessionID string `json:"sessionId,omitempty"`
	// Messages is the conversation: user inputs, model answers, tool exchanges and any
	// initial context, but never the messages a prompt renders each turn.
	Messages []*abi.Message `json:"messages,omitempty"`
	// Custom is the application's own state.
	Custom State `json:"custom,omitzero"`
	// Artifacts are named outputs of the session (files, images, documents).
	Artifacts []*abi.Artifact `json:"artifacts,omitempty"`
	// PromptInput is the input a DefineAgent prompt is rendered with each turn.
	PromptInput any `json:"promptInput,omitempty"`
}

// UnmarshalJSON decodes a state, refusing unknown fields (as Connect's init is
// decoded) and a null message or artifact: a client-managed session's state comes
// from its client.
func (s *SessionState[State]) UnmarshalJSON(b []byte) error {
	type plain SessionState[State]
	if err := strictInto(b, (*plain)(s)); err != nil {
		return err
	}
	return errors.Join(abi.NoNulls("state.messages", s.Messages), abi.NoNulls("state.artifacts", s.Artifacts))
}

// SnapshotEvent names the moment a snapshot was considered.
type SnapshotEvent string

// The snapshot events.
const (
	// SnapshotEventTurnEnd: the flow called Responder.EndTurn.
	SnapshotEventTurnEnd SnapshotEvent = "turnEnd"
	// SnapshotEventInvocationEnd: the flow function returned.
	SnapshotEventInvocationEnd SnapshotEvent = "invocationEnd"
	// SnapshotEventDetach: the client detached from a turn that goes on in the
	// background; the snapshot is pending until the turn settles it.
	SnapshotEventDetach SnapshotEvent = "detach"
	// SnapshotEventSettle: a detached turn ended (or was aborted), settling its
	// pending snapshot.
	SnapshotEventSettle SnapshotEvent = "settle"
)

// SnapshotStatus says how the turn a snapshot follows ended.
type SnapshotStatus string

// The snapshot statuses.
const (
	// StatusCompleted: the turn ended normally.
	StatusCompleted SnapshotStatus = "completed"
	// StatusPending: a detached turn is still running.
	StatusPending SnapshotStatus = "pending"
	// StatusFailed: the turn failed; Error says why.
	StatusFailed SnapshotStatus = "failed"
	// StatusAborted: a detached turn was aborted before it ended.
	StatusAborted SnapshotStatus = "aborted"
)

// SessionSnapshot is a persisted point-in-time capture of a session. (Seed 003 calls it
// AgentSnapshot.)
type SessionSnapshot[State any] struct {
	// SnapshotID is the content address of the snapshot's record (see
	// docs/architecture.md): set by SaveSnapshot.
	SnapshotID string `json:"snapshotId"`
	SessionID  string `json:"sessionId"`
	// ParentID is the snapshot this one continues from, empty for a session's first.
	ParentID string `json:"parentId,omitempty"`
	// Branch says the snapshot starts a new line of the conversation from its parent
	// (a resume from an older snapshot) rather than continuing the parent's line,
	// which only one snapshot may do.
	Branch    bool          `json:"branch,omitempty"`
	CreatedAt time.Time     `json:"createdAt"`
	TurnIndex int           `json:"turnIndex"`
	Event     SnapshotEvent `json:"event"`
	// Status says how the turn ended; empty reads as completed.
	Status SnapshotStatus `json:"status,omitempty"`
	// FinishReason is why the turn ended: the model's reason ("stop", "interrupted"...),
	// as on the EndTurn chunk.
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
	// Error is why a failed turn failed.
	Error *abi.Error          `json:"error,omitempty"`
	State SessionState[State] `json:"state"`
}

// SessionFlowInit starts a connection: from a stored snapshot or a session's latest
// snapshot (server-managed state: the flow has a snapshot store), from state the client
// kept (client-managed state: it has none), or as a new session.
type SessionFlowInit[State any] struct {
	// SnapshotID resumes from a stored snapshot.
	SnapshotID string `json:"snapshotId,omitempty"`
	// SessionID resumes that session's latest snapshot, or starts a new session with
	// this ID when it has none. With SnapshotID, it must name the snapshot's session.
	SessionID string `json:"sessionId,omitempty"`
	// State starts from state the client kept. Its SessionID, if any, is the session's.
	State *SessionState[State] `json:"state,omitempty"`
	// PromptInput overrides a DefineAgent prompt's default input for a new session.
	PromptInput any `json:"promptInput,omitempty"`
}

// SessionFlowInput is what a client sends for one turn.
type SessionFlowInput struct {
	// Messages is the user's input for the turn.
	Messages []*abi.Message `json:"messages,omitempty"`
	// Resume answers tool requests that interrupted the previous turn (DefineAgent).
	Resume *abi.Resume `json:"resume,omitempty"`
	// Detach runs the turn in the background: the connection ends at once with a
	// pending snapshot, which the turn settles when it ends (completed or failed) unless
	// it is aborted first. It needs a snapshot store.
	Detach bool `json:"detach,omitempty"`
	// Tools are the client's own tools, offered to the model for this turn beside the
	// agent's (agent.NewClientTool): the model calling one ends the turn "interrupted"
	// with the request pending (interrupt metadata {"clientTool": true}), which the
	// client runs and answers with Resume, giving the tools again for the rest of the
	// turn. DefineAgent refuses a name one of its own tools has, and all of them when
	// made WithClientTools(false).
	Tools []*abi.ToolDefinition `json:"tools,omitempty"`
	// Output asks for this turn's answer in another format than the agent's (JSON of a
	// schema, say: agent.WithOutputSchema's), checked before the turn ends: an answer
	// that does not match fails the turn with agent.ErrInvalidOutput.
	Output *abi.GenerateActionOutputConfig `json:"output,omitempty"`
	// CustomPatches asks for the turn's changes of the custom state, as customPatch
	// chunks (SessionFlowStreamChunk.CustomPatch). A turn that does not ask streams
	// none, and no one computes them: ask when you apply them.
	CustomPatches bool `json:"customPatches,omitempty"`
}

// UnmarshalJSON decodes a turn's input, refusing unknown fields and a null message.
func (in *SessionFlowInput) UnmarshalJSON(b []byte) error {
	type plain SessionFlowInput
	if err := strictInto(b, (*plain)(in)); err != nil {
		return err
	}
	return abi.NoNulls("messages", in.Messages)
}

// SessionFlowOutput is the final result of a connection. (Seed 003 calls it
// AgentResponse.)
type SessionFlowOutput[State any] struct {
	SessionID string `json:"sessionId"`
	// State is the session's state at the end (for a detached connection, at the
	// moment it detached).
	State *SessionState[State] `json:"state"`
	// SnapshotIDs lists the snapshots this connection created, in order; a detached
	// connection's last one is the pending snapshot of its background turn.
	SnapshotIDs []string `json:"snapshotIds,omitempty"`
	// FinishReason is "detached" when the connection detached from its last turn.
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
}

// FinishDetached is the finish reason of a connection that detached from its turn.
const FinishDetached abi.FinishReason = "detached"

// SessionFlowStreamChunk is one item of a session flow's stream; several fields may be
// set at once. (Seed 003 calls it AgentStreamChunk.)
type SessionFlowStreamChunk[Stream any] struct {
	// Chunk is token-level generation output.
	Chunk *abi.GenerateResponseChunk `json:"chunk,omitempty"`
	// Status is the flow's own structured progress report.
	Status Stream `json:"status,omitzero"`
	// Artifact is an artifact just produced.
	Artifact *abi.Artifact `json:"artifact,omitempty"`
	// CustomPatch is a change of the session's custom state: an RFC 6902 JSON Patch,
	// streamed only in a turn whose input asked (SessionFlowInput.CustomPatches). It
	// comes before the chunk it precedes and before the turn's end, with what changed
	// since the last one: a turn's first one replaces the whole document (path ""), so a
	// client that missed earlier turns catches up; each later one in the turn patches the
	// document before it. A client applying a turn's patches in order holds the state the
	// turn's snapshot stores. A detached turn streams none.
	CustomPatch json.RawMessage `json:"customPatch,omitempty"`
	// SnapshotCreated is the ID of a snapshot just persisted.
	SnapshotCreated string `json:"snapshotCreated,omitempty"`
	// Error reports that the flow refused the turn's input (the session is unchanged
	// and stays open); Receive yields it as its error.
	Error *TurnError `json:"error,omitempty"`
	// EndTurn marks the end of the flow's answer to the last input: the client may
	// send the next one.
	EndTurn bool `json:"endTurn,omitempty"`
	// FinishReason, on the EndTurn chunk, says why the turn ended: the model's reason
	// for a DefineAgent turn ("stop", or "interrupted" when tool requests wait for an
	// answer), "detached" when the client detached from it.
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
	// Usage, on the EndTurn chunk, is what the turn's model calls used, summed over
	// them (a tool's own generate calls included), as their models reported it; nil
	// when none reported any.
	Usage *abi.GenerationUsage `json:"usage,omitempty"`
}

// TurnError is a refused turn, as streamed to the client.
type TurnError struct {
	Message string `json:"message"`
	// Code classifies the refusal (abi's error codes: invalid_input, ...).
	Code abi.ErrorCode `json:"code,omitempty"`
	err  error         // the original error, for clients in the same process
}

// Error implements error.
func (e *TurnError) Error() string { return e.Message }

// Unwrap returns the original error when the client runs in the flow's process, so
// errors.Is works across the connection.
func (e *TurnError) Unwrap() error { return e.err }

// TraceView is what a trace span records of the init (tracing.Viewer): a client-kept
// state with only its newest messages (tracing.Tail).
func (i *SessionFlowInit[State]) TraceView() any {
	if i == nil || i.State == nil {
		return i
	}
	c := *i
	c.State = i.State.traceView()
	return &c
}

// TraceView is what a trace span records of the output (tracing.Viewer): its state with
// only its newest messages (tracing.Tail).
func (o *SessionFlowOutput[State]) TraceView() any {
	if o == nil || o.State == nil {
		return o
	}
	c := *o
	c.State = o.State.traceView()
	return &c
}

// traceView is the state with only its newest messages, for a trace span.
func (s *SessionState[State]) traceView() *SessionState[State] {
	c := *s
	c.Messages = tracing.Tail(s.Messages)
	return &c
}
