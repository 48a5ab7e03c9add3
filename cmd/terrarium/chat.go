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
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// connect opens a connection: a new session, or the session or snapshot named
	// (both: the session, from that snapshot).
	connect(ctx context.Context, sessionID, snapshotID string) (session.AnyConnection, error)
	// snapshot returns the snapshot a person named, by its ID or a unique prefix of it.
	snapshot(ctx context.Context, id string) (*deploy.Snapshot, error)
	// latest returns the session's latest snapshot, nil when it has none yet.
	latest(ctx context.Context, sessionID string) (*deploy.Snapshot, error)
	// snapshots lists a session's snapshots.
	snapshots(ctx context.Context, sessionID string) ([]*deploy.Snapshot, error)
	// release lets go of a session before it is resumed from a snapshot: closes the
	// connection, if any, and the session where it is open.
	release(ctx context.Context, conn session.AnyConnection, sessionID string) error
	// retry says whether what failed may work if tried again (the server could not be
	// reached, or is restarting), and after how long at least.
	retry(err error) (bool, time.Duration)
	close(ctx context.Context)
}

// Reconnecting: a lost connection is opened again up to reconnectTries times, the waits
// between tries growing from about a second to reconnectMaxWait, each drawn at random
// between half and all of its length, so that the clients of a host that went away do
// not all come back at once. A message sent when the connection was lost is sent again
// at most resendTries times, unless the session's snapshots show its turn ended.
const (
	reconnectTries   = 8
	reconnectMaxWait = 8 * time.Second
	resendTries      = 2
)

// chatHelp is what /help shows.
const chatHelp = `Type a message and press Enter; the answer streams in. Commands:
  /help                 this list
  /snapshots            the session's snapshots
  /resume <snapshot>    continue from a snapshot: its ID, or its first 8 or more digits
  /session              the session's ID and the snapshot it continues
  /exit, /quit          leave; the session is kept
A line that starts with /call is a message too (the offline model calls the tool named).`

func chatCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	agentName := fs.String("agent", "", "the agent to chat with (default: the only one, or the first)")
	sessionID := fs.String("session", "", "resume this session")
	data := fs.String("data", "terrarium-data", "in-process: keep snapshots in a Badger database in this directory")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium chat [flags] <agent file | server URL>\n\nChats with an agent in the terminal: in this process from an agent file, or on a\nserver started with terrarium serve, reconnecting by itself when the connection is\nlost. Commands: /help, /snapshots, /resume <snapshot>, /session, /exit.")
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
	c := &chat{b: b, lines: readLines(stdin), out: stdout, sleep: sleep}
	if err := c.run(ctx, *sessionID); err != nil {
		fmt.Fprintf(stderr, "terrarium chat: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// readLines reads the input's lines into a channel, closed at the end of the input. The
// reading goroutine lives as long as the input: the process, for a terminal.
func readLines(in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// chat is the terminal conversation.
type chat struct {
	b     backend
	lines <-chan string
	out   io.Writer
	sleep func(context.Context, time.Duration) error
	// conn is the session's connection: nil before the first message of a new
	// session, and once lost until it is opened again.
	conn session.AnyConnection
	// sid is the session's ID, "" until the first message opens a new one; head, the
	// snapshot it continues (the last one streamed or resumed from), "" if unknown.
	sid, head string
}

func (c *chat) printf(format string, args ...any) { fmt.Fprintf(c.out, format, args...) }

// line reads a line, or reports the end of input.
func (c *chat) line(ctx context.Context, prompt string) (string, bool) {
	c.printf("%s", prompt)
	select {
	case text, ok := <-c.lines:
		return strings.TrimSpace(text), ok
	case <-ctx.Done():
		return "", false
	}
}

// open connects to a new session, the session c.sid, or c.sid from snapshotID.
func (c *chat) open(ctx context.Context, snapshotID string) error {
	conn, err := c.b.connect(ctx, c.sid, snapshotID)
	if err != nil {
		return err
	}
	c.conn, c.sid = conn, conn.SessionID()
	if snapshotID != "" {
		c.head = snapshotID
	}
	return nil
}

func (c *chat) run(ctx context.Context, sessionID string) error {
	defer func() {
		if c.conn != nil {
			c.conn.Close()
		}
	}()
	if sessionID != "" {
		c.sid = sessionID
		latest, err := c.b.latest(ctx, sessionID)
		if err == nil {
			err = c.open(ctx, "")
		}
		if err != nil {
			return err
		}
		if latest != nil {
			c.head = latest.SnapshotID
		}
		c.printf("[session %s]\n", c.sid)
	} else {
		c.printf("[a new session: it starts with your first message]\n")
	}
	c.printf("Type a message, or /help for the commands.\n")
	for {
		c.printf("> ")
		var text string
		select {
		case <-ctx.Done():
			return nil
		case <-c.lost():
			c.printf("\n")
			c.dropped(ctx)
			continue
		case t, ok := <-c.lines:
			if !ok {
				return nil
			}
			text = strings.TrimSpace(t)
		}
		switch cmd, arg, _ := strings.Cut(text, " "); {
		case text == "":
		case cmd == "/exit" || cmd == "/quit":
			return nil
		case cmd == "/help":
			c.printf("%s\n", chatHelp)
		case cmd == "/session":
			c.showSession()
		case cmd == "/snapshots":
			c.listSnapshots(ctx)
		case cmd == "/resume":
			if err := c.resume(ctx, strings.TrimSpace(arg)); err != nil {
				c.printf("[error: %v]\n", err)
			}
		case strings.HasPrefix(cmd, "/") && cmd != "/call":
			c.printf("[unknown command %s: /help lists them]\n", cmd)
		default:
			c.send(ctx, &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(text)}})
		}
	}
}

// lost is closed when the connection ends; nil (never ready) without one.
func (c *chat) lost() <-chan struct{} {
	if c.conn == nil {
		return nil
	}
	return c.conn.Done()
}

// dropped handles a connection that ended between turns: it reconnects at once when
// the server is restarting or the connection broke, and leaves it to the next message
// when the server closed it otherwise (idle, say).
func (c *chat) dropped(ctx context.Context) {
	err := errConnEnded
	if w, ok := c.conn.(*wsConnection); ok {
		err = w.ended()
	}
	why, now := lostHow(err)
	c.conn.Close()
	c.conn = nil
	if !now {
		c.printf("[the connection was closed (%s): your next message reconnects]\n", why)
		return
	}
	c.printf("[the connection was lost (%s)]\n", why)
	c.reconnect(ctx, true)
}

// errConnEnded: an in-process connection ended.
var errConnEnded = errors.New("the session's connection ended")

// lostHow says why a connection ended, from its error, and whether to reconnect at
// once.
func lostHow(err error) (why string, now bool) {
	switch code := websocket.CloseStatus(err); code {
	case -1:
		return err.Error(), true // no close message: the host or the network failed
	case websocket.StatusServiceRestart, websocket.StatusTryAgainLater, websocket.StatusBadGateway, websocket.StatusInternalError:
		return fmt.Sprintf("the server closed it: %d %s", code, closeReason(err)), true
	default:
		return fmt.Sprintf("%d %s", code, closeReason(err)), false
	}
}

func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) && ce.Reason != "" {
		return ce.Reason
	}
	return "no reason given"
}

// reconnect opens the session again (a new one if none was opened yet), trying up to
// reconnectTries times, and says so. A server that went away (a restart, a host of a
// fleet draining) is waited for, a refusal is not. wait asks for a first wait of up to
// a second: after a server closed the connection, its other clients come back too.
func (c *chat) reconnect(ctx context.Context, wait bool) bool {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	for try := range reconnectTries {
		if try > 0 || wait {
			d := backoff(try)
			if try > 0 {
				c.printf("[trying again in %v (%d of %d)]\n", d.Round(100*time.Millisecond), try+1, reconnectTries)
			}
			if c.sleep(ctx, d) != nil {
				return false
			}
		}
		err := c.reopen(ctx)
		if err == nil {
			return true
		}
		c.printf("[could not connect: %v]\n", err)
		again, after := c.b.retry(err)
		if !again {
			return false
		}
		if after > 0 && try+1 < reconnectTries {
			c.sleep(ctx, after)
		}
	}
	c.printf("[gave up after %d tries: your next message tries again, /exit leaves]\n", reconnectTries)
	return false
}

// backoff is the wait before a try: about 2^try seconds, at most reconnectMaxWait,
// drawn between half and all of it.
func backoff(try int) time.Duration {
	d := min(time.Second<<try, reconnectMaxWait)
	return d/2 + rand.N(d/2)
}

// reopen connects to the session where it stands: its latest snapshot, or the older
// one it was resumed from before a turn continued it. A turn that ended while the
// connection was down shows in the latest snapshot, which becomes the head.
func (c *chat) reopen(ctx context.Context) error {
	if c.sid == "" {
		if err := c.open(ctx, ""); err != nil {
			return err
		}
		c.printf("[session %s]\n", c.sid)
		return nil
	}
	latest, err := c.b.latest(ctx, c.sid)
	if err != nil {
		return err
	}
	from := ""
	switch {
	case latest == nil || c.head == "" || latest.SnapshotID == c.head:
	case latest.ParentID == c.head:
		c.head = latest.SnapshotID
		c.printf("[a turn ended while the connection was down: snapshot %s]\n", latest.SnapshotID)
		c.showLast(latest)
	default:
		// Resumed from an older snapshot, and no turn continued it yet: from it again,
		// letting go of the session where it is still open.
		from = c.head
		if err := c.b.release(ctx, nil, c.sid); err != nil {
			return err
		}
	}
	if err := c.open(ctx, from); err != nil {
		return err
	}
	c.printf("[reconnected: session %s]\n", c.sid)
	return nil
}

// showLast prints the last message of a snapshot, if the model's: the answer of a turn
// whose stream was lost.
func (c *chat) showLast(s *deploy.Snapshot) {
	if s.Status == session.StatusFailed {
		c.printf("[turn failed: %s]\n", describe(s.Error))
	}
	if msgs := s.State.Messages; len(msgs) > 0 && msgs[len(msgs)-1].Role == abi.RoleModel {
		c.printf("%s\n", msgs[len(msgs)-1].Text())
	}
}

func (c *chat) showSession() {
	switch {
	case c.sid == "":
		c.printf("[a new session: it starts with your first message]\n")
	case c.head == "":
		c.printf("[session %s, no snapshot yet]\n", c.sid)
	default:
		c.printf("[session %s at snapshot %s]\n", c.sid, c.head)
	}
}

func (c *chat) listSnapshots(ctx context.Context) {
	if c.sid == "" {
		c.printf("  (no snapshots yet)\n")
		return
	}
	snaps, err := c.b.snapshots(ctx, c.sid)
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

// resume continues from a snapshot, named by its ID or a prefix of it. The snapshot is
// found first, so that a wrong ID leaves the connection as it was.
func (c *chat) resume(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("/resume needs a snapshot ID or its first 8 or more digits (see /snapshots)")
	}
	snap, err := c.b.snapshot(ctx, id)
	if err != nil {
		return err
	}
	if err := c.b.release(ctx, c.conn, snap.SessionID); err != nil {
		return err
	}
	c.conn, c.sid, c.head = nil, snap.SessionID, snap.SnapshotID
	if err := c.open(ctx, snap.SnapshotID); err != nil {
		c.printf("[could not resume: %v]\n", err)
		return c.reopenOrSay(ctx)
	}
	c.printf("[session %s from snapshot %s]\n", c.sid, snap.SnapshotID)
	return nil
}

// reopenOrSay reconnects, or says the next message will.
func (c *chat) reopenOrSay(ctx context.Context) error {
	if !c.reconnect(ctx, false) {
		c.printf("[not connected: your next message tries again]\n")
	}
	return nil
}

// send runs a turn and shows it as it streams; interrupts are asked at the prompt and
// answered in the next turn. A turn's failure is shown, and the chat goes on. When the
// connection is lost before the turn's end, it reconnects and sends the input again,
// unless the session's snapshots show that the turn ended meanwhile.
func (c *chat) send(ctx context.Context, in *session.SessionFlowInput) {
	for try := 0; ; try++ {
		if c.conn == nil && !c.reconnect(ctx, false) {
			c.printf("[not sent]\n")
			return
		}
		before := c.head
		pending, err := c.exchange(in)
		if err == nil {
			if len(pending) == 0 {
				return
			}
			if in = c.answer(ctx, pending); in == nil {
				return
			}
			try = -1
			continue
		}
		why, _ := lostHow(err)
		c.printf("[the connection was lost during the turn (%s)]\n", why)
		if !c.reconnect(ctx, true) {
			c.printf("[the turn's end was not seen: /snapshots shows whether it was kept]\n")
			return
		}
		if c.head != before {
			return // it ended meanwhile: reopen showed it
		}
		if try >= resendTries {
			c.printf("[not sent again after %d tries]\n", resendTries)
			return
		}
		c.printf("[sending it again]\n")
	}
}

// exchange sends an input and prints the turn as it streams. It returns the
// interrupts the turn ended with, or an error when the connection was lost before the
// turn's end.
func (c *chat) exchange(in *session.SessionFlowInput) ([]*abi.Part, error) {
	if err := c.conn.Send(in); err != nil {
		return nil, err
	}
	var pending []*abi.Part
	text := false
	endLine := func() {
		if text {
			c.printf("\n")
			text = false
		}
	}
	for ch, err := range c.conn.Receive() {
		if ch == nil {
			endLine()
			if err == nil {
				err = errors.New("the stream ended before the turn")
			}
			return nil, err
		}
		if ch.Error != nil && !ch.EndTurn {
			endLine()
			c.printf("[refused: %s]\n", describe(ch.Error))
			continue
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
					endLine()
					c.printf("[tool %s %s]\n", p.ToolRequest.Name, jsonText(p.ToolRequest.Input))
				case p.IsToolResponse():
					endLine()
					c.printf("[tool %s -> %s]\n", p.ToolResponse.Name, jsonText(p.ToolResponse.Output))
				}
			}
		case ch.Status != nil:
			endLine()
			c.showStatus(ch.Status)
		case ch.Artifact != nil:
			endLine()
			c.printf("[artifact %s]\n", ch.Artifact.Name)
		case ch.SnapshotCreated != "":
			endLine()
			c.head = ch.SnapshotCreated
			c.printf("[snapshot %s]\n", ch.SnapshotCreated)
		}
		if ch.EndTurn {
			endLine()
			switch {
			case ch.Error != nil || ch.FinishReason == finishFailed:
				c.printf("[turn failed: %s]\n", describe(ch.Error))
			case ch.FinishReason != abi.FinishStop && ch.FinishReason != "":
				c.printf("[%s]\n", ch.FinishReason)
			}
		}
	}
	return pending, nil
}

// finishFailed is a failed turn's finish reason.
const finishFailed abi.FinishReason = "failed"

// describe tells what a refused or failed turn's error says: its code, its message,
// and the model, tool or handler that failed.
func describe(te *session.TurnError) string {
	if te == nil {
		return "no reason given"
	}
	text := te.Message
	if te.Code != "" {
		text = fmt.Sprintf("%s: %s", te.Code, te.Message)
	}
	switch {
	case te.Tool != "":
		text += " (tool " + te.Tool + ")"
	case te.Model != "":
		text += " (model " + te.Model + ")"
	case te.Handler != "":
		text += " (handler " + te.Handler + ")"
	}
	return text
}

// answer asks the user the interrupts' questions, and returns the input answering
// them; nil at the end of input.
func (c *chat) answer(ctx context.Context, pending []*abi.Part) *session.SessionFlowInput {
	var answers []*abi.Part
	for _, p := range pending {
		question := jsonText(p.Metadata["interrupt"])
		if md, ok := p.Metadata["interrupt"].(map[string]any); ok {
			if q, ok := md["question"].(string); ok {
				question = q
			}
		}
		answer, ok := c.line(ctx, fmt.Sprintf("[%s asks] %s\n? ", p.ToolRequest.Name, question))
		if !ok {
			return nil
		}
		answers = append(answers, abi.NewToolResponsePart(&abi.ToolResponse{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Output: answer}))
	}
	return &session.SessionFlowInput{Resume: &abi.Resume{Respond: answers}}
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

func (l *local) snapshot(ctx context.Context, id string) (*deploy.Snapshot, error) {
	whole, err := l.a.ResolveSnapshotID(ctx, "", id)
	if err != nil {
		return nil, err
	}
	return l.a.Snapshot(ctx, whole)
}

func (l *local) latest(ctx context.Context, id string) (*deploy.Snapshot, error) {
	s, err := l.a.LatestSnapshot(ctx, id)
	if errors.Is(err, session.ErrSnapshotNotFound) || errors.Is(err, session.ErrNoSnapshotStore) {
		return nil, nil
	}
	return s, err
}

func (l *local) snapshots(ctx context.Context, id string) ([]*deploy.Snapshot, error) {
	return l.a.Snapshots(ctx, id)
}

func (l *local) release(_ context.Context, conn session.AnyConnection, _ string) error {
	if conn == nil {
		return nil
	}
	conn.Close()
	_, err := conn.Output()
	return err
}

// retry: nothing in this process comes back by waiting.
func (l *local) retry(error) (bool, time.Duration) { return false, 0 }

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

// Bounds on the waits of a remote chat: a request of the HTTP API, a WebSocket's
// handshake, a message's write; and how often an idle socket is pinged, and how long
// the pong may take, so that a connection that died silently is noticed.
const (
	apiTimeout   = 30 * time.Second
	dialTimeout  = 15 * time.Second
	writeTimeout = 15 * time.Second
	pingEvery    = 15 * time.Second
	pongTimeout  = 10 * time.Second
)

var apiClient = &http.Client{Timeout: apiTimeout}

// httpError is a server's refusal: its status, error and Retry-After.
type httpError struct {
	status     int
	e          abi.Error
	retryAfter time.Duration
	what       string // the request
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.what, e.status, e.e.Code, e.e.Message)
}

// readRefusal reads a server's error answer.
func readRefusal(resp *http.Response, what string) *httpError {
	e := &httpError{status: resp.StatusCode, what: what}
	json.NewDecoder(resp.Body).Decode(&e.e)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.retryAfter = time.Duration(s) * time.Second
	}
	return e
}

func getJSON(ctx context.Context, u string, v any) error {
	return doJSON(ctx, "GET", u, v)
}

func doJSON(ctx context.Context, method, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return readRefusal(resp, method+" "+u)
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// notFound reports whether a server answered 404.
func notFound(err error) bool {
	var he *httpError
	return errors.As(err, &he) && he.status == http.StatusNotFound
}

func (r *remote) api(path ...string) string {
	u := r.base + "/api/agents/" + url.PathEscape(r.agent)
	for _, p := range path {
		u += "/" + url.PathEscape(p)
	}
	return u
}

func (r *remote) connect(ctx context.Context, sessionID, snapshotID string) (session.AnyConnection, error) {
	q := url.Values{}
	if sessionID != "" {
		q.Set("sessionId", sessionID)
	}
	if snapshotID != "" {
		q.Set("snapshotId", snapshotID)
	}
	u := "ws" + strings.TrimPrefix(r.api("connect"), "http") + "?" + q.Encode()
	dialCtx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, resp, err := websocket.Dial(dialCtx, u, &websocket.DialOptions{HTTPClient: apiClient})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, readRefusal(resp, "connecting")
		}
		return nil, err
	}
	conn := newWSConnection(ctx, c)
	m, err := conn.first()
	if err != nil || m.Type != "session" {
		conn.Close()
		return nil, fmt.Errorf("the server did not open a session: %v %+v", err, m)
	}
	conn.id = m.SessionID
	return conn, nil
}

func (r *remote) snapshot(ctx context.Context, id string) (*deploy.Snapshot, error) {
	var s deploy.Snapshot
	if err := getJSON(ctx, r.api("snapshots", id), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func (r *remote) latest(ctx context.Context, id string) (*deploy.Snapshot, error) {
	var info server.SessionInfo
	err := getJSON(ctx, r.api("sessions", id), &info)
	if notFound(err) {
		return nil, nil
	}
	return info.Snapshot, err
}

func (r *remote) snapshots(ctx context.Context, id string) ([]*deploy.Snapshot, error) {
	var out struct {
		Snapshots []*deploy.Snapshot `json:"snapshots"`
	}
	err := getJSON(ctx, r.api("sessions", id, "snapshots"), &out)
	return out.Snapshots, err
}

// release closes the socket and the session on the server, which a resume from a
// snapshot needs.
func (r *remote) release(ctx context.Context, conn session.AnyConnection, sessionID string) error {
	if conn != nil {
		conn.Close()
	}
	if err := doJSON(ctx, "DELETE", r.api("sessions", sessionID), nil); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// retry: a server that could not be reached, answered 5xx (503 while it drains) or
// broke the connection may answer later; one that refused the request will not.
func (r *remote) retry(err error) (bool, time.Duration) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status >= 500, he.retryAfter
	}
	return !errors.Is(err, context.Canceled), 0
}

func (r *remote) close(context.Context) {}

// wsConnection is a session connection over a server's WebSocket. A goroutine reads
// it, so that the chat learns that the server closed it while no turn runs, and
// another pings it.
type wsConnection struct {
	ctx  context.Context
	c    *websocket.Conn
	id   string
	msgs chan server.WSMessage // unbuffered: what was sent before the end is read first
	done chan struct{}         // closed when the socket ended, with err
	err  error
	stop chan struct{} // closed by Close
	once sync.Once
}

func newWSConnection(ctx context.Context, c *websocket.Conn) *wsConnection {
	w := &wsConnection{ctx: ctx, c: c, msgs: make(chan server.WSMessage), done: make(chan struct{}), stop: make(chan struct{})}
	go w.read(ctx)
	go w.heartbeat(ctx)
	return w
}

// heartbeat pings the server now and then, and drops the socket when no pong comes.
func (w *wsConnection) heartbeat(ctx context.Context) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			pingCtx, cancel := context.WithTimeout(ctx, pongTimeout)
			err := w.c.Ping(pingCtx)
			cancel()
			if err != nil {
				w.c.CloseNow()
				return
			}
		case <-w.done:
			return
		}
	}
}

func (w *wsConnection) read(ctx context.Context) {
	defer close(w.done)
	for {
		_, data, err := w.c.Read(ctx)
		if err != nil {
			w.err = err
			return
		}
		var m server.WSMessage
		if err := json.Unmarshal(data, &m); err != nil {
			w.err = fmt.Errorf("the server sent %q: %w", data, err)
			w.c.CloseNow()
			return
		}
		select {
		case w.msgs <- m:
		case <-w.stop:
			w.err = net.ErrClosed
			return
		}
	}
}

// first returns the first message.
func (w *wsConnection) first() (server.WSMessage, error) {
	select {
	case m := <-w.msgs:
		return m, nil
	case <-w.done:
		return server.WSMessage{}, w.err
	}
}

// ended returns why the socket ended, once Done is closed.
func (w *wsConnection) ended() error {
	<-w.done
	return w.err
}

func (w *wsConnection) SessionID() string { return w.id }

func (w *wsConnection) Send(in *session.SessionFlowInput) error {
	data, err := json.Marshal(server.TurnRequest{Messages: in.Messages, Resume: in.Resume, Detach: in.Detach})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(w.ctx, writeTimeout)
	defer cancel()
	return w.c.Write(ctx, websocket.MessageText, data)
}

// Receive yields the chunks of a turn; a refusal of the turn as a chunk with its
// error; the socket's end as a nil chunk with why.
func (w *wsConnection) Receive() iter.Seq2[*session.AnyChunk, error] {
	return func(yield func(*session.AnyChunk, error) bool) {
		for {
			select {
			case m := <-w.msgs:
				switch {
				case m.Type == "error" && m.Error != nil && m.Error.Code == "shutting_down":
					// The server drains: the turn did not start, the socket closes next.
					<-w.done
					yield(nil, w.err)
					return
				case m.Type == "error" && m.Error != nil:
					te := &session.TurnError{Code: m.Error.Code, Message: m.Error.Message}
					yield(&session.AnyChunk{Error: te}, te)
					return
				case m.Type == "chunk" && m.Chunk != nil:
					if !yield(m.Chunk, nil) || m.Chunk.EndTurn {
						return
					}
				}
			case <-w.done:
				yield(nil, w.err)
				return
			}
		}
	}
}

func (w *wsConnection) Close() error {
	w.once.Do(func() { close(w.stop) })
	return w.c.Close(websocket.StatusNormalClosure, "bye")
}

func (w *wsConnection) Output() (*session.AnyOutput, error) { return nil, nil }
func (w *wsConnection) Done() <-chan struct{}               { return w.done }
