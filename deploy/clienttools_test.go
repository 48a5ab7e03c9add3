package deploy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/deploy"
)

// A prompt agent offers its model the tools a client brings unless its file says
// clientTools: false; then a turn bringing them is refused, naming the agent.
func TestClientToolsFromTheAgentFile(t *testing.T) {
	r := agent.NewRegistry()
	testmodel.Define(r, "test/chat").Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "lookup", Ref: "l"}))
	var files []*deploy.File
	for _, src := range []string{
		"name: open\nmodel: {name: test/chat}\nsnapshots: {store: none}\n",
		"name: closed\nmodel: {name: test/chat}\nclientTools: false\nsnapshots: {store: none}\n",
	} {
		f, err := deploy.Parse("a.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	d, err := deploy.New(t.Context(), files, deploy.WithRegistry(r), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(t.Context())
	in := say("look it up")
	in.Tools = []*abi.ToolDefinition{{Name: "lookup"}}

	open, _ := d.Agent("open")
	conn, err := open.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, pending := turn(t, conn, in); !open.ClientTools || len(pending) != 1 || pending[0].ToolRequest.Name != "lookup" {
		t.Errorf("agent open (client tools %v) left %+v pending, want the client's lookup", open.ClientTools, pending)
	}
	conn.Close()
	conn.Output()

	closed, _ := d.Agent("closed")
	conn, err = closed.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(in); err != nil {
		t.Fatal(err)
	}
	var refused error
	for _, err := range conn.Receive() {
		if err != nil {
			refused = err
		}
	}
	if closed.ClientTools || !errors.Is(refused, agent.ErrInvalidInput) || !strings.Contains(refused.Error(), "agent closed takes no client tools") {
		t.Errorf("agent closed (client tools %v): %v", closed.ClientTools, refused)
	}
	conn.Close()
	conn.Output()
}
