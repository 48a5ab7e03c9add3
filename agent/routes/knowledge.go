package routes

import "github.com/terrarium-ai/terrarium/agent"

// Term is an entry of the agent's glossary: a word of its domain the model should
// understand as the business does.
type Term struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Synonyms    []string `json:"synonyms,omitempty"`
}

// Guideline is a rule of behaviour: when Condition holds (judged by the model; empty
// means always), do Action. A guideline of the agent applies everywhere, one of a route
// only in that route, one of a step only at that step. Condition and Action are
// templates ({{var}} from the context).
type Guideline struct {
	ID        string `json:"id,omitempty"`
	Condition string `json:"condition,omitempty"`
	Action    string `json:"action"`
	// Disabled keeps the guideline out of every prompt. (Seed 002's enabled, which
	// defaults to true; Go's zero value is false, so the flag is inverted.)
	Disabled bool     `json:"disabled,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	// Tools are offered to the model wherever the guideline applies.
	Tools    []agent.Tool   `json:"-"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Capability is something the agent can do, shown to the model; its tools are offered
// with it.
type Capability struct {
	ID          string       `json:"id,omitempty"`
	Title       string       `json:"title"`
	Description string       `json:"description"`
	Tools       []agent.Tool `json:"-"`
}

// CompositionMode says how the agent's answers are written (seed 002's
// CompositionMode, which @falai/agent declares but never implemented).
type CompositionMode string

// The composition modes.
const (
	// Fluid: the model writes its answer freely. The default.
	Fluid CompositionMode = "fluid"
	// CannedFluid: the model answers with a canned response when one fits, and writes
	// its own otherwise.
	CannedFluid CompositionMode = "canned_fluid"
	// CannedComposited: the model writes its answer from the canned responses, which
	// the prompt gives it as the wording to use.
	CannedComposited CompositionMode = "composited_canned"
	// CannedStrict: the answer is one of the canned responses, chosen by the model and
	// filled from the route's data and the context; anything else is refused.
	CannedStrict CompositionMode = "strict_canned"
)

func (m CompositionMode) valid() bool {
	switch m {
	case Fluid, CannedFluid, CannedComposited, CannedStrict:
		return true
	}
	return false
}

// CannedResponse is an answer written by the agent's author. Template is rendered with
// the context and the current route's data ({{destination}}), the data winning.
type CannedResponse struct {
	ID       string `json:"id"`
	Template string `json:"template"`
}
