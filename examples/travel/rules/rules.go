// Package rules is the travel examples' model: a small rule-based stand-in for a
// language model (regular expressions over the traveller's words, answers from the
// step's prompt), which answers the calls of a routed travel agent whose routes are
// flight and hotel, so that the examples run offline. It understands nothing.
//
// The Go example (examples/travel) calls it in-process; the agent file's model is the
// same rules as a WebAssembly plugin (examples/travel/model).
package rules

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
)

var (
	place  = regexp.MustCompile(`\b(?:to|in) ([A-Z][a-z]+)`)
	date   = regexp.MustCompile(`\d{4}-\d{2}-\d{2}`)
	count  = regexp.MustCompile(`(\d+) (passengers?|people|nights?)`)
	doNow  = regexp.MustCompile(`Do now: Ask (.*)`)
	inside = regexp.MustCompile(`The conversation is in route (\w+)`)
)

// Answer answers a call of the travel agent's model. It reads the traveller's last
// message and the request's output schema: a routing call gets scores by keyword and
// the data the message states; an answer gets the step's prompt turned into a
// question and the fields; a call asking for no JSON, a greeting.
func Answer(req *abi.GenerateRequest) string {
	if req.Output == nil || req.Output.Schema == nil || len(req.Messages) == 0 {
		return "How can I help with your trip?"
	}
	said := ""
	for _, m := range abi.WithoutInjected(req.Messages) { // not the format instructions
		if m.Role == abi.RoleUser {
			said = m.Text()
		}
	}
	system := req.Messages[0].Text()
	props, _ := req.Output.Schema["properties"].(map[string]any)
	if _, routing := props["routes"]; routing {
		scores := map[string]int{"flight": 10, "hotel": 10}
		switch lower := strings.ToLower(said); {
		case strings.Contains(lower, "hotel"), strings.Contains(lower, "room"):
			scores["hotel"] = 90
		case strings.Contains(lower, "fly"), strings.Contains(lower, "flight"):
			scores["flight"] = 90
		default:
			if m := inside.FindStringSubmatch(system); m != nil {
				scores[m[1]] = 80
			}
		}
		data := map[string]any{}
		extract, _ := props["data"].(map[string]any)
		routeProps, _ := extract["properties"].(map[string]any)
		for id, schema := range routeProps {
			fields, _ := schema.(map[string]any)["properties"].(map[string]any)
			if d := extractFields(said, fields); len(d) > 0 {
				data[id] = d
			}
		}
		b, _ := json.Marshal(map[string]any{"routes": scores, "data": data})
		return string(b)
	}
	out := extractFields(said, props)
	out["message"] = "How can I help with your trip?"
	if m := doNow.FindStringSubmatch(system); m != nil {
		out["message"] = "Noted. Now tell me " + m[1] + "."
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// extractFields finds in text the values of the fields a schema's properties name.
func extractFields(text string, fields map[string]any) map[string]any {
	out := map[string]any{}
	for name := range fields {
		switch name {
		case "destination", "city":
			if m := place.FindStringSubmatch(text); m != nil {
				out[name] = m[1]
			}
		case "departureDate":
			if d := date.FindString(text); d != "" {
				out[name] = d
			}
		case "passengers", "nights":
			for _, m := range count.FindAllStringSubmatch(text, -1) {
				if strings.HasPrefix(m[2], name[:5]) || name == "passengers" && m[2] == "people" {
					out[name], _ = strconv.Atoi(m[1])
				}
			}
		}
	}
	return out
}
