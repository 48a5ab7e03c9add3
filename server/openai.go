package server

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/tenant"
)

// The OpenAI-compatible endpoints map agents to model names, so that any OpenAI client
// can talk to a Terrarium agent. A request is one turn: its last message, the user's,
// is the turn's input, or its last messages, tool results, answer the tool calls that
// ended the turn before (an interrupt, or a client tool the model called), which
// resumes that turn. Its answer is the text the agent's model streams (the agent's own
// tools run on the server), and the tool calls left for the client. The session is
// the one the X-Terrarium-Session-Id header names, the one the answered tool calls
// belong to, or a new one, named by the response's header of the same name. An agent
// that keeps its sessions keeps their history: the request's earlier messages are not
// replayed into it (a client cannot write the model's side of a kept conversation).
// For an agent whose clients keep the state, they are the conversation so far.
// docs/serving.md has a table of every field.

// SessionHeader names a session to continue, on requests, and the session of a turn,
// on responses.
const SessionHeader = "X-Terrarium-Session-Id"

// openAIError answers with the error body OpenAI clients read: {"error": {"message",
// "type", "param", "code"}}, with the status, type and code OpenAI's API would set,
// and Terrarium's own code where OpenAI has none.
func openAIError(w http.ResponseWriter, r *http.Request, err error) {
	retryAfter(w, err)
	status, body := openAIErrorBody(err)
	if status >= 500 {
		slog.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	writeJSON(w, status, body)
}

// openAIErrorBody returns the status and body of an error answer.
func openAIErrorBody(err error) (int, map[string]any) {
	status, e := classify(err)
	kind := "invalid_request_error"
	code := any(e.Code)
	var param any
	var pe *paramError
	var qe *tenant.QuotaError
	switch {
	case errors.As(err, &pe):
		param, code = pe.param, pe.code
	case errors.Is(err, ErrAgentNotFound):
		param, code = "model", "model_not_found"
	case errors.Is(err, ErrUnauthenticated):
		code = "invalid_api_key"
	case errors.As(err, &qe):
		kind, code = "requests", "rate_limit_exceeded"
		switch qe.Quota {
		case "modelTokensPerDay":
			kind = "tokens"
		case "storedBytes":
			kind, code = "insufficient_quota", "insufficient_quota"
		}
	case status >= 500:
		kind = "server_error"
	}
	return status, map[string]any{"error": map[string]any{"message": e.Message, "type": kind, "param": param, "code": code}}
}

// openAIModel is a model as /v1/models lists it: an agent.
func openAIModel(a *deploy.Agent) map[string]any {
	return map[string]any{"id": a.Name, "object": "model", "created": 0, "owned_by": "terrarium"}
}

func (s *Server) openAIModels(w http.ResponseWriter, r *http.Request) {
	data := []map[string]any{}
	for _, a := range scopeOf(r).agents() {
		data = append(data, openAIModel(a))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) openAIModel(w http.ResponseWriter, r *http.Request) {
	a, err := scopeOf(r).agent(r.PathValue("model"))
	if err != nil {
		openAIError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, openAIModel(a))
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, err := readAll(w, r, s.maxBody)
	var req *ChatRequest
	if err == nil {
		req, err = decodeChatRequest(body)
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
	t, err := req.turn()
	if err == nil {
		err = checkClientTools(a, req)
	}
	if err != nil {
		openAIError(w, r, err)
		return
	}
	t.input.Tools, t.input.Output = req.clientTools(), req.output()
	l, opened, err := s.chatSession(r, a, t)
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
	if req.User != "" || req.SafetyIdentifier != "" {
		// What OpenAI asks these for: to trace abuse to an application's end user.
		s.log.InfoContext(r.Context(), "OpenAI request for an end user", "agent", a.Name, "session", l.id,
			"user", req.User, "safety_identifier", req.SafetyIdentifier, "tenant", scopeOf(r).tenant)
	}
	done, err := s.sessions.admit(r.Context(), a)
	if err != nil {
		if r.Context().Err() == nil { // else its client left while it waited in line
			openAIError(w, r, err)
		}
		return
	}

	c := &completion{id: "chatcmpl-" + rand.Text(), created: time.Now().Unix(), model: a.Name, session: l.id,
		format: t.input.Output != nil, usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	var events *sseWriter
	// The stream opens with the first text, so that a turn failing before it answers
	// with an error status.
	open := func() error {
		if events != nil || !req.Stream {
			return nil
		}
		events = newSSE(w)
		return events.send("", c.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	}
	first := true
	var end *session.AnyChunk
	_, err = s.sessions.turn(l, done, t.input, func(ch *session.AnyChunk) error {
		if first {
			first = false
			if ch.Error != nil && !ch.EndTurn {
				return ch.Error
			}
		}
		if ch.EndTurn {
			end = ch
		}
		text := c.add(ch)
		if text == "" || c.format {
			return nil
		}
		if err := open(); err != nil {
			return err
		}
		if events == nil {
			return nil
		}
		return events.send("", c.chunk(map[string]any{"content": text}, nil))
	})
	switch {
	case err == nil && end != nil && end.FinishReason == session.FinishFailed:
		// The turn failed (its model, a tool, a handler): a server error, as OpenAI
		// answers one, with the turn's code; the session goes on.
		status, body := failedTurn(end.Error)
		if events == nil {
			writeJSON(w, status, body)
		} else {
			events.send("", body)
		}
		return
	case err == nil && end != nil && end.FinishReason == session.FinishAborted:
		err = fmt.Errorf("%w: session %s", ErrCancelled, l.id)
	case err == nil:
		if err = open(); err != nil {
			return
		}
	}
	switch {
	case events != nil && err != nil:
		_, body := openAIErrorBody(err)
		events.send("", body)
	case events != nil:
		c.stream(events)
		fmt.Fprint(w, "data: [DONE]\n\n")
	case err != nil:
		openAIError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, c.response())
	}
}

// failedTurn is the status and OpenAI's error object for a failed turn: a server error
// (type server_error, which OpenAI's clients report as an internal server error), with
// the turn's code and message; an answer off the requested response_format is the
// model's fault, a bad gateway (invalid_output), as the API answers it elsewhere.
func failedTurn(e *session.TurnError) (int, map[string]any) {
	status, code := http.StatusInternalServerError, string(e.Code)
	if errors.Is(e, agent.ErrInvalidOutput) {
		status, code = http.StatusBadGateway, "invalid_output"
	}
	return status, map[string]any{"error": map[string]any{"message": e.Message, "type": "server_error", "code": code, "param": nil}}
}

// checkClientTools refuses the request's tools before a session opens when the agent
// would refuse them: it takes none, or has a tool of the same name.
func checkClientTools(a *deploy.Agent, req *ChatRequest) error {
	if len(req.Tools) == 0 {
		return nil
	}
	if !a.ClientTools {
		return refuse("tools", codeUnsupported, "agent %s takes no client tools (its agent file says clientTools: false, or it is a routed agent, whose routes decide its tools)", a.Name)
	}
	for i, t := range req.Tools {
		for _, own := range a.Tools {
			if t.Function.Name == own {
				return refuse(fmt.Sprintf("tools[%d].function.name", i), codeInvalid, "agent %s has a tool of its own named %q", a.Name, own)
			}
		}
	}
	return nil
}

// chatSession finds the session a chat request continues, or starts one, and reports
// whether it opened it.
func (s *Server) chatSession(r *http.Request, a *deploy.Agent, t *chatTurn) (*live, bool, error) {
	id := r.Header.Get(SessionHeader)
	switch {
	case id != "" && t.session != "" && id != t.session:
		return nil, false, refuse("messages", codeInvalid, "the tool calls answered are session %s's, and the %s header names %s", t.session, SessionHeader, id)
	case id == "" && a.ServerManaged():
		id = t.session
	}
	if id != "" {
		open := s.sessions.peek(a, id) != nil
		l, err := s.sessions.get(r.Context(), a, id)
		return l, !open && err == nil, err
	}
	if t.input.Resume != nil && a.ServerManaged() {
		return nil, false, refuse("messages", codeInvalid,
			"tool results continue the session whose turn asked for them: agent %s keeps its sessions, so send the %s header, or tool call ids of Terrarium's", a.Name, SessionHeader)
	}
	var init json.RawMessage
	if !a.ServerManaged() && len(t.history) > 0 {
		init, _ = json.Marshal(map[string]any{"state": map[string]any{"messages": t.history}})
	}
	l, err := s.sessions.start(a, init)
	return l, err == nil, err
}

// completion accumulates the answer of a chat request.
type completion struct {
	id      string
	created int64
	model   string
	session string
	// format says the request asked for JSON: the answer's content is the JSON of
	// its last message, sent once the turn checked it.
	format bool
	// usage says the request asked for a streamed last chunk with the usage.
	usage bool

	text   strings.Builder // the model's text, all of it
	last   strings.Builder // the model's text since the last tool results
	calls  []map[string]any
	finish string
	used   *abi.GenerationUsage
}

// add takes in a chunk of the turn and returns the text it adds to the answer.
func (c *completion) add(ch *session.AnyChunk) string {
	if ch.EndTurn {
		c.finish, c.used = finishReason(ch.FinishReason), ch.Usage
		return ""
	}
	if ch.Chunk == nil {
		return ""
	}
	var text strings.Builder
	for _, p := range ch.Chunk.Content {
		switch {
		case p.IsText() && ch.Chunk.Role == abi.RoleModel:
			text.WriteString(p.Text)
		case p.IsToolResponse():
			// Tool results: the model's text after them is its last message.
			c.last.Reset()
		case p.IsToolRequest() && p.Metadata["interrupt"] != nil:
			// A request waiting for the client: an interrupt, or a client tool,
			// whatever the role of the chunk that says so (the model's, or the
			// tool's that lists the requests pending). The agent's own requests
			// run on the server, unseen.
			args, _ := json.Marshal(p.ToolRequest.Input)
			if p.ToolRequest.Input == nil {
				args = []byte("{}")
			}
			c.calls = append(c.calls, map[string]any{"id": toolCallID(c.session, p.ToolRequest), "type": "function",
				"function": map[string]any{"name": p.ToolRequest.Name, "arguments": string(args)}})
		}
	}
	c.text.WriteString(text.String())
	c.last.WriteString(text.String())
	return text.String()
}

// content is the answer's content: its text, or the JSON its last message holds when
// the request asked for JSON (which the turn checked), or null for tool calls alone.
func (c *completion) content() any {
	if c.format && c.finish != "tool_calls" {
		if raw, err := abi.ExtractJSON(c.last.String()); err == nil {
			return string(raw)
		}
		return c.last.String()
	}
	if c.text.Len() == 0 && len(c.calls) > 0 {
		return nil
	}
	return c.text.String()
}

// response is the non-streamed answer.
func (c *completion) response() map[string]any {
	msg := map[string]any{"role": "assistant", "content": c.content(), "refusal": nil, "annotations": []any{}}
	if len(c.calls) > 0 {
		msg["tool_calls"] = c.calls
	}
	return map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": c.finish, "logprobs": nil, "message": msg}},
		"usage":   openAIUsage(c.used),
	}
}

// stream sends the end of a streamed answer: the JSON content held back, the tool
// calls, the finish reason, and the usage when asked for.
func (c *completion) stream(events *sseWriter) {
	if c.format && c.finish != "tool_calls" {
		events.send("", c.chunk(map[string]any{"content": c.content()}, nil))
	}
	for i, call := range c.calls {
		delta := map[string]any{"index": i}
		for k, v := range call {
			delta[k] = v
		}
		events.send("", c.chunk(map[string]any{"tool_calls": []any{delta}}, nil))
	}
	finish := c.finish
	events.send("", c.chunk(map[string]any{}, &finish))
	if c.usage {
		events.send("", map[string]any{"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
			"choices": []any{}, "usage": openAIUsage(c.used)})
	}
}

func (c *completion) chunk(delta map[string]any, finish *string) map[string]any {
	ch := map[string]any{"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
	if c.usage {
		ch["usage"] = nil
	}
	return ch
}

// openAIUsage is a turn's usage as OpenAI reports it: the input and output tokens its
// models reported, with the cached input and the reasoning tokens among them.
func openAIUsage(u *abi.GenerationUsage) map[string]any {
	if u == nil {
		u = &abi.GenerationUsage{}
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	return map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": total,
		"prompt_tokens_details":     map[string]int{"cached_tokens": u.CachedContentTokens},
		"completion_tokens_details": map[string]int{"reasoning_tokens": u.ThoughtsTokens}}
}

// finishReason maps a turn's finish reason to OpenAI's: a turn waiting for the
// client's tool results ended on tool calls.
func finishReason(r abi.FinishReason) string {
	switch r {
	case abi.FinishInterrupted:
		return "tool_calls"
	case abi.FinishLength:
		return "length"
	case abi.FinishBlocked:
		return "content_filter"
	}
	return "stop"
}
