package session

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
)

// A segment's bytes are hashed into its digest, which every snapshot after it names:
// the hand-written encoding must be encoding/json's, byte for byte, or the segments a
// store wrote before would stop matching the messages they hold.
func TestSegmentEncodingIsEncodingJSONs(t *testing.T) {
	tool := abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Name: "add", Ref: "1", Input: map[string]any{"b": 2.0, "a": "<&>"}}))
	withMeta := abi.NewUserTextMessage("hi")
	withMeta.Metadata = map[string]any{"k": []any{1.0, "\u2028"}}
	for name, seg := range map[string]segment{
		"no messages":  {},
		"empty":        {Messages: []*abi.Message{}},
		"first":        {Messages: []*abi.Message{abi.NewUserTextMessage("What is 1 + 2?"), abi.NewModelTextMessage("3")}},
		"continuing":   {Messages: []*abi.Message{abi.NewModelTextMessage("ok")}, Prev: "ab12", Start: 1000},
		"escapes":      {Messages: []*abi.Message{abi.NewUserTextMessage("\"quoted\" <b>&amp;</b>\n\t\x01 é \u2029")}, Prev: "<>", Start: 3},
		"a tool":       {Messages: []*abi.Message{tool}, Start: 7},
		"metadata":     {Messages: []*abi.Message{withMeta}},
		"a nil":        {Messages: []*abi.Message{nil, abi.NewUserTextMessage("x")}},
		"invalid utf8": {Messages: []*abi.Message{abi.NewUserTextMessage("a\xffb")}},
	} {
		t.Run(name, func(t *testing.T) {
			checkSegmentEncoding(t, seg)
		})
	}
}

func checkSegmentEncoding(t *testing.T, seg segment) {
	t.Helper()
	checkEncoding(t, seg, seg.appendJSON)
}

// checkEncoding checks that appendJSON writes v as encoding/json does, or fails as it
// does.
func checkEncoding(t *testing.T, v any, appendJSON func([]byte) ([]byte, error)) {
	t.Helper()
	want, werr := json.Marshal(v)
	got, gerr := appendJSON(nil)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("errors differ: encoding/json %v, appendJSON %v", werr, gerr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendJSON wrote\n%s\nencoding/json\n%s", got, want)
	}
}

func FuzzSegmentEncoding(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":[{"text":"hi <there>"}]}]`), "", 0)
	f.Add([]byte(`[{"role":"model","content":[{"toolRequest":{"name":"t","input":{"z":1,"a":[null,true]}}}],"metadata":{"x":"\u2028"}}]`), "ab", 12)
	f.Add([]byte(`[null,{"role":"tool","content":[{"toolResponse":{"name":"t","output":"é"}}]}]`), "\x00", -1)
	f.Fuzz(func(t *testing.T, msgs []byte, prev string, start int) {
		var seg segment
		if json.Unmarshal(msgs, &seg.Messages) != nil {
			return
		}
		seg.Prev, seg.Start = prev, start
		checkSegmentEncoding(t, seg)
	})
}

// The record's bytes are its snapshot's ID: the hand-written encoding must be
// encoding/json's, byte for byte, or every stored ID would stop verifying.
func TestRecordEncodingIsEncodingJSONs(t *testing.T) {
	at := time.Date(2026, 11, 28, 4, 5, 6, 789, time.UTC)
	turnErr, err := json.Marshal(&TurnError{Message: "the tool <calc> failed: \"x\" & y", Code: "internal", Status: "INTERNAL", Tool: "calc"})
	if err != nil {
		t.Fatal(err)
	}
	for name, rec := range map[string]snapshotRecord{
		"empty":      {},
		"first turn": {CreatedAt: at, Event: SnapshotEventTurnEnd, SessionID: "s1", State: stateRoot{Custom: "c1", Messages: &messagesRef{Count: 2, Head: "h1"}}, Status: StatusCompleted, V: snapshotFormat},
		"every field": {Branch: true, CreatedAt: at.Add(time.Hour * 24 * 400), Error: turnErr, Event: SnapshotEventInvocationEnd, FinishReason: abi.FinishLength,
			ParentID: "p<1>", SessionID: "s\u2028", State: stateRoot{Artifacts: []string{"a1", "a&2"}, Custom: "c", Messages: &messagesRef{Count: 1 << 40, Head: "h"}, PromptInput: "pi"},
			Status: StatusFailed, TurnIndex: 12345, V: 3},
		"no messages": {CreatedAt: at, SessionID: "s", State: stateRoot{PromptInput: "pi"}, TurnIndex: -1},
		"zone":        {CreatedAt: time.Date(1, 1, 1, 0, 0, 0, 1, time.FixedZone("x", 3600))},
	} {
		t.Run(name, func(t *testing.T) {
			checkRecordEncoding(t, rec)
		})
	}
	// A year encoding/json cannot write is an error both ways.
	checkRecordEncoding(t, snapshotRecord{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
}

func checkRecordEncoding(t *testing.T, rec snapshotRecord) {
	t.Helper()
	checkEncoding(t, rec, rec.appendJSON)
}

func FuzzRecordEncoding(f *testing.F) {
	f.Add(false, int64(0), "", "turnEnd", "", "", "s", "", "", 0, "", "", 0, 3, "")
	f.Add(true, int64(1<<62), "boom <&>", "invocationEnd", "stop", "p", "s\xff", "c", "h", 7, "a", "pi", -3, 2, "failed")
	f.Fuzz(func(t *testing.T, branch bool, nanos int64, errMsg, event, finish, parent, sessionID, custom, head string, count int, artifact, promptInput string, turn, v int, status string) {
		rec := snapshotRecord{Branch: branch, CreatedAt: time.Unix(0, nanos).UTC(), Event: SnapshotEvent(event), FinishReason: abi.FinishReason(finish),
			ParentID: parent, SessionID: sessionID, Status: SnapshotStatus(status), TurnIndex: turn, V: v,
			State: stateRoot{Custom: custom, PromptInput: promptInput}}
		if errMsg != "" {
			rec.Error, _ = json.Marshal(&TurnError{Message: errMsg, Code: "internal"})
		}
		if head != "" {
			rec.State.Messages = &messagesRef{Count: count, Head: head}
		}
		if artifact != "" {
			rec.State.Artifacts = []string{artifact, custom}
		}
		checkRecordEncoding(t, rec)
	})
}
