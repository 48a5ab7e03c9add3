// Command scratchpad is a Terrarium plugin that keeps notes in the session: the tool
// note appends a note, the tool notes lists them. The notes live in the session's custom
// state under the key "scratchpad" (a JSON array of strings); the other keys of the
// state are left as they are. It needs the state capability (write).
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o scratchpad.wasm .
package main

import (
	"context"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/sdk"
)

// key is the custom state key holding the notes.
const key = "scratchpad"

// NoteInput is the input of note.
type NoteInput struct {
	Text string `json:"text" jsonschema:"description=The note to keep,minLength=1"`
}

// NoteOutput is the output of note.
type NoteOutput struct {
	Count int `json:"count" jsonschema:"description=How many notes the session now holds"`
}

// NotesInput is the (empty) input of notes.
type NotesInput struct{}

// NotesOutput is the output of notes.
type NotesOutput struct {
	Notes []string `json:"notes" jsonschema:"description=The notes\\, oldest first"`
}

func main() {
	sdk.Plugin(sdk.Info{
		Name:        "scratchpad",
		Version:     "1.0.0",
		Description: "Keeps notes in the session's state.",
		Capabilities: plugin.Capabilities{State: plugin.StateWrite, StateSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"scratchpad": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			},
		}},
	})
	sdk.Tool("note", "Keeps a note for later in this conversation.", note)
	sdk.Tool("notes", "Lists the notes kept in this conversation.", notes)
}

func note(_ context.Context, in NoteInput) (NoteOutput, error) {
	text := strings.TrimSpace(in.Text)
	if text == "" {
		return NoteOutput{}, abi.Errorf(abi.CodeInvalidInput, "the note is empty")
	}
	state, list, err := load()
	if err != nil {
		return NoteOutput{}, err
	}
	list = append(list, text)
	state[key] = list
	if err := sdk.SetState(state); err != nil {
		return NoteOutput{}, err
	}
	return NoteOutput{Count: len(list)}, nil
}

func notes(context.Context, NotesInput) (NotesOutput, error) {
	_, list, err := load()
	if err != nil {
		return NotesOutput{}, err
	}
	if list == nil {
		list = []string{}
	}
	return NotesOutput{Notes: list}, nil
}

// load reads the custom state (an object, or nothing yet) and the notes in it.
func load() (map[string]any, []string, error) {
	state, err := sdk.State[map[string]any]()
	if err != nil {
		return nil, nil, err
	}
	if state == nil {
		state = map[string]any{}
	}
	var list []string
	switch v := state[key].(type) {
	case nil:
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, nil, abi.Errorf(abi.CodeInternal, "the state's %q holds a %T, want strings", key, e)
			}
			list = append(list, s)
		}
	default:
		return nil, nil, abi.Errorf(abi.CodeInternal, "the state's %q is a %T, want an array of strings", key, v)
	}
	return state, list, nil
}
