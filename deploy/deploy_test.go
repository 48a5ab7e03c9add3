package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

var quiet = deploy.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// turnInSession runs one turn saying text in the agent's session id, then closes the
// connection.
func turnInSession(t *testing.T, a *deploy.Agent, id, text string) {
	t.Helper()
	conn, err := a.Flow().ConnectAny(t.Context(), json.RawMessage(`{"sessionId":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	turn(t, conn, say(text))
	conn.Close()
	conn.Output()
}

// turn sends one input and returns the turn's text and its pending interrupts.
func turn(t *testing.T, conn session.AnyConnection, in *session.SessionFlowInput) (string, []*abi.Part) {
	t.Helper()
	if err := conn.Send(in); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var pending []*abi.Part
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.Chunk == nil {
			continue
		}
		// Pending interrupts stream in a chunk of role tool.
		for _, p := range c.Chunk.Content {
			if p.IsToolRequest() && p.Metadata["interrupt"] != nil {
				pending = append(pending, p)
			}
		}
		if c.Chunk.Role == abi.RoleModel {
			text.WriteString(c.Chunk.Text())
		}
	}
	return text.String(), pending
}

func say(text string) *session.SessionFlowInput {
	return &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(text)}}
}

func TestExampleDeployment(t *testing.T) {
	files, err := deploy.ReadDir("../examples/deploy")
	if err != nil {
		t.Fatal(err)
	}
	r := agent.NewRegistry()
	d, err := deploy.New(t.Context(), files, deploy.WithDataDir(t.TempDir()), deploy.WithRegistry(r), quiet)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range d.Agents() {
		names = append(names, a.Name+":"+a.SnapshotStore)
	}
	if strings.Join(names, " ") != "assistant:badger support:memory" {
		t.Errorf("agents = %v", names)
	}
	a, err := d.Agent("assistant")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := a.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := turn(t, conn, say(`/call calculator/calc {"expression": "19.99 * 3"}`)); !strings.Contains(text, "59.97") {
		t.Errorf("calculator turn: %q", text)
	}
	_, pending := turn(t, conn, say(`/call askUser {"question": "Which colour?"}`))
	if len(pending) != 1 || pending[0].Metadata["interrupt"].(map[string]any)["question"] != "Which colour?" {
		t.Fatalf("askUser did not interrupt with its question: %v", pending)
	}
	answer := abi.NewToolResponsePart(&abi.ToolResponse{Name: "askUser", Ref: pending[0].ToolRequest.Ref, Output: "green"})
	if text, _ := turn(t, conn, &session.SessionFlowInput{Resume: &abi.Resume{Respond: []*abi.Part{answer}}}); text != `Tool results: "green"` {
		t.Errorf("after the answer: %q", text)
	}
	conn.Close()
	if _, err := conn.Output(); err != nil {
		t.Fatal(err)
	}
	sessions, err := a.Sessions(t.Context())
	if err != nil || len(sessions) != 1 || sessions[0] != conn.SessionID() {
		t.Errorf("sessions = %v, %v; want [%s]", sessions, err, conn.SessionID())
	}
	if ok, err := a.HasSession(t.Context(), conn.SessionID()); !ok || err != nil {
		t.Errorf("HasSession(%s) = %v, %v", conn.SessionID(), ok, err)
	}
	if ok, _ := a.HasSession(t.Context(), "nope"); ok {
		t.Error("HasSession of an unknown session is true")
	}

	support, _ := d.Agent("support")
	conn, err = support.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := turn(t, conn, say("hello")); text != "echo: hello" {
		t.Errorf("support: %q", text)
	}
	conn.Close()
	conn.Output()

	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := r.Actions(); len(left) != 0 {
		t.Errorf("after Close the registry holds %d actions, e.g. %s", len(left), left[0].Key)
	}
}

// writeFiles writes agent files into a fresh directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDeploymentErrorsNameFileLineAndField(t *testing.T) {
	plugins, err := filepath.Abs("../plugins")
	if err != nil {
		t.Fatal(err)
	}
	offline := "  - path: " + filepath.Join(plugins, "offline") + "\n"
	calculator := "  - path: " + filepath.Join(plugins, "calculator") + "\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"unknown tool", map[string]string{"a.yaml": "name: a\nmodel: {name: offline/echo}\ntools:\n  - askUser\n  - nosuch\nsnapshots: {store: none}\nplugins:\n" + offline},
			`a.yaml:5: tools[1]: no tool named "nosuch"`},
		{"unknown model", map[string]string{"a.yaml": "name: a\nmodel:\n  name: offline/nope\nsnapshots: {store: none}\nplugins:\n" + offline},
			`a.yaml:3: model.name: no model named "offline/nope"`},
		{"plugin of another file", map[string]string{
			"a.yaml": "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n" + offline + calculator,
			"b.yaml": "name: b\nmodel: {name: offline/echo}\nsnapshots: {store: none}\ntools: [calculator/calc]\nplugins:\n" + offline},
			`b.yaml:4: tools[0]: tool "calculator/calc" comes from plugin calculator, which this file does not load`},
		{"routed agent's tool of a plugin of another file", map[string]string{
			"a.yaml": "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n" + offline + calculator,
			"b.yaml": "name: b\nmodel: {name: offline/echo}\nsnapshots: {store: none}\ndomains:\n  math: [calculator/calc]\nplugins:\n" + offline},
			`b.yaml:5: domains.math[0]: tool "calculator/calc" comes from plugin calculator, which this file does not load`},
		{"two grants for one plugin", map[string]string{
			"a.yaml": "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n" + offline,
			"b.yaml": "name: b\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n" + strings.TrimSuffix(offline, "\n") + "\n    grants: {timeout: 1s}\n"},
			`b.yaml:5: plugins[0]: plugin ` + filepath.Join(plugins, "offline") + ` is also loaded by`},
		{"pin mismatch", map[string]string{"a.yaml": "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n" + offline + "    sha256: '" + strings.Repeat("0", 64) + "'\n"},
			"a.yaml:6: plugins[0].sha256: the module's SHA-256 is "},
		{"no such plugin", map[string]string{"a.yaml": "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nplugins:\n  - path: nowhere.wasm\n"},
			"a.yaml:5: plugins[0].path: "},
		{"badger without a data directory", map[string]string{"a.yaml": "name: a\nmodel: {name: offline/echo}\nplugins:\n" + offline},
			"a.yaml: snapshots.store: badger needs a data directory"},
		{"postgres without a database", map[string]string{"a.yaml": "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: postgres}\nplugins:\n" + offline},
			"a.yaml:3: snapshots.store: postgres needs the database's URL"},
		{"broken prompt", map[string]string{"a.yaml": "name: a\nmodel: {name: offline/echo}\nsnapshots: {store: none}\nprompt: |\n  Hello {{#if}}\nplugins:\n" + offline},
			"a.yaml:4: prompt: prompt: prompt template error: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			files, err := deploy.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			r := agent.NewRegistry()
			_, err = deploy.New(t.Context(), files, deploy.WithRegistry(r), quiet)
			if !errors.Is(err, deploy.ErrInvalid) || !strings.HasPrefix(err.Error(), filepath.Join(dir, tc.want)) {
				t.Fatalf("error:\n%v\nwant one starting with\n%s", err, filepath.Join(dir, tc.want))
			}
			if left := r.Actions(); len(left) != 0 {
				t.Errorf("a failed deployment left %d actions in the registry, e.g. %s", len(left), left[0].Key)
			}
		})
	}
}

// A store given replaces Badger, and PostgreSQL too (what terrarium mcp, which keeps
// nothing, does with a fleet's agent files).
func TestDeploymentKeepsSessionsInAStoreItIsGiven(t *testing.T) {
	for _, kind := range []string{"", deploy.StorePostgres} {
		t.Run("store="+kind, func(t *testing.T) { testGivenStore(t, kind) })
	}
}

func testGivenStore(t *testing.T, kind string) {
	src := []byte("name: a\nmodel: {name: offline/echo}\nplugins:\n  - path: ../../plugins/offline\n")
	if kind != "" {
		src = append(src, "snapshots: {store: "+kind+"}\n"...)
	}
	// The plugin path is relative to the agent file: parse it as if next to plugins/.
	f, err := deploy.Parse(filepath.Join("..", "examples", "deploy", "a.yaml"), src)
	if err != nil {
		t.Fatal(err)
	}
	st := newCountingStore()
	d, err := deploy.New(t.Context(), []*deploy.File{f}, deploy.WithStore(st), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	a, _ := d.Agent("a")
	turnInSession(t, a, "s", "hi")
	if st.commits == 0 {
		t.Error("the snapshot did not go to the given store")
	}
	d.Close(context.Background())
	if st.closed {
		t.Error("Close closed a store the deployment was given")
	}
}

// countingStore is a memory store that counts commits and remembers being closed.
type countingStore struct {
	*store.Memory
	commits int
	closed  bool
}

func newCountingStore() *countingStore { return &countingStore{Memory: store.NewMemory()} }

func (s *countingStore) Commit(ctx context.Context, ns string, rec store.Record, blobs []store.Blob) error {
	s.commits++
	return s.Memory.Commit(ctx, ns, rec, blobs)
}

func (s *countingStore) Close() error {
	s.closed = true
	return s.Memory.Close()
}

// With a PostgreSQL database, agents keep their sessions there unless their file says
// otherwise, and a second deployment on the database (another host) resumes them.
func TestDeploymentKeepsSessionsInPostgres(t *testing.T) {
	url := pgtest.URL(t)
	src := []byte("name: a\nmodel: {name: offline/echo}\nplugins:\n  - path: ../../plugins/offline\n")
	f, err := deploy.Parse(filepath.Join("..", "examples", "deploy", "a.yaml"), src)
	if err != nil {
		t.Fatal(err)
	}
	hostA, err := deploy.New(t.Context(), []*deploy.File{f}, deploy.WithPostgres(url), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer hostA.Close(context.Background())
	if err := hostA.Ready(t.Context()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	a, _ := hostA.Agent("a")
	if a.SnapshotStore != deploy.StorePostgres {
		t.Fatalf("agent's store = %q, want postgres by default", a.SnapshotStore)
	}
	turnInSession(t, a, "s", "hi")

	hostB, err := deploy.New(t.Context(), []*deploy.File{f}, deploy.WithPostgres(url), deploy.WithRegistry(agent.NewRegistry()), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer hostB.Close(context.Background())
	b, _ := hostB.Agent("a")
	if ok, err := b.HasSession(t.Context(), "s"); !ok || err != nil {
		t.Fatalf("the second host's HasSession = %v, %v", ok, err)
	}
}
