package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestAgentExample(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, "prompts"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"I'm sorry the blender arrived broken.",
		"waiting for approval: map[approve:Refund 59.90 EUR for order 1042?]",
		"Done: 59.90 EUR are on their way back to you.",
		`state: mood "annoyed", refunds 1, 8 messages`,
		// The system prompt follows the state: the mood the tool recorded in turn 1
		// shows from turn 2 on; the refund made after approval shows at the end.
		"call 1: You are the support assistant of Blendr. Be friendly. / The customer's mood: . / Use the refund tool",
		"call 3: You are the support assistant of Blendr. Be friendly. / The customer's mood: annoyed. / Use the refund tool",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
