package deploy

import (
	"context"
	"slices"

	"github.com/terrarium-ai/terrarium/agent"
)

// AskUserInput is the input of the askUser tool.
type AskUserInput struct {
	Question string `json:"question" jsonschema:"description=What to ask the user"`
}

// builtins are the native tools every deployment offers agent files by name, defined
// when a file names one the registry lacks.
var builtins = map[string]func() agent.Tool{
	// askUser interrupts the turn with a question; the client answers it with a tool
	// response (its output is the answer), or restarts it with {"answer": "..."} as
	// the restart's metadata.
	"askUser": func() agent.Tool {
		return agent.NewTool("askUser", "Asks the user a question and waits for the answer.",
			func(ctx context.Context, in AskUserInput) (string, error) {
				if md, ok := agent.Resumed(ctx); ok {
					if answer, ok := md["answer"].(string); ok {
						return answer, nil
					}
				}
				return "", agent.Interrupt(map[string]any{"question": in.Question})
			})
	},
}

// Builtins lists the names of the native tools agent files may name besides those of
// their plugins and their application.
func Builtins() []string {
	var names []string
	for name := range builtins {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func builtin(name string) (agent.Tool, bool) {
	mk, ok := builtins[name]
	if !ok {
		return nil, false
	}
	return mk(), true
}
