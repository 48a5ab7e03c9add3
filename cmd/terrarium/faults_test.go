package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The fault injection of issue 27 on the surfaces a person uses (server/faults_test.go
// drives the others): terrarium chat in a terminal and the page in Chromium talk to a
// serve whose model and tools fail on purpose (host/testdata's misbehave: its failer
// model fails as the message says, and calls the tool a message names).

// fault is one way to fail, as the user asks for it, and what the turn's error must
// say: its code, and the model or tool that failed.
type fault struct {
	say, code, model, tool string
}

// who is how a failure names what failed: "model <name>" or "tool <name>".
func (f fault) who() string {
	if f.tool != "" {
		return "tool " + f.tool
	}
	return "model " + f.model
}

var faults = []fault{
	{say: "model error", code: "unavailable", model: "misbehave/failer"},
	{say: "model invalid", code: "invalid_input", model: "misbehave/failer"},
	{say: "model trap", code: "internal", model: "misbehave/failer"},
	{say: "model timeout", code: "limit_exceeded", model: "misbehave/failer"},
	{say: "model badjson", code: "internal", model: "misbehave/failer"},
	{say: `call misbehave/returns {"error": "{\"code\": \"invalid_input\", \"message\": \"n must be even\"}", "rc": 1}`, code: "invalid_input", tool: "misbehave/returns"},
	{say: `call misbehave/panic {}`, code: "internal", tool: "misbehave/panic"},
	{say: `call misbehave/sleep {}`, code: "limit_exceeded", tool: "misbehave/sleep"},
	{say: `call misbehave/badjson {}`, code: "internal", tool: "misbehave/badjson"},
	{say: `call misbehave/ok [1]`, code: "invalid_input", tool: "misbehave/ok"},
}

// fragileAgent is the agent file of the agent that fails on purpose: the failer model
// with misbehave's tools, failing the turn when a tool fails (toolErrors: fail), its
// plugin's calls bounded by a second so that the timeouts come soon.
func fragileAgent(t *testing.T) string {
	t.Helper()
	misbehave, err := filepath.Abs("../../host/testdata/misbehave")
	if err != nil {
		t.Fatal(err)
	}
	return "name: fragile\nmodel: {name: misbehave/failer}\n" +
		"tools: [misbehave/ok, misbehave/panic, misbehave/sleep, misbehave/badjson, misbehave/returns]\n" +
		"toolErrors: fail\nplugins:\n  - path: " + misbehave + "\n    grants: {timeout: 1s, maxInstances: 4}\n"
}

// fragileDeployment is a deployment of the fragile agent alone.
func fragileDeployment(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fragile.yaml"), []byte(fragileAgent(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkFaultHistory checks a session of the fragile agent after the faults: its
// conversation holds exactly the successful turns (their user messages are good), and
// it has one failed snapshot per fault, in order, each carrying its fault's error.
func checkFaultHistory(t *testing.T, s *served, session string, good []string) {
	t.Helper()
	if got := s.userTexts(t, "fragile", session); !slices.Equal(got, good) {
		t.Errorf("the session's conversation holds the user messages %q, want the successful turns' %q", got, good)
	}
	var list struct {
		Snapshots []struct {
			Status string
			Error  *struct{ Code, Model, Tool string }
		}
	}
	if code := s.call(t, "GET", "/api/agents/fragile/sessions/"+session+"/snapshots", "", &list); code != http.StatusOK {
		t.Fatalf("the session's snapshots: status %d", code)
	}
	var failed []string
	for _, snap := range list.Snapshots {
		if snap.Status == "failed" && snap.Error != nil {
			failed = append(failed, fmt.Sprintf("%s %s%s", snap.Error.Code, snap.Error.Model, snap.Error.Tool))
		}
	}
	var want []string
	for _, f := range faults {
		want = append(want, fmt.Sprintf("%s %s%s", f.code, f.model, f.tool))
	}
	if !slices.Equal(failed, want) {
		t.Errorf("the failed snapshots carry\n%q\nwant\n%q", failed, want)
	}
}
