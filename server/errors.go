package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/tenant"
)

// The server's own errors, for errors.Is.
var (
	// ErrBadJSON: a request body is not valid JSON, or not of the expected shape.
	ErrBadJSON = errors.New("malformed JSON")
	// ErrTooLarge: a request body is larger than the server accepts.
	ErrTooLarge = errors.New("request body too large")
	// ErrAgentNotFound: no agent of that name is served.
	ErrAgentNotFound = errors.New("agent not found")
	// ErrSessionNotFound: the agent keeps no session of that ID, and none is open.
	ErrSessionNotFound = errors.New("session not found")
	// ErrSessionBusy: a turn is already running on the session.
	ErrSessionBusy = errors.New("a turn is already running on this session")
	// ErrSessionOpen: a resume from a snapshot names a session open on this server.
	ErrSessionOpen = errors.New("the session is open")
	// ErrNoRunningTurn: a cancel found no turn running on the session.
	ErrNoRunningTurn = errors.New("no turn is running on this session")
	// ErrCancelled: the client cancelled the turn.
	ErrCancelled = errors.New("the turn was cancelled")
	// ErrShuttingDown: the server is shutting down and starts no new turn.
	ErrShuttingDown = errors.New("the server is shutting down")
	// ErrUnsupportedMediaType: a request's body is not JSON.
	ErrUnsupportedMediaType = errors.New("the body must be JSON (Content-Type: application/json)")
	// ErrHostNotAllowed: a request to a server of one deployment names a host it does
	// not answer under.
	ErrHostNotAllowed = errors.New("host not allowed")
	// ErrTooManyWebSockets: a session already has as many WebSockets as the server
	// allows one.
	ErrTooManyWebSockets = errors.New("too many WebSockets on this session")
)

// errorCodes maps errors to an HTTP status and a stable code, the one place where
// either is decided. The first entry that errors.Is matches wins, so the more specific
// errors come first.
var errorCodes = []struct {
	err    error
	status int
	code   abi.ErrorCode
}{
	{ErrBadJSON, http.StatusBadRequest, "invalid_json"},
	{ErrUnauthenticated, http.StatusUnauthorized, "unauthenticated"},
	{tenant.ErrOverQuota, http.StatusTooManyRequests, "over_quota"},
	{tenant.ErrUnknownTenant, http.StatusNotFound, "tenant_not_found"},
	{tenant.ErrKeyNotFound, http.StatusNotFound, "key_not_found"},
	{ErrTooLarge, http.StatusRequestEntityTooLarge, "body_too_large"},
	{ErrUnsupportedMediaType, http.StatusUnsupportedMediaType, "unsupported_media_type"},
	{ErrHostNotAllowed, http.StatusForbidden, "host_not_allowed"},
	{ErrTooManyWebSockets, http.StatusTooManyRequests, "too_many_websockets"},
	{ErrAgentNotFound, http.StatusNotFound, "agent_not_found"},
	{ErrSessionNotFound, http.StatusNotFound, "session_not_found"},
	{session.ErrSnapshotNotFound, http.StatusNotFound, "snapshot_not_found"},
	{session.ErrSnapshotAmbiguous, http.StatusBadRequest, "ambiguous_snapshot"},
	{agent.ErrNotFound, http.StatusNotFound, abi.CodeNotFound},
	{agent.ErrInvalidResume, http.StatusUnprocessableEntity, "invalid_resume"},
	{routes.ErrInvalidData, http.StatusUnprocessableEntity, "invalid_data"},
	{agent.ErrInvalidInput, http.StatusBadRequest, abi.CodeInvalidInput},
	// The model's answer is not the JSON asked for: the model is at fault, upstream.
	{agent.ErrInvalidOutput, http.StatusBadGateway, "invalid_output"},
	{agent.ErrInvalidToolInput, http.StatusBadRequest, abi.CodeInvalidInput},
	{session.ErrInvalidInit, http.StatusBadRequest, "invalid_init"},
	{session.ErrServerManaged, http.StatusBadRequest, "server_managed"},
	{session.ErrNoSnapshotStore, http.StatusConflict, "no_snapshot_store"},
	{session.ErrNotResumable, http.StatusConflict, "not_resumable"},
	{session.ErrConflict, http.StatusConflict, "conflict"},
	{ErrSessionBusy, http.StatusConflict, "session_busy"},
	{ErrSessionOpen, http.StatusConflict, "session_open"},
	{ErrNoRunningTurn, http.StatusConflict, "no_running_turn"},
	{ErrCancelled, http.StatusConflict, "cancelled"},
	{ErrShuttingDown, http.StatusServiceUnavailable, "shutting_down"},
	// An ID the store cannot hold (over store.MaxNameLen bytes) is the client's.
	{store.ErrInvalid, http.StatusBadRequest, "invalid_id"},
	{store.ErrUnavailable, http.StatusServiceUnavailable, "store_unavailable"},
}

// classify returns the HTTP status and the error envelope for err.
func classify(err error) (int, *abi.Error) {
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.status, &abi.Error{Code: e.code, Message: err.Error()}
		}
	}
	var te *session.TurnError
	if errors.As(err, &te) && te.Code != "" {
		// A refusal from a flow in another process keeps only its code.
		return http.StatusBadRequest, &abi.Error{Code: te.Code, Message: te.Message}
	}
	return http.StatusInternalServerError, &abi.Error{Code: abi.CodeInternal, Message: err.Error()}
}

// writeError answers a request with err's status and envelope, and with when to
// retry a turn a quota refused.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := classify(err)
	retryAfter(w, err)
	if status >= 500 && !errors.Is(err, ErrShuttingDown) { // a drain's refusals are its plan
		slog.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	writeJSON(w, status, body)
}

// retryAfter sets the Retry-After header of a response to a turn a quota refused,
// unless waiting will not help (stored bytes), and of a request refused by a
// draining server, which another host takes.
func retryAfter(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrShuttingDown) {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterDraining))
		return
	}
	var qe *tenant.QuotaError
	if errors.As(err, &qe) && qe.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(qe.RetryAfter.Seconds())))))
	}
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// decodeBody decodes a request's JSON body into v (see decodeStrict), refusing bodies
// over the limit.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	data, err := readAll(w, r, limit)
	if err != nil {
		return err
	}
	return decodeStrict(data, v)
}

// readAll reads a request's body, refusing one over the limit.
func readAll(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, mbe.Limit)
		}
		return nil, fmt.Errorf("%w: reading the body: %v", ErrBadJSON, err)
	}
	return data, nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and trailing
// data, then applies v's own rules (checked).
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: the body is empty", ErrBadJSON)
		}
		return fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: more than one JSON value", ErrBadJSON)
	}
	return check(v)
}

// decodeLenient decodes one JSON value into v, ignoring fields it does not know (the
// OpenAI-compatible endpoint and the reflection API take requests of clients that send
// more than is read), then applies v's own rules (checked).
func decodeLenient(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	return check(v)
}

// checked is a request whose decoding has rules beyond its fields' types: a null
// where an object is wanted, fields that exclude each other.
type checked interface{ check() error }

// check applies v's own rules, if it has any.
func check(v any) error {
	if c, ok := v.(checked); ok {
		if err := c.check(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadJSON, err)
		}
	}
	return nil
}
