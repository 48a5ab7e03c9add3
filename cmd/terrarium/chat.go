package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/server"
)

// backend is where chat's agent runs: in this process, from an agent file, or on a
// server.
type backend interface {
	// connect opens a connection: a new session, or the session or snapshot named.
	connect(ctx context.Context, sessionID, snapshotID string) (session.AnyConnection, error)
	// snapshots lists a session's snapshots.
	snapshots(ctx context.Context, sessionID string) ([]*deploy.Snapshot, error)
	// release lets go of a session before it is resumed from a snapshot.
	release(ctx context.Context, conn session.AnyConnection) error
	close(ctx context.Context)
}

func chatCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	agentName := fs.String("agent", "", "the agent to chat with (default: the only one, or the first)")
	sessionID := fs.String("session", "", "resume this session")
	data := fs.String("data", "terrarium-data", "in-process: keep snapshots in a Badger database in this directory")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium chat [flags] <agent file | server URL>\n\nChats with an agent in the terminal: in this process from an agent file, or on a\nserver started with terrarium serve. Commands: /snapshots, /resume <snapshot>, /exit.")
		fs.PrintDefaults()
	}
	target, ok := parse(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	var b backend
	var err error
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		b, err = newRemote(ctx, target, *agentName, stderr)
	} else {
		b, err = newLocal(ctx, target, *agentName, *data, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "terrarium chat: %v\n", err)
		return exitFailed
	}
	defer b.close(context.WithoutCancel(ctx))
	c := &chat{b: b, in: bufio.NewScanner(stdin), out: stdout}
	if err := c.run(ctx, *sessionID); err != nil {
		fmt.Fprintf(stderr, "terrarium chat: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// chat is the terminal conversation.
type chat struct {
	b    backend
	in   *bufio.Scanner
	out  io.Writer
	conn session.AnyConnection
}

func (c *chat) printf(format string, args ...any) { fmt.Fprintf(c.out, format, args...) }

// line reads a line, or reports the end of input.
func (c *chat) line(prompt string) (string, bool) {
	c.printf("%s", prompt)
	if !c.in.Scan() {
		return "", false
	}
	return strings.TrimSpace(c.in.Text()), true
}

func (c *chat) open(ctx context.Context, sessionID, snapshotID string) error {
	conn, err := c.b.connect(ctx, sessionID, snapshotID)
	if err != nil {
		return err
	}
	c.conn = conn
	c.printf("[session %s]\n", conn.SessionID())
	return nil
}

func (c *chat) run(ctx context.Context, sessionID string) error {
	if err := c.open(ctx, sessionID, ""); err != nil {
		return err
	}
	defer func() { c.conn.Close() }()
	c.printf("Type a message, /snapshots, /resume <snapshot> or /exit.\n")
	for {
		text, ok := c.line("> ")
		if !ok {
			return nil
		}
		switch cmd, arg, _ := strings.Cut(text, " "); {
		case text == "":
		case cmd == "/exit" || cmd == "/quit":
			return nil
		case cmd == "/snapshots":
			c.listSnapshots(ctx)
		case cmd == "/resume":
			if err := c.resume(ctx, strings.TrimSpace(arg)); err != nil {
				c.printf("[error: %v]\n", err)
			}
		case strings.HasPrefix(cmd, "/") && !strings.HasPrefix(text, "/call "):
			c.printf("[unknown command %s: try /snapshots, /resume <snapshot> or /exit]\n", cmd)
		default:
			if err := c.turn(ctx, &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(text)}}); err != nil {
				return err
			}
		}
	}
}

func (c *chat) listSnapshots(ctx context.Context) {
	snaps, err := c.b.snapshots(ctx, c.conn.SessionID())
	if err != nil {
		c.printf("[error: %v]\n", err)
		return
	}
	for _, s := range snaps {
		c.printf("  %s  turn %d  %s  %d messages  %s%s\n", s.SnapshotID, s.TurnIndex, s.Event, len(s.State.Messages), s.Status, routeOf(s.State.Custom))
	}
	if len(snaps) == 0 {
		c.printf("  (no snapshots yet)\n")
	}
}

func (c *chat) resume(ctx context.Context, snapshotID string) error {
	if snapshotID == "" {
		return errors.New("/resume needs a snapshot ID (see /snapshots)")
	}
	if err := c.b.release(ctx, c.conn); err != nil {
		return err
	}
	return c.open(ctx, "", snapshotID)
}

// turn sends an input and shows the turn as it streams; interrupts are asked at the
// prompt and answered in the next turn.
func (c *chat) turn(ctx context.Context, in *session.SessionFlowInput) error {
	if err := c.conn.Send(in); err != nil {
		return err
	}
	var pending []*abi.Part
	text := false
	for ch, err := range c.conn.Receive() {
		if ch != nil && ch.Error != nil {
			c.printf("[refused: %s]\n", ch.Error.Message)
			continue
		}
		if err != nil {
			return err
		}
		switch {
		case ch.Chunk != nil:
			for _, p := range ch.Chunk.Content {
				switch {
				case p.IsText() && ch.Chunk.Role == abi.RoleModel:
					c.printf("%s", p.Text)
					text = true
				case p.IsToolRequest() && p.Metadata["interrupt"] != nil:
					pending = append(pending, p)
				case p.IsToolRequest():
					c.printf("[tool %s %s]\n", p.ToolRequest.Name, jsonText(p.ToolRequest.Input))
				case p.IsToolResponse():
					c.printf("[tool %s -> %s]\n", p.ToolResponse.Name, jsonText(p.ToolResponse.Output))
				}
			}
		case ch.Status != nil:
			if text {
				c.printf("\n")
				text = false
			}
			c.showStatus(ch.Status)
		case ch.Artifact != nil:
			c.printf("[artifact %s]\n", ch.Artifact.Name)
		case ch.SnapshotCreated != "":
			if text {
				c.printf("\n")
				text = false
			}
			c.printf("[snapshot %s]\n", ch.SnapshotCreated)
		case ch.EndTurn:
			if text {
				c.printf("\n")
			}
			if ch.FinishReason != abi.FinishStop && ch.FinishReason != "" {
				c.printf("[%s]\n", ch.FinishReason)
			}
		}
	}
	if len(pending) == 0 {
		return nil
	}
	var answers []*abi.Part
	for _, p := range pending {
		question := jsonText(p.Metadata["interrupt"])
		if md, ok := p.Metadata["interrupt"].(map[string]any); ok {
			if q, ok := md["question"].(string); ok {
				question = q
			}
		}
		answer, ok := c.line(fmt.Sprintf("[%s asks] %s\n? ", p.ToolRequest.Name, question))
		if !ok {
			return nil
		}
		answers = append(answers, abi.NewToolResponsePart(&abi.ToolResponse{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Output: answer}))
	}
	return c.turn(ctx, &session.SessionFlowInput{Resume: &abi.Resume{Respond: answers}})
}

// showStatus prints a status report: a routed agent's as where the conversation
// stands and the tools its turn ran, any other as it is.
func (c *chat) showStatus(raw json.RawMessage) {
	var st routes.Status
	if json.Unmarshal(raw, &st) != nil || st.Route == "" {
		c.printf("[status %s]\n", raw)
		return
	}
	for _, call := range st.ToolCalls {
		c.printf("[tool %s %s -> %s]\n", call.ToolName, jsonText(call.Arguments), jsonText(call.Result))
	}
	if st.RouteComplete {
		c.printf("[route %s complete]\n", st.Route)
		return
	}
	c.printf("[route %s, step %s]\n", st.Route, st.Step)
}

// routeOf describes where a routed agent's snapshot stands ("" for another agent's).
func routeOf(custom json.RawMessage) string {
	var st routes.State
	if json.Unmarshal(custom, &st) != nil || st.CurrentRoute == nil || st.CurrentStep == nil {
		return ""
	}
	return fmt.Sprintf("  route %s, step %s", st.CurrentRoute.ID, st.CurrentStep.ID)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// local runs an agent file in this process.
type local struct {
	d *deploy.Deployment
	a *deploy.Agent
}

func newLocal(ctx context.Context, path, name, data string, stderr io.Writer) (*local, error) {
	f, err := deploy.ReadFile(path)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := deploy.New(ctx, []*deploy.File{f}, deploy.WithDataDir(data), deploy.WithLogger(log))
	if err != nil {
		return nil, err
	}
	a, err := d.Agent(f.Name)
	if err != nil {
		d.Close(ctx)
		return nil, err
	}
	if name != "" && name != f.Name {
		d.Close(ctx)
		return nil, fmt.Errorf("%s defines agent %s, not %s", path, f.Name, name)
	}
	fmt.Fprintf(stderr, "[agent %s from %s, in this process]\n", a.Name, path)
	return &local{d: d, a: a}, nil
}

func (l *local) connect(ctx context.Context, sessionID, snapshotID string) (session.AnyConnection, error) {
	init, _ := json.Marshal(map[string]string{"sessionId": sessionID, "snapshotId": snapshotID})
	if sessionID == "" && snapshotID == "" {
		init = nil
	}
	return l.a.Flow().ConnectAny(ctx, init)
}

func (l *local) snapshots(ctx context.Context, id string) ([]*deploy.Snapshot, error) {
	return l.a.Snapshots(ctx, id)
}

func (l *local) release(_ context.Context, conn session.AnyConnection) error {
	conn.Close()
	_, err := conn.Output()
	return err
}

func (l *local) close(ctx context.Context) { l.d.Close(ctx) }

// remote talks to a server: a WebSocket per connection, the HTTP API for the rest.
type remote struct {
	base  string
	agent string
}

func newRemote(ctx context.Context, base, name string, stderr io.Writer) (*remote, error) {
	base = strings.TrimSuffix(base, "/")
	var list struct {
		Agents []server.AgentInfo `json:"agents"`
	}
	if err := getJSON(ctx, base+"/api/agents", &list); err != nil {
		return nil, err
	}
	if len(list.Agents) == 0 {
		return nil, fmt.Errorf("%s serves no agents", base)
	}
	if name == "" {
		name = list.Agents[0].Name
	}
	fmt.Fprintf(stderr, "[agent %s on %s]\n", name, base)
	return &remote{base: base, agent: name}, nil
}

func getJSON(ctx context.Context, u string, v any) error {
	return doJSON(ctx, "GET", u, v)
}

func doJSON(ctx context.Context, method, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e abi.Error
		json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%s %s: %d %s: %s", method, u, resp.StatusCode, e.Code, e.Message)
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (r *remote) connect(ctx context.Context, sessionID, snapshotID string) (session.AnyConnection, error) {
	q := url.Values{}
	if sessionID != "" {
		q.Set("sessionId", sessionID)
	}
	if snapshotID != "" {
		q.Set("snapshotId", snapshotID)
	}
	u := "ws" + strings.TrimPrefix(r.base, "http") + "/api/agents/" + url.PathEscape(r.agent) + "/connect?" + q.Encode()
	c, resp, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		if resp != nil {
			var e abi.Error
			json.NewDecoder(resp.Body).Decode(&e)
			return nil, fmt.Errorf("%d %s: %s", resp.StatusCode, e.Code, e.Message)
		}
		return nil, err
	}
	conn := &wsConnection{ctx: ctx, c: c, done: make(chan struct{})}
	m, err := conn.read()
	if err != nil || m.Type != "session" {
		c.CloseNow()
		return nil, fmt.Errorf("the server did not open a session: %v %+v", err, m)
	}
	conn.id = m.SessionID
	return conn, nil
}

func (r *remote) snapshots(ctx context.Context, id string) ([]*deploy.Snapshot, error) {
	var out struct {
		Snapshots []*deploy.Snapshot `json:"snapshots"`
	}
	err := getJSON(ctx, r.base+"/api/agents/"+url.PathEscape(r.agent)+"/sessions/"+url.PathEscape(id)+"/snapshots", &out)
	return out.Snapshots, err
}

// release closes the socket and the session on the server, which a resume from a
// snapshot needs.
func (r *remote) release(ctx context.Context, conn session.AnyConnection) error {
	conn.Close()
	return doJSON(ctx, "DELETE", r.base+"/api/agents/"+url.PathEscape(r.agent)+"/sessions/"+url.PathEscape(conn.SessionID()), nil)
}

func (r *remote) close(context.Context) {}

// wsConnection is a session connection over a server's WebSocket.
type wsConnection struct {
	ctx  context.Context
	c    *websocket.Conn
	id   string
	done chan struct{}
}

func (w *wsConnection) read() (server.WSMessage, error) {
	var m server.WSMessage
	_, data, err := w.c.Read(w.ctx)
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(data, &m)
}

func (w *wsConnection) SessionID() string { return w.id }

func (w *wsConnection) Send(in *session.SessionFlowInput) error {
	data, err := json.Marshal(server.TurnRequest{Messages: in.Messages, Resume: in.Resume, Detach: in.Detach})
	if err != nil {
		return err
	}
	return w.c.Write(w.ctx, websocket.MessageText, data)
}

func (w *wsConnection) Receive() iter.Seq2[*session.AnyChunk, error] {
	return func(yield func(*session.AnyChunk, error) bool) {
		for {
			m, err := w.read()
			if err != nil {
				yield(nil, err)
				return
			}
			switch m.Type {
			case "error":
				yield(nil, fmt.Errorf("%s: %s", m.Error.Code, m.Error.Message))
				return
			case "chunk":
				if !yield(m.Chunk, nil) || m.Chunk.EndTurn {
					return
				}
			}
		}
	}
}

func (w *wsConnection) Close() error {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	return w.c.Close(websocket.StatusNormalClosure, "bye")
}

func (w *wsConnection) Output() (*session.AnyOutput, error) { return nil, nil }
func (w *wsConnection) Done() <-chan struct{}               { return w.done }
