package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestChatExample(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), &out, dir, "demo"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"echo: Hello! Tell me about Go programming.",
		"session demo: 4 messages, snapshots this run: 2",
		"snapshots in the session: 2",
		"resumed: 6 messages",
		"client-managed: 8 messages",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// A second process with the same directory and session resumes where it stopped.
	out.Reset()
	if err := run(context.Background(), &out, dir, "demo"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "session demo: 10 messages") {
		t.Errorf("second run did not resume the session:\n%s", out.String())
	}
}
