package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// A detached turn (as Genkit's agents detach) goes on in the background after its
// client has gone:
//
//	detach:  pending snapshot P (the state so far, parent = the last snapshot)
//	         -> SnapshotCreated P, EndTurn "detached" to the client; the connection ends
//	         -> the turn runs on, streaming nowhere, taking no snapshot of its own
//	settle:  snapshot S continuing P: completed (the final state) or failed (the error)
//	abort:   snapshot A continuing P: aborted (P's state); the running turn is cancelled
//
// A snapshot can be continued once (store.Commit), so exactly one of settle and abort
// lands: whichever commits first. GetSnapshot(P) reads as the snapshot that settled it.

// errAborted is the cause with which an aborted detached turn is cancelled.
var errAborted = errors.New("session: the detached turn was aborted")

// detach carries out a detach request. It returns the connection's output when the
// client is detached, or nothing when the request was refused (the connection goes on);
// an error only when the connection must end.
func (f *SessionFlow[Stream, State]) detach(work context.Context, sess *Session[State], resp *Responder[Stream], in *SessionFlowInput,
	bodyIn chan<- *SessionFlowInput, done <-chan error, cancelWork context.CancelCauseFunc, follow func() bool) (*SessionFlowOutput[State], error) {
	refuse := func(err error) (*SessionFlowOutput[State], error) {
		if err := resp.Refuse(err); err != nil {
			return nil, err
		}
		return nil, resp.out.endTurn()
	}
	if f.store == nil {
		return refuse(fmt.Errorf("session: flow %q: %w: a detached turn needs one to settle in", f.desc.Name, ErrNoSnapshotStore))
	}
	pending, err := f.savePending(work, sess)
	if err != nil {
		return refuse(fmt.Errorf("session: flow %q: detach: saving the pending snapshot: %w", f.desc.Name, err))
	}
	run := &detachedRun{cancel: cancelWork, done: make(chan struct{})}
	f.detached.Store(pending.SnapshotID, run)
	follow() // the work no longer ends with the connection
	if err := resp.Send(&SessionFlowStreamChunk[Stream]{SnapshotCreated: pending.SnapshotID}); err == nil {
		if err := resp.Send(&SessionFlowStreamChunk[Stream]{EndTurn: true, FinishReason: FinishDetached}); err == nil {
			resp.out.endTurn()
		}
	}
	resp.out.release()
	output := &SessionFlowOutput[State]{SessionID: sess.ID(), State: sess.State(), SnapshotIDs: sess.NewSnapshotIDs(), FinishReason: FinishDetached}

	go func() {
		in := *in
		in.Detach = false
		var err error
		if len(in.Messages) > 0 || in.Resume != nil {
			select {
			case bodyIn <- &in:
			case err = <-done:
			}
		}
		if err == nil {
			close(bodyIn)
			err = <-done
		}
		f.settle(work, sess, resp, pending, err)
		f.detached.Delete(pending.SnapshotID)
		close(run.done)
		cancelWork(nil)
	}()
	return output, nil
}

// savePending suspends the session's snapshots and saves the pending snapshot of its
// detached turn, after any snapshot being saved: it is the next one in the session's
// line.
func (f *SessionFlow[Stream, State]) savePending(ctx context.Context, sess *Session[State]) (*SessionSnapshot[State], error) {
	sess.snapMu.Lock()
	defer sess.snapMu.Unlock()
	snap := &SessionSnapshot[State]{TurnIndex: sess.TurnIndex(), Event: SnapshotEventDetach, Status: StatusPending, State: *sess.State()}
	if err := f.save(ctx, sess, snap); err != nil {
		return nil, err
	}
	sess.detached = true
	return snap, nil
}

// settle records how a detached turn ended, continuing its pending snapshot. An abort
// that settled it first wins: this commit then conflicts, and nothing is lost.
func (f *SessionFlow[Stream, State]) settle(work context.Context, sess *Session[State], resp *Responder[Stream], pending *SessionSnapshot[State], runErr error) {
	snap := &SessionSnapshot[State]{
		SessionID: sess.ID(), ParentID: pending.SnapshotID, CreatedAt: time.Now(),
		TurnIndex: pending.TurnIndex, Event: SnapshotEventSettle, Status: StatusCompleted,
		FinishReason: resp.lastReason(), State: *sess.State(),
	}
	if runErr != nil {
		snap.Status, snap.FinishReason, snap.Error = StatusFailed, "", abi.AsError(runErr)
	}
	// The work may be cancelled (by an abort, which settled it already): the commit
	// must still run to learn so.
	err := f.store.SaveSnapshot(context.WithoutCancel(work), snap)
	switch {
	case errors.Is(err, ErrConflict):
		// Aborted meanwhile: the abort's snapshot settles the turn.
	case err != nil:
		slog.ErrorContext(work, "session: a detached turn's result could not be saved; its snapshot stays pending",
			"flow", f.desc.Name, "session", sess.ID(), "snapshot", pending.SnapshotID, "error", err)
	}
}

// Abort stops a detached turn: it settles the turn's pending snapshot as aborted, with
// the state the turn had when it detached, and cancels the turn if it runs in this
// process. It returns the aborted snapshot. A snapshot that is not pending (its turn
// already ended) is an error wrapping ErrNotPending, an unknown one ErrSnapshotNotFound.
func (f *SessionFlow[Stream, State]) Abort(ctx context.Context, snapshotID string) (*SessionSnapshot[State], error) {
	if f.store == nil {
		return nil, fmt.Errorf("session: flow %q: %w", f.desc.Name, ErrNoSnapshotStore)
	}
	snap, err := f.store.GetSnapshot(ctx, snapshotID)
	if err != nil {
		return nil, fmt.Errorf("session: flow %q: abort: %w", f.desc.Name, err)
	}
	if snap.Status != StatusPending {
		return nil, fmt.Errorf("session: flow %q: abort: %w: snapshot %s is %s", f.desc.Name, ErrNotPending, snapshotID, statusOf(snap))
	}
	aborted := &SessionSnapshot[State]{
		SessionID: snap.SessionID, ParentID: snap.SnapshotID, CreatedAt: time.Now(),
		TurnIndex: snap.TurnIndex, Event: SnapshotEventSettle, Status: StatusAborted,
		FinishReason: "aborted", State: snap.State,
	}
	if err := f.store.SaveSnapshot(ctx, aborted); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("session: flow %q: abort: %w: snapshot %s settled before the abort", f.desc.Name, ErrNotPending, snapshotID)
		}
		return nil, fmt.Errorf("session: flow %q: abort: %w", f.desc.Name, err)
	}
	if v, ok := f.detached.Load(snapshotID); ok {
		v.(*detachedRun).cancel(errAborted)
	}
	return aborted, nil
}

func statusOf[State any](snap *SessionSnapshot[State]) SnapshotStatus {
	if snap.Status == "" {
		return StatusCompleted
	}
	return snap.Status
}

// Wait waits until the detached turn of a pending snapshot settles and returns the
// snapshot that settled it; a snapshot that is not pending is returned at once. A turn
// running in this process is waited for directly; one running elsewhere (another host
// sharing the store) is polled for, ever less often, until ctx ends.
func (f *SessionFlow[Stream, State]) Wait(ctx context.Context, snapshotID string) (*SessionSnapshot[State], error) {
	if f.store == nil {
		return nil, fmt.Errorf("session: flow %q: %w", f.desc.Name, ErrNoSnapshotStore)
	}
	delay := 10 * time.Millisecond
	for {
		if v, ok := f.detached.Load(snapshotID); ok {
			select {
			case <-v.(*detachedRun).done:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		snap, err := f.store.GetSnapshot(ctx, snapshotID)
		if err != nil || snap.Status != StatusPending {
			return snap, err
		}
		select {
		case <-time.After(delay):
			delay = min(2*delay, time.Second)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// statusSender decodes status reports into Stream and sends them through resp.
func statusSender[Stream any](resp *Responder[Stream]) agent.StatusFunc {
	return func(ctx context.Context, raw json.RawMessage) error {
		var s Stream
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("session: a status report does not decode into the flow's status type %T: %w", s, err)
		}
		return resp.SendStatus(s)
	}
}

// The input of the snapshot actions.
type (
	// SnapshotRequest names a snapshot: the input of getSnapshot and abortSnapshot.
	SnapshotRequest struct {
		SnapshotID string `json:"snapshotId"`
	}
	// SessionRequest names a session: the input of listSnapshots.
	SessionRequest struct {
		SessionID string `json:"sessionId"`
	}
)

// ActionTypeSnapshotStore is the action type of a flow's snapshot actions (seed 003,
// section 9).
const ActionTypeSnapshotStore agent.ActionType = "snapshot-store"

// SnapshotActions returns the actions through which clients that do not link this
// package (Genkit's Developer UI, a server's clients) read and abort the flow's
// snapshots, as seed 003 names them: /snapshot-store/<flow>/getSnapshot,
// /snapshot-store/<flow>/listSnapshots and /snapshot-store/<flow>/abortSnapshot. A
// flow without a snapshot store has none. DefineSessionFlow and DefineAgent register
// them.
func (f *SessionFlow[Stream, State]) SnapshotActions() []agent.Runnable {
	if f.store == nil {
		return nil
	}
	name := f.desc.Name
	return []agent.Runnable{
		agent.NewAction(ActionTypeSnapshotStore, name+"/getSnapshot", "Reads a snapshot of session flow "+name+".",
			func(ctx context.Context, in SnapshotRequest) (*SessionSnapshot[State], error) {
				return f.store.GetSnapshot(ctx, in.SnapshotID)
			}),
		agent.NewAction(ActionTypeSnapshotStore, name+"/listSnapshots", "Lists the snapshots of a session of session flow "+name+".",
			func(ctx context.Context, in SessionRequest) ([]*SessionSnapshot[State], error) {
				return f.store.ListSnapshots(ctx, in.SessionID)
			}),
		agent.NewAction(ActionTypeSnapshotStore, name+"/abortSnapshot", "Aborts the detached turn of a pending snapshot of session flow "+name+".",
			func(ctx context.Context, in SnapshotRequest) (*SessionSnapshot[State], error) {
				return f.Abort(ctx, in.SnapshotID)
			}),
	}
}
