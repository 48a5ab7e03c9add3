// Command profile is a Terrarium plugin with one handler, extract, run at the start of
// each turn. It reads the turn's user messages for simple statements about the user:
// "my name is X", "I live in Y" and "I like Z" (in any case), and merges what it finds
// into the session's custom state under the key "profile", an object with name, city
// and likes. The other keys of the state, and of the profile, are left as they are.
// When the profile changed it streams the status {"profile": "updated"}. It always lets
// the turn continue, and needs the state capability (write).
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o profile.wasm .
package main

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/sdk"
)

// key is the custom state key holding the profile.
const key = "profile"

var (
	nameRe = regexp.MustCompile(`(?i)\bmy name is\s+([^.,!?;:\n]+)`)
	cityRe = regexp.MustCompile(`(?i)\bi live in\s+([^.,!?;:\n]+)`)
	likeRe = regexp.MustCompile(`(?i)\bi (?:really )?(?:like|love)\s+([^.!?;:\n]+)`)
	// clauseEnd ends a "like" list where another clause starts: "..., and I live ...".
	clauseEnd = regexp.MustCompile(`(?i)(?:,\s*|\s+)(?:and\s+|but\s+)?(?:i|my|we|you)\s`)
	listSep   = regexp.MustCompile(`(?i)\s*,\s*(?:and\s+)?|\s+and\s+`)
)

func main() {
	sdk.Plugin(sdk.Info{
		Name:        "profile",
		Version:     "1.0.0",
		Description: "Remembers the user's name, city and likes from what they say.",
		Capabilities: plugin.Capabilities{State: plugin.StateWrite, StateSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"profile": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"name":  map[string]any{"type": "string"},
						"city":  map[string]any{"type": "string"},
						"likes": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					},
				},
			},
		}},
	})
	sdk.Handler("extract", "Extracts the user's name, city and likes into the state's profile.", extract, abi.HookTurnStart)
}

// facts is what one turn's messages say about the user.
type facts struct {
	name, city string
	likes      []string
}

func extract(_ context.Context, in *abi.HandlerInput) (*abi.Directive, error) {
	var f facts
	for _, m := range in.Input {
		if m.Role == abi.RoleUser {
			scan(m.Text(), &f)
		}
	}
	if f.name == "" && f.city == "" && len(f.likes) == 0 {
		return &abi.Directive{Action: abi.DirectiveContinue}, nil
	}
	state, err := sdk.State[map[string]any]()
	if err != nil {
		return nil, err
	}
	if state == nil {
		state = map[string]any{}
	}
	old, _ := state[key].(map[string]any)
	profile := map[string]any{}
	for k, v := range old {
		profile[k] = v
	}
	if f.name != "" {
		profile["name"] = f.name
	}
	if f.city != "" {
		profile["city"] = f.city
	}
	if len(f.likes) > 0 {
		likes := toStrings(profile["likes"])
		for _, l := range f.likes {
			if !containsFold(likes, l) {
				likes = append(likes, l)
			}
		}
		profile["likes"] = likes
	}
	if old != nil && reflect.DeepEqual(normalize(old), normalize(profile)) {
		return &abi.Directive{Action: abi.DirectiveContinue}, nil
	}
	state[key] = profile
	if err := sdk.SetState(state); err != nil {
		return nil, err
	}
	if err := sdk.Status(map[string]any{"profile": "updated"}); err != nil {
		sdk.Logf(plugin.LogWarn, "profile: streaming the status: %v", err)
	}
	return &abi.Directive{Action: abi.DirectiveContinue}, nil
}

// scan adds what text says about the user to f; later statements win.
func scan(text string, f *facts) {
	for _, m := range nameRe.FindAllStringSubmatch(text, -1) {
		if v := leadingName(m[1]); v != "" {
			f.name = v
		}
	}
	for _, m := range cityRe.FindAllStringSubmatch(text, -1) {
		if v := leadingName(m[1]); v != "" {
			f.city = v
		}
	}
	for _, m := range likeRe.FindAllStringSubmatch(text, -1) {
		list := m[1]
		if loc := clauseEnd.FindStringIndex(list); loc != nil {
			list = list[:loc[0]]
		}
		for _, item := range listSep.Split(list, -1) {
			item = strings.TrimSpace(item)
			if item != "" && !containsFold(f.likes, item) {
				f.likes = append(f.likes, item)
			}
		}
	}
}

// leadingName takes a name from the start of s: its first word, then the words that
// follow while they are capitalized ("Ada Lovelace and I..." gives "Ada Lovelace").
func leadingName(s string) string {
	words := strings.Fields(s)
	if len(words) == 0 {
		return ""
	}
	n := 1
	for n < len(words) {
		r, _ := utf8.DecodeRuneInString(words[n])
		if !unicode.IsUpper(r) {
			break
		}
		n++
	}
	return strings.Join(words[:n], " ")
}

func toStrings(v any) []string {
	var out []string
	switch v := v.(type) {
	case []string:
		out = append(out, v...)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// normalize makes a profile read from JSON comparable with one built here.
func normalize(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		if k == "likes" {
			v = toStrings(v)
		}
		out[k] = v
	}
	return out
}
