package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/server"
)

// fuzzAgents are agents whose turns are quick and whose sessions live in memory, so
// that a fuzzer's thousands of turns cost little: memo keeps its sessions and client lets
// its clients keep them; both have askUser, so that resumes have something to answer.
var fuzzAgents = map[string]string{
	"memo.yaml":   "name: memo\nmodel: {name: test/echo}\ntools: [askUser]\nsnapshots: {store: memory}\n",
	"client.yaml": "name: client\nmodel: {name: test/echo}\ntools: [askUser]\nsnapshots: {store: none}\n",
}

// FuzzDecodingEntries feeds arbitrary JSON to every entry of the server that decodes
// what a client sends, through the real handlers: a turn's body (HTTP, and a
// WebSocket's frame), a session's init (a client-kept state among them), an OpenAI
// chat request and the reflection API's runAction, each with the input as the whole
// body and as the field most worth breaking. Whatever it is, the server must answer
// it without panicking, in a handler or in a session's goroutine (which would end
// the process), and without a 500: bad input is the client's error, 4xx.
func FuzzDecodingEntries(f *testing.F) {
	for _, seed := range []string{
		`{"text": "hi"}`,
		`{"messages": [null]}`,
		`{"messages": [{"role": "user", "content": [{"text": "hi"}]}]}`,
		`{"messages": [{"role": "user", "content": [null]}]}`,
		`{"messages": [{"role": "model", "content": [{"toolRequest": {"name": "askUser"}}]}]}`,
		`{"resume": {"respond": [null]}}`,
		`{"resume": {"respond": [{"toolResponse": {"name": "askUser", "ref": "q1", "output": "yes", "content": [null]}}]}}`,
		`{"text": "ask why"}`,
		`{"text": "hi", "detach": true}`,
		`{"cancel": true}`,
		`{"state": {"messages": [null]}}`,
		`{"state": {"messages": [{"role": "model", "content": [{"text": "hello"}]}], "artifacts": [null]}}`,
		`{"sessionId": "x", "snapshotId": "y"}`,
		`{"promptInput": {"a": [null]}}`,
		`{"model": "client", "messages": [null]}`,
		`{"model": "client", "messages": [{"role": "user", "content": null}]}`,
		`{"model": "client", "messages": [{"role": "user", "content": [null, {"type": "text", "text": "hi"}]}]}`,
		`{"key": "/session-flow/client", "input": {"messages": [null]}}`,
		`{"key": "/session-flow/client", "init": {"state": {"messages": [null]}}, "input": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}}`,
		`{"key": "/model/test/echo", "input": {"messages": [null]}}`,
		`{"key": "/snapshot-store/memo/getSnapshot", "input": {"snapshotId": null}}`,
		`[null]`, `null`, `{}`, `"x"`, `1`,
	} {
		f.Add([]byte(seed))
	}
	var logs syncBuffer
	ts := newServerOf(f, fuzzAgents, nil, server.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	h, rh := ts.srv.Handler(), ts.srv.ReflectionHandler("fuzz")
	wsURL := "ws" + strings.TrimPrefix(ts.URL, "http")

	f.Fuzz(func(t *testing.T, data []byte) {
		var bodies [][]byte // data as a body, and inside the fields of one
		bodies = append(bodies, data)
		if json.Valid(data) {
			for _, wrap := range []string{`{"messages": %s}`, `{"state": {"messages": %s}}`, `{"resume": {"respond": %s}}`} {
				bodies = append(bodies, []byte(strings.Replace(wrap, "%s", string(data), 1)))
			}
		}
		serve := func(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
			t.Helper()
			req := httptest.NewRequestWithContext(t.Context(), "POST", "http://localhost"+path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("POST %s %s: %d %s", path, body, rec.Code, rec.Body)
			}
			return rec
		}
		session := func(agent string) string {
			t.Helper()
			var info server.SessionInfo
			rec := serve(h, "/api/agents/"+agent+"/sessions", nil)
			if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil || info.SessionID == "" {
				t.Fatalf("a new session of %s: %d %s", agent, rec.Code, rec.Body)
			}
			return info.SessionID
		}
		for _, body := range bodies {
			for _, agent := range []string{"memo", "client"} {
				serve(h, "/api/agents/"+agent+"/sessions", body)
				serve(h, "/api/agents/"+agent+"/sessions/"+session(agent)+"/turns", body)
			}
			serve(h, "/v1/chat/completions", body)
			serve(h, "/v1/chat/completions", []byte(`{"model": "client", "messages": `+validOr(body)+`}`))
			rec := serve(rh, "/api/runAction", body)
			for _, key := range []string{"/session-flow/client", "/session-flow/memo", "/model/test/echo"} {
				rec = serve(rh, "/api/runAction", []byte(`{"key": "`+key+`", "input": `+validOr(body)+`}`))
				if bytes.Contains(rec.Body.Bytes(), []byte(`"code":13`)) {
					t.Fatalf("runAction of %s with %s: an internal error: %s", key, body, rec.Body)
				}
			}
			wsTurn(t, wsURL+"/api/agents/client/connect", body)
		}
		if strings.Contains(logs.String(), "panic") {
			t.Fatalf("a panic was logged:\n%s", logs.String())
		}
	})
}

// validOr returns body if it is JSON, else null.
func validOr(body []byte) string {
	if json.Valid(body) {
		return string(body)
	}
	return "null"
}

// wsTurn sends frame on a new WebSocket and reads the answer: an error (not an
// internal one), a refusal, or a turn's chunks to its end.
func wsTurn(t *testing.T, url string, frame []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	read := func() server.WSMessage {
		t.Helper()
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("frame %s: the socket ended: %v", frame, err)
		}
		var m server.WSMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	read() // the session
	if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
		t.Fatal(err)
	}
	for {
		m := read()
		if m.Type == "error" {
			if m.Error.Code == "internal" {
				t.Fatalf("frame %s: %+v", frame, m.Error)
			}
			return
		}
		if m.Chunk != nil && (m.Chunk.EndTurn || m.Chunk.Error != nil) {
			return // the turn ended, or was refused
		}
	}
}
