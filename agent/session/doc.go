// Package session runs stateful, multi-turn agents: bidirectional streaming actions
// with turns (seed 004), SessionFlow with sessions, a Responder and content-addressed
// snapshots (seed 003), and DefineAgent, whose turn loop renders a base prompt from the
// session's state and generates (seed 000).
//
// Who owns a session's state is decided by the flow: with a snapshot store the server
// does (clients resume by snapshot or session ID and never send state); without one the
// client does (it sends the state back, with the session's ID inside). A turn may run
// detached: the client leaves at once with a pending snapshot that the turn settles in
// the background, and which Abort can settle first.
//
// Names follow the seeds: SessionFlow, SessionState, SessionSnapshot, Responder,
// DefineSessionFlow, DefineAgent, StreamBidi, WithSnapshotStore, SnapshotOn.
package session
