package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/terrarium-ai/terrarium/agent"
)

// A detached turn (as Genkit's agents detach) goes on in the background after its
// client has gone:
//
//	detach:  pending snapshot P (the state so far, parent = the last snapshot); the
//	         connection ends, streaming nothing: its output names P
//	         -> the turn runs on, streaming nowhere, taking no snapshot of its own
//	settle:  P settled under its own ID: completed (the final state) or failed (the
//	         error, the state from before the turn)
//	abort:   P settled as aborted (the state from before the turn); the running turn is
//	         cancelled
//
// A snapshot settles once (store.Store.Settle), so exactly one of settle and abort
// lands: whichever comes first. The session's line continues from P.

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
	// A detached turn streams nothing, as Genkit's: the output names the pending
	// snapshot.
	resp.out.release()
	output := f.output(sess, nil)
	output.FinishReason = FinishDetached

	go func() {
		in := *in
		in.Detach = false
		var err error
		if len(in.Messages) > 0 || in.Resume != nil {
			sess.beginTurn()
			select {
			case bodyIn <- &in:
			case err = <-done:
			}
		}
		if err == nil {
			close(bodyIn)
			err = <-done
		}
		if err != nil && sess.inTurn() {
			// Failing the turn puts the state back as it was when the turn began.
			resp.FailTurn(err)
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

// settle records how a detached turn ended in its pending snapshot: completed with the
// final state, or failed (a failed turn, or the body's error) with the error and the
// state the session went back to. An abort that settled it first wins: this settle
// then conflicts, and nothing is lost.
func (f *SessionFlow[Stream, State]) settle(work context.Context, sess *Session[State], resp *Responder[Stream], pending *SessionSnapshot[State], runErr error) {
	reason, failure := resp.last()
	if runErr != nil && failure == nil {
		failure = newTurnError(runErr)
	}
	snap := &SessionSnapshot[State]{SnapshotID: pending.SnapshotID, Status: StatusCompleted, FinishReason: reason, State: *sess.State()}
	if failure != nil {
		snap.Status, snap.FinishReason, snap.Error = StatusFailed, FinishFailed, failure
	}
	// The work may be cancelled (by an abort, which settled it already): the settle
	// must still run to learn so.
	err := f.store.SettleSnapshot(context.WithoutCancel(work), snap)
	switch {
	case errors.Is(err, ErrConflict):
		// Aborted meanwhile: the abort settled the turn.
	case err != nil:
		slog.ErrorContext(work, "session: a detached turn's result could not be saved; its snapshot stays pending",
			"flow", f.desc.Name, "session", sess.ID(), "snapshot", pending.SnapshotID, "error", err)
	}
}

// Abort stops a detached turn, as Genkit's agents abort: it settles the turn's pending
// snapshot as aborted, with the state from before the turn, cancels the turn if it
// runs in this process, and returns pending, the status it had. Aborting a snapshot
// whose turn has settled changes nothing and returns the status it settled with
// (completed, failed or aborted), as for any snapshot that is not pending; an unknown
// snapshot returns ok false. err is for what the store could not do, and for a flow
// without a snapshot store (ErrNoSnapshotStore).
func (f *SessionFlow[Stream, State]) Abort(ctx context.Context, snapshotID string) (prev SnapshotStatus, ok bool, err error) {
	if f.store == nil {
		return "", false, fmt.Errorf("session: flow %q: %w", f.desc.Name, ErrNoSnapshotStore)
	}
	snap, err := f.store.GetSnapshot(ctx, snapshotID)
	if errors.Is(err, ErrSnapshotNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("session: flow %q: abort: %w", f.desc.Name, err)
	}
	if snap.Status != StatusPending {
		return statusOf(snap), true, nil
	}
	aborted := &SessionSnapshot[State]{SnapshotID: snapshotID, Status: StatusAborted, FinishReason: FinishAborted, State: snap.State}
	if err := f.store.SettleSnapshot(ctx, aborted); errors.Is(err, ErrConflict) {
		// The turn settled first: there was nothing left to abort.
		if snap, err = f.store.GetSnapshot(ctx, snapshotID); err != nil {
			return "", false, fmt.Errorf("session: flow %q: abort: %w", f.desc.Name, err)
		}
		return statusOf(snap), true, nil
	} else if err != nil {
		return "", false, fmt.Errorf("session: flow %q: abort: %w", f.desc.Name, err)
	}
	if v, ok := f.detached.Load(snapshotID); ok {
		v.(*detachedRun).cancel(errAborted)
	}
	return StatusPending, true, nil
}

func statusOf[State any](snap *SessionSnapshot[State]) SnapshotStatus {
	if snap.Status == "" {
		return StatusCompleted
	}
	return snap.Status
}

// Wait waits until the detached turn of a pending snapshot settles and returns the
// snapshot, settled; a snapshot that is not pending is returned at once. A turn
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

// The input and output of the snapshot actions.
type (
	// SnapshotRequest names a snapshot: the input of getSnapshot and abortSnapshot.
	SnapshotRequest struct {
		SnapshotID string `json:"snapshotId"`
	}
	// SessionRequest names a session: the input of listSnapshots.
	SessionRequest struct {
		SessionID string `json:"sessionId"`
	}
	// AbortResponse is the output of abortSnapshot, Genkit's AgentAbortResponse: the
	// snapshot named, and its status before the abort (pending when the abort stopped
	// its turn), absent for an unknown snapshot.
	AbortResponse struct {
		SnapshotID string         `json:"snapshotId"`
		Status     SnapshotStatus `json:"status,omitempty"`
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
		agent.NewAction(ActionTypeSnapshotStore, name+"/abortSnapshot", "Aborts the detached turn of a pending snapshot of session flow "+name+"; returns the status the snapshot had.",
			func(ctx context.Context, in SnapshotRequest) (*AbortResponse, error) {
				prev, _, err := f.Abort(ctx, in.SnapshotID)
				if err != nil {
					return nil, err
				}
				return &AbortResponse{SnapshotID: in.SnapshotID, Status: prev}, nil
			}),
	}
}
