package server

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
)

// The OpenAI-compatible endpoints map agents to model names, so that any OpenAI client
// can talk to a Terrarium agent. A request is one turn: its last message, the user's,
// is the turn's input, and its answer is the text the agent's model streams (tools run
// on the server). The session is the one the X-Terrarium-Session-Id header names, or a
// new one, named by the response's header of the same name. An agent that keeps its
// sessions keeps their history: the request's earlier messages are not replayed into
// it (a client cannot write the model's side of a kept conversation). For an agent
// whose clients keep the state, they are the conversation so far.

// SessionHeader names a session to continue, on requests, and the session of a turn,
// on responses.
const SessionHeader = "X-Terrarium-Session-Id"

// ChatRequest is the part of an OpenAI Chat Completions request Terrarium reads; the
// other fields (sampling settings and the like) are the agent's to decide, and
// ignored.
type ChatRequest struct {
	Model    string        `json:"model"`
	Messages []ChatMessage `json:"messages"`
	Stream   bool          `json:"stream,omitempty"`
}

// ChatMessage is an OpenAI chat message; Content is a string or a list of parts, of
// which the text parts count.
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatPart is a part of a message's content; those of type text count.
type chatPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// text returns the message's text: its content, a string or a list of parts, of which
// the text parts count. Null is neither.
func (m ChatMessage) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", errors.New("content is null or missing: want a string or a list of parts")
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []*chatPart
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", errors.New("content is neither a string nor a list of parts")
	}
	if err := abi.NoNulls("content", parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// openAIError is the error body OpenAI clients read: {"error": {"message", "type",
// "code"}}, with Terrarium's code.
func openAIError(w http.ResponseWriter, r *http.Request, err error) {
	status, e := classify(err)
	retryAfter(w, err)
	kind := "invalid_request_error"
	if status >= 500 {
		kind = "server_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": e.Message, "type": kind, "code": e.Code}})
}

func (s *Server) openAIModels(w http.ResponseWriter, r *http.Request) {
	data := []map[string]any{}
	for _, a := range scopeOf(r).agents() {
		data = append(data, map[string]any{"id": a.Name, "object": "model", "created": 0, "owned_by": "terrarium"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req ChatRequest
	body, err := readAll(w, r, s.maxBody)
	if err == nil {
		// OpenAI clients send many fields this endpoint ignores.
		err = decodeLenient(body, &req)
	}
	if err != nil {
		openAIError(w, r, err)
		return
	}
	a, err := scopeOf(r).agent(req.Model)
	if err != nil {
		openAIError(w, r, fmt.Errorf("%w: no agent serves model %q (GET /v1/models lists them)", ErrAgentNotFound, req.Model))
		return
	}
	history, input, err := chatInput(req.Messages)
	if err != nil {
		openAIError(w, r, err)
		return
	}
	l, opened, err := s.chatSession(r, a, history)
	if err != nil {
		openAIError(w, r, err)
		return
	}
	if opened {
		// The client does not hold the session open: close it after the turn (a kept
		// session reopens when the header names it again).
		defer s.sessions.closeSession(l)
	}
	w.Header().Set(SessionHeader, l.id)
	done, err := s.sessions.admit(r.Context(), a)
	if err != nil {
		if r.Context().Err() == nil { // else its client left while it waited in line
			openAIError(w, r, err)
		}
		return
	}

	c := &completion{id: "chatcmpl-" + rand.Text(), created: time.Now().Unix(), model: a.Name}
	var events *sseWriter
	first := true
	err = s.sessions.turn(l, done, &session.SessionFlowInput{Messages: []*abi.Message{input}}, func(ch *session.AnyChunk) error {
		if first {
			first = false
			if ch.Error != nil {
				return ch.Error
			}
			if req.Stream {
				events = newSSE(w)
				if err := events.send("", c.chunk(map[string]any{"role": "assistant", "content": ""}, nil)); err != nil {
					return err
				}
			}
		}
		if ch.EndTurn {
			c.finish = finishReason(ch.FinishReason)
		}
		if ch.Chunk == nil || ch.Chunk.Role != abi.RoleModel {
			return nil
		}
		text := ch.Chunk.Text()
		c.text.WriteString(text)
		if events == nil || text == "" {
			return nil
		}
		return events.send("", c.chunk(map[string]any{"content": text}, nil))
	})
	switch {
	case events != nil && err != nil:
		_, e := classify(err)
		events.send("", map[string]any{"error": map[string]any{"message": e.Message, "type": "server_error", "code": e.Code}})
	case events != nil:
		finish := c.finish
		events.send("", c.chunk(map[string]any{}, &finish))
		fmt.Fprint(w, "data: [DONE]\n\n")
	case err != nil:
		openAIError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": c.finish,
				"message": map[string]any{"role": "assistant", "content": c.text.String()}}},
			"usage": map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
		})
	}
}

// chatInput splits a request's messages into the conversation before the turn and
// the turn's input, the last message, which must be the user's.
func chatInput(msgs []ChatMessage) (history []*abi.Message, input *abi.Message, err error) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return nil, nil, fmt.Errorf("%w: the last message must be the user's", ErrBadJSON)
	}
	for i, m := range msgs {
		text, err := m.text()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: messages[%d]: %w", ErrBadJSON, i, err)
		}
		var msg *abi.Message
		switch m.Role {
		case "user":
			msg = abi.NewUserTextMessage(text)
		case "assistant":
			msg = abi.NewModelTextMessage(text)
		case "system", "developer":
			msg = abi.NewSystemTextMessage(text)
		default:
			return nil, nil, fmt.Errorf("%w: messages[%d]: messages of role %q are not supported", ErrBadJSON, i, m.Role)
		}
		history = append(history, msg)
	}
	return history[:len(history)-1], history[len(history)-1], nil
}

// chatSession finds the session a chat request continues, or starts one, and reports
// whether it opened it.
func (s *Server) chatSession(r *http.Request, a *deploy.Agent, history []*abi.Message) (*live, bool, error) {
	if id := r.Header.Get(SessionHeader); id != "" {
		open := s.sessions.peek(a, id) != nil
		l, err := s.sessions.get(r.Context(), a, id)
		return l, !open && err == nil, err
	}
	var init json.RawMessage
	if !a.ServerManaged() && len(history) > 0 {
		init, _ = json.Marshal(map[string]any{"state": map[string]any{"messages": history}})
	}
	l, err := s.sessions.start(a, init)
	return l, err == nil, err
}

// completion accumulates the answer of a chat request.
type completion struct {
	id      string
	created int64
	model   string
	text    strings.Builder
	finish  string
}

func (c *completion) chunk(delta map[string]any, finish *string) map[string]any {
	return map[string]any{"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

// finishReason maps a turn's finish reason to OpenAI's.
func finishReason(r abi.FinishReason) string {
	switch r {
	case abi.FinishLength:
		return "length"
	case abi.FinishBlocked:
		return "content_filter"
	}
	return "stop"
}
