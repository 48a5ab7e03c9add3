package session_test

import (
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
)

// TestMessagesIsAViewOfTheHistory: Messages costs nothing however long the history, and
// what a caller does with the slice it got (appending) or what the session does next
// (adding) leaves the other unchanged.
func TestMessagesIsAViewOfTheHistory(t *testing.T) {
	var history []*abi.Message
	for range 1000 {
		history = append(history, abi.NewUserTextMessage("q"), abi.NewModelTextMessage("a"))
	}
	sess := session.New("s", &session.SessionState[struct{}]{Messages: history})
	if n := testing.AllocsPerRun(20, func() { sess.Messages() }); n != 0 {
		t.Errorf("Messages of a 2,000-message history cost %v allocations, want 0", n)
	}
	got := sess.Messages()
	mine := append(got, abi.NewUserTextMessage("mine"))
	sess.AddMessages(abi.NewUserTextMessage("the session's"))
	now := sess.Messages()
	if len(got) != 2000 || len(now) != 2001 || now[2000].Text() != "the session's" || mine[2000].Text() != "mine" {
		t.Errorf("after appending to the view and adding to the session: view %d, session %d (%q), appended %q",
			len(got), len(now), now[len(now)-1].Text(), mine[len(mine)-1].Text())
	}
}
