package routes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/store"
)

// SessionStatus is where a persisted session is in its life.
type SessionStatus string

// The session statuses.
const (
	SessionActive    SessionStatus = "active"
	SessionCompleted SessionStatus = "completed"
	SessionAbandoned SessionStatus = "abandoned"
)

// SessionData is a persisted conversation (seed 002's SessionData): who it is with,
// its status, and where it stands.
type SessionData struct {
	ID        string        `json:"id"`
	UserID    string        `json:"userId,omitempty"`
	AgentName string        `json:"agentName,omitempty"`
	Status    SessionStatus `json:"status"`
	// CurrentRoute and CurrentStep repeat State's, for listings.
	CurrentRoute string `json:"currentRoute,omitempty"`
	CurrentStep  string `json:"currentStep,omitempty"`
	// State is where the conversation stands, collected data included (seed 002's
	// collectedData).
	State *State `json:"state,omitempty"`
	// Metadata is the application's own.
	Metadata map[string]any `json:"metadata,omitempty"`
	// MessageCount and LastMessageAt are read from the session's messages.
	MessageCount  int        `json:"messageCount"`
	LastMessageAt *time.Time `json:"lastMessageAt,omitempty"`
	CompletedAt   *time.Time `json:"completedAt,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`

	// head and turn are the record Session read it from, which a turn's save
	// continues (saveTurn).
	head string
	turn int
}

// MessageRole says who wrote a persisted message.
type MessageRole string

// The message roles.
const (
	RoleUser   MessageRole = "user"
	RoleAgent  MessageRole = "agent"
	RoleSystem MessageRole = "system"
)

// MessageData is a persisted message (seed 002's MessageData).
type MessageData struct {
	ID        string      `json:"id"`
	SessionID string      `json:"sessionId"`
	UserID    string      `json:"userId,omitempty"`
	Role      MessageRole `json:"role"`
	Content   string      `json:"content"`
	Route     string      `json:"route,omitempty"`
	Step      string      `json:"step,omitempty"`
	ToolCalls []ToolCall  `json:"toolCalls,omitempty"`
	CreatedAt time.Time   `json:"createdAt"`
}

// Manager keeps sessions and their messages (seed 002's PersistenceManager) in any
// store.Store: memory, Badger, a server database. There are no adapters per database:
// the store interface is the adapter. Each session, each session's messages and each
// user's sessions are a line of records (a record per version, per message, per
// session started), and the store's rule that a record is continued once serializes
// concurrent writers: a writer that lost the race reads the new head and retries.
type Manager struct {
	st  store.Store
	ns  string
	now func() time.Time
}

// ManagerOption configures NewManager.
type ManagerOption interface {
	applyManager(*Manager) error
}

type managerFunc func(*Manager) error

func (f managerFunc) applyManager(m *Manager) error { return f(m) }

// WithManagerNamespace keeps the sessions under a namespace of the store ("sessions"
// unless set): tenants given different namespaces never see each other's sessions.
func WithManagerNamespace(ns string) ManagerOption {
	return managerFunc(func(m *Manager) error {
		if err := store.CheckNames(ns); err != nil {
			return fmt.Errorf("routes: %w: WithManagerNamespace: %w", agent.ErrInvalidOption, err)
		}
		m.ns = ns
		return nil
	})
}

// WithManagerClock sets the clock of the times the manager records (time.Now unless
// set).
func WithManagerClock(now func() time.Time) ManagerOption {
	return managerFunc(func(m *Manager) error { m.now = now; return nil })
}

// NewManager returns a manager keeping sessions in st. It panics on an invalid option.
func NewManager(st store.Store, opts ...ManagerOption) *Manager {
	m := &Manager{st: st, ns: "sessions", now: time.Now}
	for _, o := range opts {
		if err := o.applyManager(m); err != nil {
			panic(err)
		}
	}
	return m
}

// The lines of records the manager keeps.
func sessionLine(id string) string  { return "session:" + id }
func messageLine(id string) string  { return "messages:" + id }
func userLine(userID string) string { return "user:" + userID }

// maxRetries bounds how often a write retries after losing a race to another writer.
const maxRetries = 32

// appendRecord adds a record at the end of a line, retrying from the new head when
// another writer appended first. next makes the record's value for its turn number.
func (m *Manager) appendRecord(ctx context.Context, line string, next func(turn int) (any, error)) error {
	for range maxRetries {
		parent, turn := "", 0
		head, err := m.st.Head(ctx, m.ns, line)
		switch {
		case err == nil:
			parent, turn = head.ID, head.Turn+1
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		v, err := next(turn)
		if err != nil {
			return err
		}
		err = m.commit(ctx, line, parent, turn, v)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("routes: %w: line %s: another writer kept appending first", store.ErrConflict, line)
}

// commit writes the record continuing parent in a line.
func (m *Manager) commit(ctx context.Context, line, parent string, turn int, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(line + "\x00" + parent + "\x00" + string(data)))
	rec := store.Record{ID: hex.EncodeToString(sum[:]), Session: line, Parent: parent, Turn: turn, Data: data}
	return m.st.Commit(ctx, m.ns, rec, nil)
}

// CreateSession starts a session from data: its ID (a new UUID when empty), user, agent
// name, state and metadata. It is active.
func (m *Manager) CreateSession(ctx context.Context, data SessionData) (*SessionData, error) {
	s := data
	if s.ID == "" {
		s.ID = uuid.NewString()
	}
	now := m.now()
	s.Status, s.CreatedAt, s.UpdatedAt, s.CompletedAt = SessionActive, now, now, nil
	s.MessageCount, s.LastMessageAt = 0, nil
	s.syncState()
	if err := store.CheckNames(s.ID); err != nil {
		return nil, fmt.Errorf("routes: session ID: %w", err)
	}
	// A session's first record has no parent, and the store lets one record continue
	// "no parent": of two creations of one ID, the second fails.
	if err := m.commit(ctx, sessionLine(s.ID), "", 0, s); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("routes: creating session %s: it exists already: %w", s.ID, err)
		}
		return nil, fmt.Errorf("routes: creating session %s: %w", s.ID, err)
	}
	if s.UserID != "" {
		if err := m.appendRecord(ctx, userLine(s.UserID), func(int) (any, error) { return s.ID, nil }); err != nil {
			return nil, fmt.Errorf("routes: indexing session %s of user %s: %w", s.ID, s.UserID, err)
		}
	}
	return &s, nil
}

func (s *SessionData) syncState() {
	s.CurrentRoute, s.CurrentStep = "", ""
	if s.State == nil {
		return
	}
	if r := s.State.CurrentRoute; r != nil {
		s.CurrentRoute = r.ID
	}
	if st := s.State.CurrentStep; st != nil {
		s.CurrentStep = st.ID
	}
}

// Session returns a session, or an error wrapping ErrSessionNotFound.
func (m *Manager) Session(ctx context.Context, id string) (*SessionData, error) {
	head, err := m.st.Head(ctx, m.ns, sessionLine(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("routes: %w: %s", ErrSessionNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	var s SessionData
	if err := json.Unmarshal(head.Data, &s); err != nil {
		return nil, fmt.Errorf("routes: session %s: %w", id, err)
	}
	s.head, s.turn = head.ID, head.Turn
	last, err := m.st.Head(ctx, m.ns, messageLine(id))
	switch {
	case err == nil:
		var msg MessageData
		if err := json.Unmarshal(last.Data, &msg); err != nil {
			return nil, fmt.Errorf("routes: session %s: message: %w", id, err)
		}
		s.MessageCount, s.LastMessageAt = last.Turn+1, &msg.CreatedAt
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return &s, nil
}

// update changes a session with fn, retrying when another writer changed it first.
func (m *Manager) update(ctx context.Context, id string, fn func(*SessionData) error) (*SessionData, error) {
	var out *SessionData
	err := m.appendRecord(ctx, sessionLine(id), func(turn int) (any, error) {
		if turn == 0 {
			return nil, fmt.Errorf("routes: %w: %s", ErrSessionNotFound, id)
		}
		s, err := m.Session(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := fn(s); err != nil {
			return nil, err
		}
		s.UpdatedAt = m.now()
		s.MessageCount, s.LastMessageAt = 0, nil // read from the messages, never stored
		out = s
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	return m.Session(ctx, out.ID)
}

// SetStatus changes a session's status (seed 002's updateSessionStatus).
func (m *Manager) SetStatus(ctx context.Context, id string, status SessionStatus) (*SessionData, error) {
	switch status {
	case SessionActive, SessionCompleted, SessionAbandoned:
	default:
		return nil, fmt.Errorf("routes: %w: session status %q", agent.ErrInvalidInput, status)
	}
	return m.update(ctx, id, func(s *SessionData) error {
		s.Status, s.CompletedAt = status, nil
		if status == SessionCompleted {
			t := m.now()
			s.CompletedAt = &t
		}
		return nil
	})
}

// Complete marks a session completed.
func (m *Manager) Complete(ctx context.Context, id string) (*SessionData, error) {
	return m.SetStatus(ctx, id, SessionCompleted)
}

// Abandon marks a session abandoned.
func (m *Manager) Abandon(ctx context.Context, id string) (*SessionData, error) {
	return m.SetStatus(ctx, id, SessionAbandoned)
}

// SaveState records where a session's conversation stands: the State a turn returned.
func (m *Manager) SaveState(ctx context.Context, id string, st *State) (*SessionData, error) {
	return m.update(ctx, id, func(s *SessionData) error {
		s.State = st.clone()
		s.syncState()
		return nil
	})
}

// UpdateContext merges updates into a session's own context, key by key
// (State.UpdateContext): its next turn renders from it.
func (m *Manager) UpdateContext(ctx context.Context, id string, updates any) (*SessionData, error) {
	return m.update(ctx, id, func(s *SessionData) error {
		if s.State == nil {
			s.State = NewState(id)
		}
		return s.State.UpdateContext(updates)
	})
}

// messageRoles are the roles of the messages a conversation saves, by their role in it.
var messageRoles = map[abi.Role]MessageRole{abi.RoleUser: RoleUser, abi.RoleModel: RoleAgent, abi.RoleSystem: RoleSystem}

// saveTurn saves a turn of an agent that keeps its sessions (WithPersistence): its
// State, first, then the turn's new messages and the answer. The save continues the
// record the turn loaded its session from, so that of two turns run at once on one
// session, the second to save fails with store.ErrConflict instead of overwriting
// the first's State; a session loaded by none (loaded nil) is created.
func (m *Manager) saveTurn(ctx context.Context, loaded *SessionData, agentName string, res *Response, msgs []*abi.Message) error {
	st := res.Session
	if loaded == nil {
		if _, err := m.CreateSession(ctx, SessionData{ID: st.ID, AgentName: agentName, State: st, Metadata: st.Metadata}); err != nil {
			return err
		}
	} else {
		s := *loaded
		s.State = st.clone()
		s.syncState()
		s.UpdatedAt = m.now()
		s.MessageCount, s.LastMessageAt = 0, nil // read from the messages, never stored
		if err := m.commit(ctx, sessionLine(s.ID), loaded.head, loaded.turn+1, s); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("routes: session %s changed while the turn ran, and the turn was not saved: %w", s.ID, err)
			}
			return err
		}
	}
	for _, msg := range msgs {
		role, ok := messageRoles[msg.Role]
		if !ok {
			continue // tool messages are the turn's own
		}
		if _, err := m.SaveMessage(ctx, MessageData{SessionID: st.ID, Role: role, Content: msg.Text()}); err != nil {
			return err
		}
	}
	if res.Message == "" {
		return nil
	}
	answer := MessageData{SessionID: st.ID, Role: RoleAgent, Content: res.Message, ToolCalls: res.ToolCalls}
	if r := st.CurrentRoute; r != nil {
		answer.Route = r.ID
	}
	if s := st.CurrentStep; s != nil {
		answer.Step = s.ID
	}
	_, err := m.SaveMessage(ctx, answer)
	return err
}

// UserSessions returns a user's sessions, the most recent first, at most limit of them
// (all when limit is 0).
func (m *Manager) UserSessions(ctx context.Context, userID string, limit int) ([]*SessionData, error) {
	recs, err := m.st.Records(ctx, m.ns, userLine(userID))
	if err != nil {
		return nil, err
	}
	slices.Reverse(recs)
	var out []*SessionData
	for _, rec := range recs {
		if limit > 0 && len(out) == limit {
			break
		}
		var id string
		if err := json.Unmarshal(rec.Data, &id); err != nil {
			return nil, fmt.Errorf("routes: sessions of user %s: %w", userID, err)
		}
		s, err := m.Session(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// FindActiveSession returns the user's most recent active session, or an error
// wrapping ErrSessionNotFound.
func (m *Manager) FindActiveSession(ctx context.Context, userID string) (*SessionData, error) {
	sessions, err := m.UserSessions(ctx, userID, 0)
	if err != nil {
		return nil, err
	}
	for _, s := range sessions {
		if s.Status == SessionActive {
			return s, nil
		}
	}
	return nil, fmt.Errorf("routes: %w: user %s has no active session", ErrSessionNotFound, userID)
}

// SaveMessage appends a message to its session. Its ID is made when empty, its time
// set.
func (m *Manager) SaveMessage(ctx context.Context, msg MessageData) (*MessageData, error) {
	if _, err := m.Session(ctx, msg.SessionID); err != nil {
		return nil, err
	}
	switch msg.Role {
	case RoleUser, RoleAgent, RoleSystem:
	default:
		return nil, fmt.Errorf("routes: %w: message role %q", agent.ErrInvalidInput, msg.Role)
	}
	out := msg
	if out.ID == "" {
		out.ID = uuid.NewString()
	}
	out.CreatedAt = m.now()
	if err := m.appendRecord(ctx, messageLine(msg.SessionID), func(int) (any, error) { return out, nil }); err != nil {
		return nil, fmt.Errorf("routes: saving a message of session %s: %w", msg.SessionID, err)
	}
	return &out, nil
}

// Messages returns a session's messages in order: the last limit of them (all when
// limit is 0).
func (m *Manager) Messages(ctx context.Context, sessionID string, limit int) ([]*MessageData, error) {
	if _, err := m.Session(ctx, sessionID); err != nil {
		return nil, err
	}
	recs, err := m.st.Records(ctx, m.ns, messageLine(sessionID))
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(recs) > limit {
		recs = recs[len(recs)-limit:]
	}
	out := make([]*MessageData, len(recs))
	for i, rec := range recs {
		var msg MessageData
		if err := json.Unmarshal(rec.Data, &msg); err != nil {
			return nil, fmt.Errorf("routes: message of session %s: %w", sessionID, err)
		}
		out[i] = &msg
	}
	return out, nil
}

// History returns a session's messages as a conversation for Respond (seed 002's
// loadSessionHistory): the user's as user messages, the agent's as model messages,
// system ones as system messages.
func (m *Manager) History(ctx context.Context, sessionID string, limit int) ([]*abi.Message, error) {
	msgs, err := m.Messages(ctx, sessionID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*abi.Message, len(msgs))
	for i, msg := range msgs {
		switch msg.Role {
		case RoleUser:
			out[i] = abi.NewUserTextMessage(msg.Content)
		case RoleAgent:
			out[i] = abi.NewModelTextMessage(msg.Content)
		default:
			out[i] = abi.NewSystemTextMessage(msg.Content)
		}
	}
	return out, nil
}
