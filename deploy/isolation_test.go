package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/deploy"
)

// An agent file's isolation: session keeps what a plugin remembers in its memory (the
// misbehave plugin's remember tool keeps its last caller's input in a global variable)
// from one session to the next; pooled, the next session reads it.
func TestAgentSessionIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the misbehave plugin")
	}
	for _, c := range []struct {
		isolation string
		leaks     bool
	}{{"pooled", true}, {"session", false}} {
		dir := t.TempDir()
		offline, _ := filepath.Abs("../plugins/offline")
		misbehave, _ := filepath.Abs("../host/testdata/misbehave")
		src := "name: a\nmodel: {name: offline/echo}\ntools: [misbehave/remember]\nisolation: " + c.isolation +
			"\nsnapshots: {store: memory}\nplugins:\n  - path: " + offline + "\n  - path: " + misbehave + "\n    grants: {maxInstances: 1}\n"
		if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := deploy.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		d, err := deploy.New(t.Context(), files, quiet)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := d.Agent("a")
		var texts []string
		for _, secret := range []string{"the first session's secret", "second"} {
			conn, err := a.Flow().ConnectAny(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			text, _ := turn(t, conn, say(`/call misbehave/remember {"text": "`+secret+`"}`))
			texts = append(texts, text)
			conn.Close()
			conn.Output()
		}
		if leaked := strings.Contains(texts[1], "first session's secret"); leaked != c.leaks {
			t.Errorf("isolation %s: the second session read %q", c.isolation, texts[1])
		}
		d.Close(t.Context())
	}
}
