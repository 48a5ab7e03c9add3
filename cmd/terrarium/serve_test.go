package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// binDir holds the terrarium binary the tests of this file run, built once.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "terrarium-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	if shared != nil {
		shared.cmd.Process.Kill()
		<-shared.exited
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// binary returns the path of the terrarium binary, built from this package once per
// test run.
func binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the terrarium binary and the example's plugins")
	}
	path := filepath.Join(binDir, "terrarium")
	buildOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return path
}

// served is a running terrarium serve.
type served struct {
	cmd        *exec.Cmd
	url        string // the API's
	reflection string // the reflection API's, with -dev
	stderr     *bytes.Buffer
	exited     chan error
}

// startServe runs terrarium serve with args and waits until it serves; the test's end
// kills it.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	s := launchServe(t, args...)
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return s
}

// launchServe runs terrarium serve with args and waits until it serves.
func launchServe(t testing.TB, args ...string) *served {
	t.Helper()
	return launch(t, serveCmd(t, args...))
}

// serveCmd is the command of terrarium serve with args, on a free port of loopback.
func serveCmd(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	return exec.Command(binary(t), append([]string{"serve", "-addr", "127.0.0.1:0"}, args...)...)
}

// launch starts cmd, a terrarium serve, and waits until it serves.
func launch(t testing.TB, cmd *exec.Cmd) *served {
	t.Helper()
	s, err := startServing(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startServing starts cmd, a terrarium serve, and waits until it serves, or fails
// saying why.
func startServing(cmd *exec.Cmd) (*served, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &served{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(stdout)
	for s.url == "" && lines.Scan() {
		line := lines.Text()
		if rest, ok := strings.CutPrefix(line, "Genkit's reflection API on "); ok {
			s.reflection, _, _ = strings.Cut(rest, " ")
		}
		if i := strings.Index(line, " on http://"); strings.HasPrefix(line, "serving ") && i > 0 {
			s.url = line[i+len(" on "):]
		}
	}
	go io.Copy(io.Discard, stdout)
	go func() { s.exited <- cmd.Wait() }()
	if s.url == "" {
		cmd.Process.Kill()
		<-s.exited
		return nil, fmt.Errorf("terrarium serve did not start:\n%s", s.stderr)
	}
	return s, nil
}

// stop sends a signal and waits for the process to exit.
func (s *served) stop(t *testing.T, sig os.Signal) error {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return <-s.exited
}

// call sends a request with a JSON body and decodes the JSON answer into out.
func (s *served) call(t testing.TB, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %d: %v", method, path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

// turnAnswer is the JSON answer to a turn: its chunks, or the error's code.
type turnAnswer struct {
	Code   string `json:"code"`
	Chunks []struct {
		Chunk *struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"chunk"`
		SnapshotCreated string `json:"snapshotCreated"`
	} `json:"chunks"`
}

// modelText joins the text of the model's chunks.
func (a *turnAnswer) modelText() string {
	var b strings.Builder
	for _, c := range a.Chunks {
		if c.Chunk != nil && c.Chunk.Role == "model" {
			for _, p := range c.Chunk.Content {
				b.WriteString(p.Text)
			}
		}
	}
	return b.String()
}

// snapshotted reports whether the turn's answer says a snapshot was made.
func (a *turnAnswer) snapshotted() bool {
	for _, c := range a.Chunks {
		if c.SnapshotCreated != "" {
			return true
		}
	}
	return false
}

// turnText runs a turn and returns the model's text.
func (s *served) turnText(t *testing.T, agent, session, text string) string {
	t.Helper()
	var out turnAnswer
	body, _ := json.Marshal(map[string]string{"text": text})
	if code := s.call(t, "POST", "/api/agents/"+agent+"/sessions/"+session+"/turns", string(body), &out); code != 200 {
		t.Fatalf("turn %q: status %d", text, code)
	}
	if !out.snapshotted() {
		t.Fatalf("turn %q was not snapshotted", text)
	}
	return out.modelText()
}

const exampleDeployment = "../../examples/deploy"

func newSession(t *testing.T, s *served, agent string) string {
	t.Helper()
	var info struct{ SessionID string }
	if code := s.call(t, "POST", "/api/agents/"+agent+"/sessions", "", &info); code != 201 {
		t.Fatalf("new session: %d", code)
	}
	return info.SessionID
}

// TestServeSurvivesKill9 kills the server without warning right after a turn was
// acknowledged: a restart on the same data finds the session and resumes it.
func TestServeSurvivesKill9(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, "-data", data, exampleDeployment)
	id := newSession(t, s, "assistant")
	if text := s.turnText(t, "assistant", id, "remember me"); text != "echo: remember me" {
		t.Fatalf("first turn: %q", text)
	}
	s.stop(t, syscall.SIGKILL)

	s = startServe(t, "-data", data, exampleDeployment)
	var list struct {
		Sessions []struct{ SessionID string } `json:"sessions"`
	}
	s.call(t, "GET", "/api/agents/assistant/sessions", "", &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != id {
		t.Fatalf("after kill -9 the sessions are %+v, want %s", list.Sessions, id)
	}
	if text := s.turnText(t, "assistant", id, "still there?"); text != "echo: still there?" {
		t.Errorf("resumed turn: %q", text)
	}
	var info struct {
		Snapshot struct {
			TurnIndex int `json:"turnIndex"`
			State     struct {
				Messages []json.RawMessage `json:"messages"`
			} `json:"state"`
		} `json:"snapshot"`
	}
	s.call(t, "GET", "/api/agents/assistant/sessions/"+id, "", &info)
	if info.Snapshot.TurnIndex != 1 || len(info.Snapshot.State.Messages) != 4 {
		t.Errorf("the resumed session: turn %d, %d messages", info.Snapshot.TurnIndex, len(info.Snapshot.State.Messages))
	}
}

// TestServeStopsGracefullyOnSIGTERM: exit status 0, and what was acknowledged is there
// after a restart.
func TestServeStopsGracefullyOnSIGTERM(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, "-data", data, exampleDeployment)
	id := newSession(t, s, "assistant")
	s.turnText(t, "assistant", id, "before the signal")
	if err := s.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, s.stderr)
	}
	// The phases of the stop are logged.
	for _, phase := range []string{`msg="stopping: draining"`, `msg="drained: no turn is running"`, `msg="stopping: closing the listeners and the sessions"`, "msg=stopped\n"} {
		if !strings.Contains(s.stderr.String(), phase) {
			t.Errorf("stderr lacks %s:\n%s", phase, s.stderr)
		}
	}
	s = startServe(t, "-data", data, exampleDeployment)
	if text := s.turnText(t, "assistant", id, "after"); text != "echo: after" {
		t.Errorf("after a restart: %q", text)
	}
}

// A client holding a WebSocket open, with nothing running on it, does not keep SIGTERM
// from ending the process: the socket is closed, and the process exits by its
// -shutdown-timeout.
func TestServeStopsByItsShutdownTimeout(t *testing.T) {
	s := startServe(t, "-data", t.TempDir(), "-shutdown-timeout", "1s", exampleDeployment)
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(s.url, "http")+"/api/agents/assistant/connect", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if _, _, err := c.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("terrarium serve -shutdown-timeout 1s still runs 30s after SIGTERM, with a WebSocket open:\n%s", s.stderr)
	}
}

func TestServeRefusesAnInvalidDeployment(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("name: bad\nmodel:\n  name: offline/echo\n  retries: -1\n"), 0o644)
	out, err := exec.Command(binary(t), "serve", "-addr", "127.0.0.1:0", "-data", t.TempDir(), dir).CombinedOutput()
	if code := exitCode(err); code != exitFailed || !strings.Contains(string(out), "bad.yaml:4: model.retries: -1: want 0 or more") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// need returns the path of a program the test needs: without it the test skips, or
// fails in CI.
func need(t *testing.T, program string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	testenv.Need(t, program+" on PATH", err)
	return path
}

var (
	sharedOnce sync.Once
	shared     *served
)

// sharedServe returns a terrarium serve of the example deployment that the tests
// which only add sessions of their own share, started once: each start loads five
// plugins.
func sharedServe(t *testing.T) *served {
	t.Helper()
	sharedOnce.Do(func() {
		data, err := os.MkdirTemp(binDir, "data")
		if err != nil {
			t.Fatal(err)
		}
		shared = launchServe(t, "-data", data, exampleDeployment)
	})
	if shared == nil {
		t.Fatal("the shared server did not start")
	}
	return shared
}

// TestCurlReadsAnSSETurn: curl -N reads a turn's server-sent events as they come.
func TestCurlReadsAnSSETurn(t *testing.T) {
	curl := need(t, "curl")
	s := sharedServe(t)
	id := newSession(t, s, "assistant")
	out, err := exec.Command(curl, "-sN", "-H", "Accept: text/event-stream", "-H", "Content-Type: application/json", "-d", `{"text": "/call calculator/calc {\"expression\": \"6*7\"}"}`,
		s.url+"/api/agents/assistant/sessions/"+id+"/turns").Output()
	if err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
	if len(events) < 5 || !strings.Contains(string(out), `"value":42`) || !strings.HasPrefix(events[len(events)-1], `data: {"endTurn":true`) {
		t.Errorf("curl read:\n%s", out)
	}
}

var (
	npmOnce    sync.Once
	npmDir     string
	nodeBinary string
)

// clients returns a directory holding the JavaScript clients with their packages
// installed, once per test binary, from testdata/clients. Without TERRARIUM_NPM_TESTS,
// node or npm, the test skips (or fails in CI).
func clients(t *testing.T) string {
	t.Helper()
	testenv.NeedNPM(t)
	npmOnce.Do(func() {
		dir := filepath.Join(binDir, "clients")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		nodeBinary = testenv.NPMInstallIn(t, "testdata/clients", dir)
		npmDir = dir
	})
	if npmDir == "" {
		t.Fatal("the JavaScript clients failed to install in an earlier test")
	}
	return npmDir
}

// node runs a client script and decodes the JSON it prints last.
func node(t *testing.T, dir, script string, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(nodeBinary, append([]string{script}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s\n%s", script, err, stdout, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		t.Fatalf("node %s printed %s: %v", script, stdout, err)
	}
}

// TestOpenAIClientStreamsFromAnAgent: the official openai npm package.
func TestOpenAIClientStreamsFromAnAgent(t *testing.T) {
	dir := clients(t)
	s := sharedServe(t)
	var got struct {
		Models []string
		Text   string
		Chunks int
		Finish string
	}
	node(t, dir, "openai.mjs", &got, s.url, "assistant", "Hello from the openai package")
	if got.Text != "echo: Hello from the openai package" || got.Chunks < 3 || got.Finish != "stop" || strings.Join(got.Models, ",") != "assistant,support" {
		t.Errorf("openai client: %+v", got)
	}
}

// TestGenkitListsAndRunsActions: Genkit's CLI's runtime manager finds the server in
// .genkit/runtimes, lists its actions and runs the agent and a model.
func TestGenkitListsAndRunsActions(t *testing.T) {
	dir := clients(t)
	project := t.TempDir()
	s := startServe(t, "-data", t.TempDir(), "-dev", "-reflection-addr", "127.0.0.1:0", "-genkit-dir", project, exampleDeployment)
	if s.reflection == "" {
		t.Fatal("no reflection API announced")
	}
	var got struct {
		Runtime string
		Keys    []string
		Types   map[string]string
		Result  struct {
			SessionID   string   `json:"sessionId"`
			SnapshotIDs []string `json:"snapshotIds"`
		}
		TraceID string
		Chunks  []map[string]any
		Model   struct {
			Message struct {
				Content []struct{ Text string }
			}
		}
	}
	node(t, dir, "genkit.mjs", &got, project, "assistant")
	for _, key := range []string{"/session-flow/assistant", "/snapshot-store/assistant/getSnapshot", "/model/offline/echo", "/tool/calculator/calc", "/tool/askUser"} {
		if got.Types[key] == "" {
			t.Errorf("Genkit does not list %s: %v", key, got.Keys)
		}
	}
	if got.Runtime != "go/terrarium" || got.Result.SessionID == "" || len(got.Result.SnapshotIDs) != 1 || got.TraceID == "" || len(got.Chunks) < 3 {
		t.Errorf("run through Genkit: %+v", got)
	}
	if len(got.Model.Message.Content) == 0 || got.Model.Message.Content[0].Text != "echo: direct" {
		t.Errorf("the model through Genkit: %+v", got.Model)
	}
	if err := s.stop(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(project, ".genkit", "runtimes", "*")); len(left) != 0 {
		t.Errorf("the runtime file outlived the server: %v", left)
	}
}

// TestClientsSeeFailedTurns: clients nobody here wrote see a failed turn as their
// protocol says, and go on with the session: the openai package gets an APIError of
// status 500 and type server_error (an InternalServerError), with the turn's code;
// Genkit's CLI gets a resolved output of finish reason failed with Genkit's error
// shape, and its aborts of a settled or unknown snapshot answer a status or none.
func TestClientsSeeFailedTurns(t *testing.T) {
	dir := clients(t)
	deployment := t.TempDir()
	misbehave, _ := filepath.Abs("../../host/testdata/misbehave")
	src := "name: fragile\nmodel: {name: misbehave/failer}\nsnapshots: {store: memory}\nplugins:\n  - path: " + misbehave + "\n"
	if err := os.WriteFile(filepath.Join(deployment, "fragile.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	s := startServe(t, "-data", t.TempDir(), "-dev", "-reflection-addr", "127.0.0.1:0", "-genkit-dir", project, deployment)

	var openai struct {
		Failure *struct {
			Status     int
			Type, Code string
			Message    string
			Internal   bool
			Session    string
		}
		Text string
	}
	node(t, dir, "openai-failed.mjs", &openai, s.url, "fragile", "model error", "hello")
	if f := openai.Failure; f == nil || f.Status != 500 || f.Type != "server_error" || f.Code != "unavailable" || !f.Internal || f.Session == "" || openai.Text != "ok: hello" {
		t.Errorf("the openai package: %+v, then %q", f, openai.Text)
	}

	var genkit struct {
		Failed struct {
			SessionID, SnapshotID, FinishReason string
			State                               any
			Error                               struct{ Status, Message, Code, Model string }
		}
		Next struct {
			FinishReason string
			Message      struct{ Content []struct{ Text string } }
		}
		Snapshot struct {
			SnapshotID, Status string
			Error              struct{ Code string }
		}
		AbortSettled, AbortUnknown struct{ SnapshotID, Status string }
	}
	node(t, dir, "genkit-outcomes.mjs", &genkit, project, "fragile", "model error", "hello")
	f := genkit.Failed
	if f.FinishReason != "failed" || f.Error.Status != "UNAVAILABLE" || f.Error.Code != "unavailable" || f.Error.Model != "misbehave/failer" ||
		!strings.Contains(f.Error.Message, "the provider is down") || f.SnapshotID == "" || f.State != nil {
		t.Errorf("Genkit's CLI saw the failed turn as %+v", f)
	}
	if n := genkit.Next; n.FinishReason != "stop" || len(n.Message.Content) == 0 || n.Message.Content[0].Text != "ok: hello" {
		t.Errorf("the turn after: %+v", n)
	}
	if sn := genkit.Snapshot; sn.SnapshotID != f.SnapshotID || sn.Status != "failed" || sn.Error.Code != "unavailable" {
		t.Errorf("the failed snapshot: %+v", sn)
	}
	if a := genkit.AbortSettled; a.SnapshotID != f.SnapshotID || a.Status != "failed" {
		t.Errorf("abort of the failed snapshot: %+v", a)
	}
	if a := genkit.AbortUnknown; a.SnapshotID != "no-such-snapshot" || a.Status != "" {
		t.Errorf("abort of an unknown snapshot: %+v", a)
	}
}

// TestWebSocketClientInAnotherProcess holds a multi-turn session over a WebSocket from
// Node.js.
func TestWebSocketClientInAnotherProcess(t *testing.T) {
	dir := clients(t)
	s := sharedServe(t)
	var got struct {
		Session string
		Turns   []string
	}
	ws := "ws" + strings.TrimPrefix(s.url, "http") + "/api/agents/assistant/connect"
	node(t, dir, "ws.mjs", &got, ws, "first", `/call calculator/calc {"expression": "2*21"}`, "third")
	want := []string{"echo: first", `Tool results: {"expression":"2*21","value":42}`, "echo: third"}
	if strings.Join(got.Turns, "|") != strings.Join(want, "|") {
		t.Errorf("turns %q, want %q", got.Turns, want)
	}
	var snaps struct{ Snapshots []json.RawMessage }
	s.call(t, "GET", "/api/agents/assistant/sessions/"+got.Session+"/snapshots", "", &snaps)
	if len(snaps.Snapshots) != 3 {
		t.Errorf("%d snapshots, want one per turn", len(snaps.Snapshots))
	}
}

// screenshot returns where a page test writes its screenshot: in
// $TERRARIUM_SCREENSHOTS, or the test's temporary directory.
func screenshot(t *testing.T, name string) string {
	dir := os.Getenv("TERRARIUM_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	return filepath.Join(dir, name)
}

// TestWebPageInChromium drives the page in a headless Chromium: a streamed answer, an
// interrupt answered in the page, and a message after its socket closed (as the
// server closes an idle one), all within its Content-Security-Policy. The screenshot lands in $TERRARIUM_SCREENSHOTS,
// or the test's temporary directory.
func TestWebPageInChromium(t *testing.T) {
	dir := clients(t)
	chromium := need(t, "chromium")
	s := sharedServe(t)
	shot := screenshot(t, "chat-page.png")
	var got struct {
		Session   string
		Answer    string
		Snapshots int
		Errors    []string
	}
	node(t, dir, "page.mjs", &got, s.url+"/", shot, chromium)
	if got.Answer != "echo: hello page" || got.Snapshots != 4 || len(got.Errors) != 0 || len(got.Session) != 36 {
		t.Errorf("page: %+v", got)
	}
	if info, err := os.Stat(shot); err != nil || info.Size() == 0 {
		t.Errorf("no screenshot: %v", err)
	}
	t.Logf("screenshot: %s", shot)
}

// TestRoutedAgentPageInChromium drives the page with the travel example's routed
// agent: the route and step show after each turn, and after a resume.
func TestRoutedAgentPageInChromium(t *testing.T) {
	dir := clients(t)
	chromium := need(t, "chromium")
	s := startServe(t, "-data", t.TempDir(), travelExample)
	shot := screenshot(t, "chat-page-routed.png")
	var got struct {
		Description string
		Answer      string
		Status      string
		Resumed     []string
		Errors      []string
	}
	node(t, dir, "page-routed.mjs", &got, s.url+"/", shot, chromium)
	if !strings.HasSuffix(got.Description, "Routes: flight, hotel.") || !strings.Contains(got.Status, "route flight · step ask_date") ||
		strings.Join(got.Resumed, "|") != "route flight · step ask_date" || len(got.Errors) != 0 {
		t.Errorf("page: %+v", got)
	}
	t.Logf("screenshot: %s", shot)
}

// makeKey makes an API key of a tenant with the admin API.
func (s *served) makeKey(t *testing.T, admin, tenant string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.url+"/admin/tenants/"+tenant+"/keys", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var made struct{ Key string }
	if err := json.NewDecoder(resp.Body).Decode(&made); err != nil || made.Key == "" {
		t.Fatalf("making a key: %d, %v", resp.StatusCode, err)
	}
	return made.Key
}

// TestTenantPageInChromium drives the page of a server of tenants: it asks for an API
// key, says so when the server refuses one, and with a good one streams an answer
// over the WebSocket, the key kept in sessionStorage alone.
func TestTenantPageInChromium(t *testing.T) {
	dir := clients(t)
	chromium := need(t, "chromium")
	const admin = "admin-page-0123456789abcdef0123456789"
	t.Setenv(adminKeyEnv, admin)
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	src := "tenants:\n  - id: a\n    agents: [assistant]\n    plugins: {offline: {}, calculator: {timeout: 5s}, clock: {timeout: 5s}, scratchpad: {state: write}, profile: {state: write}}\n"
	if err := os.WriteFile(tenants, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-data", t.TempDir(), "-tenants", tenants, exampleDeployment)
	made := struct{ Key string }{s.makeKey(t, admin, "a")}

	shot := screenshot(t, "chat-page-tenants.png")
	var got struct {
		Asked, Refused, Answer string
		Kept                   struct {
			Session     []string
			Local       int
			Cookie, URL string
		}
		Errors []string
	}
	node(t, dir, "page-tenants.mjs", &got, s.url+"/", shot, chromium, made.Key)
	if !strings.Contains(got.Asked, "API key") || !strings.Contains(got.Refused, "invalid API key") ||
		got.Answer != "echo: hello tenant" || len(got.Errors) != 0 {
		t.Errorf("page: %+v", got)
	}
	if len(got.Kept.Session) != 1 || got.Kept.Session[0] != made.Key || got.Kept.Local != 0 || got.Kept.Cookie != "" ||
		strings.Contains(got.Kept.URL, made.Key) {
		t.Errorf("the key is kept %+v, want in sessionStorage alone", got.Kept)
	}
	t.Logf("screenshot: %s", shot)
}
