package deploy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/store"
)

// Tools are the agents' (Terrarium's own left out); a tool session keeps what its
// tools change, snapshot after snapshot, and reopens where it was.
func TestToolSessions(t *testing.T) {
	r := agent.NewRegistry()
	testmodel.Define(r, "test/chat")
	agent.DefineTool(r, "upper", "Upper-cases.", func(_ context.Context, s string) (string, error) { return s, nil })
	f, err := deploy.Parse("a.yaml", []byte("name: a\nmodel: {name: test/chat}\ntools: [askUser, upper]\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory()
	d, err := deploy.New(t.Context(), []*deploy.File{f}, deploy.WithRegistry(r), deploy.WithStore(st), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(t.Context())
	a, _ := d.Agent("a")
	if tools := d.Tools(a); len(tools) != 1 || tools[0].Name() != "upper" {
		t.Errorf("tools %v, want upper alone", tools)
	}

	ts := d.ToolSessions()
	s, err := ts.Open(t.Context(), "mcp-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Save(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	for _, notes := range []string{`{"n":1}`, `{"n":2}`} {
		if err := s.SetCustomJSON([]byte(notes)); err != nil {
			t.Fatal(err)
		}
		if err := ts.Save(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	snaps, err := ts.Snapshots(t.Context(), "mcp-1")
	if err != nil || len(snaps) != 2 || snaps[1].ParentID != snaps[0].SnapshotID || string(snaps[1].State.Custom) != `{"n":2}` {
		t.Fatalf("snapshots %v %+v, want one per change", err, snaps)
	}
	again, err := ts.Open(t.Context(), "mcp-1")
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := again.CustomJSON(); string(raw) != `{"n":2}` {
		t.Errorf("reopened with %s", raw)
	}
	// The first copy, behind the second's next save, cannot fork the session.
	again.SetCustomJSON([]byte(`{"n":3}`))
	if err := ts.Save(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	s.SetCustomJSON([]byte(`{"n":4}`))
	if err := ts.Save(t.Context(), s); !errors.Is(err, session.ErrConflict) {
		t.Errorf("a stale copy's save: %v, want a conflict", err)
	}
	if n, err := d.StoredBytes(t.Context()); err != nil || n == 0 {
		t.Errorf("stored bytes %d, %v: the tool sessions count", n, err)
	}
}
