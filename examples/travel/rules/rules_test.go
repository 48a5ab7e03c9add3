package rules_test

import (
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/examples/travel/rules"
)

// A call that asks for text (a step that collects nothing) gets text, not a panic.
func TestAnswerWithoutAnOutputSchema(t *testing.T) {
	for _, req := range []*abi.GenerateRequest{
		{Messages: []*abi.Message{abi.NewSystemTextMessage("You are Skye."), abi.NewUserTextMessage("hello")}},
		{Output: &abi.OutputConfig{Format: "json"}},
	} {
		if got := rules.Answer(req); got != "How can I help with your trip?" {
			t.Errorf("Answer = %q", got)
		}
	}
}
