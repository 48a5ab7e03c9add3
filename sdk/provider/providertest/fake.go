package providertest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"unicode"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/internal/schema/instance"
)

// Request is a request to a provider's API as the fake model reads it, decoded from the
// API's wire format by the provider's Codec.
type Request struct {
	// Model is the model the request names; Stream whether it asks for server-sent
	// events.
	Model  string
	Stream bool
	// Messages is the conversation: system instructions as messages with role system,
	// tool calls and their results as tool request and response parts (in messages of
	// whatever role the API puts them), inline media as media parts with data: URLs.
	Messages []*abi.Message
	// Tools are the tools offered, under the API's names.
	Tools []*abi.ToolDefinition
	// ToolChoice is the tool choice ("" when the request sets none); Tool names the one
	// tool the request forces, when it does.
	ToolChoice abi.ToolChoice
	Tool       string
	// Schema is the JSON Schema the output is constrained to (the API's native
	// structured output); JSON says JSON output is asked for without one.
	Schema map[string]any
	JSON   bool
	// MaxTokens limits the answer's tokens (0: no limit); StopSequences end its text.
	MaxTokens     int
	StopSequences []string
	// Reasoning says the request asks to see the model's reasoning.
	Reasoning bool
	// Header and Body are the request as sent, for checks of what only the wire format
	// holds.
	Header http.Header
	Body   map[string]any
}

// Prompt is the text of the last user message that holds text, its text parts joined
// with spaces.
func (r *Request) Prompt() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != abi.RoleUser {
			continue
		}
		var texts []string
		for _, p := range m.Content {
			if p.IsText() && p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, " ")
		}
	}
	return ""
}

// Answer is the fake model's answer to a Request, for a Codec to write.
type Answer struct {
	// ID identifies the answer: "fake-" and a hash of the request's body, so that the
	// same request gets the same answer.
	ID        string
	Reasoning string
	// Text is the answer's text, or Call the tool it calls.
	Text string
	Call *Call
	// Finish is why the answer ends: stop (also for a tool call) or length.
	// StopSequence is the stop sequence that ended the text, if one did.
	Finish       abi.FinishReason
	StopSequence string
	// The usage, in words: of the request's messages, of the text (the arguments' JSON
	// for a call) and of the reasoning.
	InputTokens, OutputTokens, ReasoningTokens int
}

// Call is a tool call of an Answer: its id ("call_fake_<n>", n counting the tool
// requests of the conversation from 1), the tool's API name and the arguments' JSON.
type Call struct {
	ID, Name, Args string
}

// Reply is the fake model: it answers a request deterministically by these rules, in
// order (it is not a language model):
//
//  1. when the messages after the last one holding a tool request hold tool responses
//     and no model message (the model has not answered them yet):
//     "Tool results: " followed by each response's output (a string as it is, another
//     value as JSON) and the text of its content parts, the responses separated by
//     "; ", and " [N image(s)]" for the media in those messages;
//  2. when tools are offered and the tool choice is not none, and the prompt (see
//     Request.Prompt) is "/call <tool> <json>" or says "use <tool>" for an offered
//     tool (its API name or the name before sanitizing: names match when they are the
//     same once lower-cased and every run of other characters than letters and digits
//     is written "_"), or the tool choice is required (the first tool) or names a
//     tool: a call of that tool, with the JSON object after its name in the prompt, or
//     else a minimal instance of its input schema (package instance);
//  3. when JSON output is asked for: a minimal instance of the schema the output is
//     constrained to, or of the schema in a ``` fence of the prompt (the format
//     instructions Terrarium adds), else {};
//  4. otherwise "echo: " followed by the prompt, and " [N image(s)]" when the last
//     user message holds media.
//
// When the request asks for reasoning, the answer reasons "Thinking about: <prompt>".
// Its text ends before the first stop sequence it holds, then after MaxTokens words
// (finish reason length).
func Reply(req *Request) *Answer {
	prompt := req.Prompt()
	b, _ := json.Marshal(req.Body)
	h := fnv.New64a()
	h.Write(b)
	a := &Answer{ID: fmt.Sprintf("fake-%016x", h.Sum64()), Finish: abi.FinishStop}
	for _, m := range req.Messages {
		a.InputTokens += len(strings.Fields(m.Text()))
	}
	if req.Reasoning {
		a.Reasoning = "Thinking about: " + prompt
		a.ReasoningTokens = len(strings.Fields(a.Reasoning))
	}
	results, inResults := toolResults(req.Messages)
	call := callFor(req, prompt)
	switch {
	case len(results) > 0: // 1.
		a.Text = "Tool results: " + strings.Join(results, "; ") + images(inResults)
	case call != nil: // 2.
		a.Call = call
		a.OutputTokens = len(strings.Fields(call.Args))
		return a
	case req.Schema != nil: // 3.
		a.Text = jsonText(instance.Minimal(req.Schema))
	case req.JSON || strings.Contains(prompt, "```") && strings.Contains(prompt, "JSON"):
		a.Text = "{}"
		var schema map[string]any
		if raw, err := abi.ExtractJSON(prompt); err == nil && json.Unmarshal(raw, &schema) == nil {
			a.Text = jsonText(instance.Minimal(schema))
		}
	default: // 4.
		a.Text = "echo: " + prompt
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == abi.RoleUser {
			a.Text += images(media(req.Messages[n-1:]))
		}
	}
	for _, s := range req.StopSequences {
		if i := strings.Index(a.Text, s); s != "" && i >= 0 {
			a.Text, a.StopSequence = a.Text[:i], s
		}
	}
	if words := Words(a.Text); req.MaxTokens > 0 && len(words) > req.MaxTokens {
		a.Text = strings.TrimRightFunc(strings.Join(words[:req.MaxTokens], ""), unicode.IsSpace)
		a.Finish = abi.FinishLength
	}
	a.OutputTokens = len(strings.Fields(a.Text))
	return a
}

// toolResults returns the texts of the tool responses after the last tool request
// that the model has not answered (rule 1), and how many media parts those messages
// hold.
func toolResults(msgs []*abi.Message) ([]string, int) {
	start := 0
	for i, m := range msgs {
		if len(m.ToolRequests()) > 0 {
			start = i + 1
		}
	}
	var results []string
	for _, m := range msgs[start:] {
		if m.Role == abi.RoleModel {
			return nil, 0 // the model answered the results already
		}
		for _, r := range m.ToolResponses() {
			var texts []string
			switch o := r.Output.(type) {
			case nil:
			case string:
				texts = append(texts, o)
			default:
				texts = append(texts, jsonText(o))
			}
			for _, p := range r.Content {
				if p.IsText() {
					texts = append(texts, p.Text)
				}
			}
			results = append(results, strings.Join(texts, " "))
		}
	}
	return results, media(msgs[start:])
}

// media counts the media parts of msgs, tool responses' content included.
func media(msgs []*abi.Message) int {
	n := 0
	for _, m := range msgs {
		for _, p := range m.Content {
			if p.IsMedia() {
				n++
			}
			if p.IsToolResponse() {
				for _, c := range p.ToolResponse.Content {
					if c.IsMedia() {
						n++
					}
				}
			}
		}
	}
	return n
}

func images(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " [1 image]"
	}
	return fmt.Sprintf(" [%d images]", n)
}

// callFor returns the tool call the request asks for (rule 2), nil when none.
func callFor(req *Request, prompt string) *Call {
	if len(req.Tools) == 0 || req.ToolChoice == abi.ToolChoiceNone {
		return nil
	}
	n := 1
	for _, m := range req.Messages {
		n += len(m.ToolRequests())
	}
	call := func(t *abi.ToolDefinition, rest string) *Call {
		args := map[string]any{}
		if i := strings.IndexByte(rest, '{'); i < 0 || json.NewDecoder(strings.NewReader(rest[i:])).Decode(&args) != nil {
			args, _ = instance.Minimal(t.InputSchema).(map[string]any)
		}
		return &Call{ID: fmt.Sprintf("call_fake_%d", n), Name: t.Name, Args: jsonText(args)}
	}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(prompt), "/call "); ok {
		name, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if t := offered(req.Tools, name); t != nil {
			return call(t, args)
		}
	}
	for rest := prompt; ; {
		i := strings.Index(strings.ToLower(rest), "use ")
		if i < 0 {
			break
		}
		rest = strings.TrimLeft(rest[i+len("use "):], " ")
		word, after, _ := strings.Cut(rest, " ")
		if t := offered(req.Tools, strings.TrimRight(word, ":,.;!?")); t != nil {
			return call(t, after)
		}
	}
	switch {
	case req.Tool != "":
		if t := offered(req.Tools, req.Tool); t != nil {
			return call(t, "")
		}
	case req.ToolChoice == abi.ToolChoiceRequired:
		return call(req.Tools[0], "")
	}
	return nil
}

// offered returns the offered tool name stands for, or nil.
func offered(tools []*abi.ToolDefinition, name string) *abi.ToolDefinition {
	for _, t := range tools {
		if fold(t.Name) == fold(name) {
			return t
		}
	}
	return nil
}

// fold writes a tool name as names compare: lower case, each run of characters other
// than letters and digits one "_", so that "math/add" matches the API's "math__add".
func fold(name string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(name) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
			sep = false
		} else if !sep {
			b.WriteByte('_')
			sep = true
		}
	}
	return b.String()
}

// Words splits text into words, each keeping the white space after it (the first also
// any before it), so that the words joined are the text: the pieces the fake streams.
func Words(text string) []string {
	var out []string
	start, inSpace, word := 0, false, false
	for i, r := range text {
		sp := unicode.IsSpace(r)
		if !sp && inSpace && word {
			out = append(out, text[start:i])
			start = i
		}
		inSpace, word = sp, word || !sp
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
