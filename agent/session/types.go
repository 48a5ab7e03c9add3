package session

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
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
	// SnapshotEventSettle: a detached turn's end, as stores written before pending
	// snapshots settled under their own ID recorded it (a child of the pending
	// snapshot). No snapshot is saved with it now.
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
	// StatusFailed: the turn failed; Error says why. The snapshot holds the last good
	// state (what the session held before the failed turn), so a session resumes from
	// it as from that state.
	StatusFailed SnapshotStatus = "failed"
	// StatusAborted: a detached turn was aborted before it ended. The snapshot holds
	// the state from before the turn.
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
	// UpdatedAt is when a pending snapshot settled; zero for the others, which never
	// change.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Status says how the turn ended; empty reads as completed. A pending snapshot
	// keeps its ID when its detached turn settles it: its status, finish reason,
	// error, state and UpdatedAt then say how the turn ended (see
	// docs/architecture.md, "Snapshots").
	Status SnapshotStatus `json:"status,omitempty"`
	// FinishReason is why the turn ended: the model's reason ("stop", "interrupted"...),
	// "failed" or "aborted", as on the EndTurn chunk.
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
	// Error is why a failed turn failed.
	Error *TurnError          `json:"error,omitempty"`
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
// AgentResponse; its fields are those of Genkit's AgentOutput.) A flow with a snapshot
// store keeps its sessions: its output names the snapshot to resume from and carries
// no state. A flow without one returns the state, which its client keeps.
type SessionFlowOutput[State any] struct {
	SessionID string `json:"sessionId"`
	// SnapshotID is the session's snapshot when the connection ended, to resume from:
	// the last one taken or resumed from (a failed turn's, which holds the last good
	// state; a detached connection's pending one). Empty without a snapshot store.
	SnapshotID string `json:"snapshotId,omitempty"`
	// State is the session's state at the end (for a detached connection, at the
	// moment it detached; after a failed turn, the last good state), for a flow
	// without a snapshot store only.
	State *SessionState[State] `json:"state,omitempty"`
	// SnapshotIDs lists the snapshots this connection created, in order; a detached
	// connection's last one is the pending snapshot of its background turn.
	SnapshotIDs []string `json:"snapshotIds,omitempty"`
	// Message is the conversation's last message from the model, if any.
	Message *abi.Message `json:"message,omitempty"`
	// Artifacts are the session's artifacts.
	Artifacts []*abi.Artifact `json:"artifacts,omitempty"`
	// FinishReason is why the last turn ended ("stop", "interrupted", "failed"...), or
	// "detached" when the connection detached from it.
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
	// Error is why the last turn failed, when it did.
	Error *TurnError `json:"error,omitempty"`
}

// The finish reasons of turns that a model does not give (Genkit's agent finish
// reasons).
const (
	// FinishDetached: the connection detached from its turn, which goes on in the
	// background.
	FinishDetached abi.FinishReason = "detached"
	// FinishFailed: the turn failed (a model's, a tool's or a handler's error, a
	// panic); the EndTurn chunk and the turn's snapshot carry the error, and the
	// session goes on from the state before the turn.
	FinishFailed abi.FinishReason = "failed"
	// FinishAborted: the turn was stopped from outside: a detached turn aborted, a
	// turn whose client cancelled it.
	FinishAborted abi.FinishReason = "aborted"
)

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
	// Error, on a chunk of its own before the EndTurn chunk, reports that the flow
	// refused the turn's input (the session is unchanged); on the EndTurn chunk, with
	// finish reason "failed", why the turn failed (the session is back at its state
	// before the turn). Either way the connection stays open, and Receive yields it as
	// its error.
	Error *TurnError `json:"error,omitempty"`
	// EndTurn marks the end of the flow's answer to the last input: the client may
	// send the next one.
	EndTurn bool `json:"endTurn,omitempty"`
	// FinishReason, on the EndTurn chunk, says why the turn ended: the model's reason
	// for a DefineAgent turn ("stop", or "interrupted" when tool requests wait for an
	// answer), or "failed" (see Error).
	FinishReason abi.FinishReason `json:"finishReason,omitempty"`
	// Usage, on the EndTurn chunk, is what the turn's model calls used, summed over
	// them (a tool's own generate calls included), as their models reported it; nil
	// when none reported any.
	Usage *abi.GenerationUsage `json:"usage,omitempty"`
}

// TurnError is a refused or failed turn, as streamed to the client and recorded in a
// failed turn's snapshot.
type TurnError struct {
	Message string `json:"message"`
	// Code classifies the error (abi's error codes: invalid_input, not_found,
	// limit_exceeded for timeouts, unavailable, internal...): for a failure, the code
	// the failing model, tool or handler reported itself when it did (a plugin's
	// invalid_input stays invalid_input), else agent.AsError's.
	Code abi.ErrorCode `json:"code,omitempty"`
	// Status is the code as Genkit's errors name their status (INVALID_ARGUMENT,
	// NOT_FOUND, RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL...), for Genkit's clients.
	Status string `json:"status,omitempty"`
	// Model, Tool and Handler name the action whose failure failed the turn, when one
	// did: the names the registry knows them by ("<plugin>/<name>" for a plugin's).
	Model   string `json:"model,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Handler string `json:"handler,omitempty"`
	err     error  // the original error, for clients in the same process
}

// Error implements error.
func (e *TurnError) Error() string { return e.Message }

// Unwrap returns the original error when the client runs in the flow's process, so
// errors.Is works across the connection.
func (e *TurnError) Unwrap() error { return e.err }

// newTurnError describes a turn's failure: its code (agent.AsError), the action that
// failed, and the error's whole text.
func newTurnError(err error) *TurnError {
	te := &TurnError{Message: err.Error(), Code: agent.AsError(err).Code, err: err}
	te.Status = genkitStatus(te.Code)
	var ae *agent.ActionError
	if errors.As(err, &ae) {
		switch ae.Type {
		case agent.ActionTypeModel:
			te.Model = ae.Name
		case agent.ActionTypeTool:
			te.Tool = ae.Name
		case agent.ActionTypeHandler:
			te.Handler = ae.Name
		}
	}
	return te
}

// genkitStatus names an error code as Genkit's status codes do.
func genkitStatus(code abi.ErrorCode) string {
	switch code {
	case abi.CodeInvalidInput:
		return "INVALID_ARGUMENT"
	case abi.CodeNotFound:
		return "NOT_FOUND"
	case abi.CodePermissionDenied:
		return "PERMISSION_DENIED"
	case abi.CodeNoSession:
		return "FAILED_PRECONDITION"
	case abi.CodeLimitExceeded:
		return "RESOURCE_EXHAUSTED"
	case abi.CodeUnavailable:
		return "UNAVAILABLE"
	}
	return "INTERNAL"
}

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
