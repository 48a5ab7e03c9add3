package provider

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// NameRule says which tool names an API accepts: ASCII letters, digits, '_', '-' and
// the characters of Extra, at most MaxLen bytes. The zero rule is the common
// ^[a-zA-Z0-9_-]{1,64}$ (OpenAI's Chat Completions, Anthropic's Messages).
type NameRule struct {
	// Extra lists the characters allowed besides ASCII letters, digits, '_' and '-'
	// (Gemini: ".:").
	Extra string
	// LetterFirst asks that a name start with a letter or '_' (Gemini).
	LetterFirst bool
	// MaxLen is the longest name, in bytes; 0 means 64.
	MaxLen int
}

// maxLen is the rule's longest name.
func (r NameRule) maxLen() int {
	if r.MaxLen <= 0 {
		return 64
	}
	return r.MaxLen
}

// allowed reports whether the rule allows the character c.
func (r NameRule) allowed(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' ||
		c < 0x80 && strings.ContainsRune(r.Extra, c)
}

// Sanitize turns a tool name into one the rule allows: '/' becomes "__"
// ("calculator/calc" → "calculator__calc"), any other character not allowed '_' (one
// per character), an empty name "tool", a name that must but does not start with a
// letter or '_' gets a leading '_', and a name too long is cut, keeping a hash of the
// whole name at its end so that two long names stay apart.
func (r NameRule) Sanitize(name string) string {
	var b strings.Builder
	for _, c := range name {
		switch {
		case c == '/':
			b.WriteString("__")
		case r.allowed(c):
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		s = "tool"
	}
	if r.LetterFirst && !(s[0] == '_' || s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		s = "_" + s
	}
	if limit := r.maxLen(); len(s) > limit {
		h := fnv.New32a()
		h.Write([]byte(name))
		sum := fmt.Sprintf("_%08x", h.Sum32())
		if limit <= len(sum) {
			return s[:limit]
		}
		s = s[:limit-len(sum)] + sum
	}
	return s
}

// ToolNames maps the tool names of one request to the names sent to the API, and the
// API's names back. Names are assigned as they are met (the request's tools first,
// then those of tool requests in the history): a sanitized name another tool already
// has gets a numbered suffix ("_2", "_3", ...).
type ToolNames struct {
	rule    NameRule
	toAPI   map[string]string // original name → API name
	fromAPI map[string]string // API name → original name
}

// NewToolNames returns the names of a request under the rule, with names (the
// request's tools, in order) registered.
func NewToolNames(rule NameRule, names ...string) *ToolNames {
	n := &ToolNames{rule: rule, toAPI: map[string]string{}, fromAPI: map[string]string{}}
	for _, name := range names {
		n.API(name)
	}
	return n
}

// API returns the name sent to the API for a tool, assigning one unique within the
// request the first time a name is met.
func (n *ToolNames) API(name string) string {
	if s, ok := n.toAPI[name]; ok {
		return s
	}
	base := n.rule.Sanitize(name)
	s := base
	for i := 2; ; i++ {
		if _, taken := n.fromAPI[s]; !taken {
			break
		}
		suffix := "_" + strconv.Itoa(i)
		s = base[:min(len(base), n.rule.maxLen()-len(suffix))] + suffix
	}
	n.toAPI[name] = s
	n.fromAPI[s] = name
	return s
}

// Original returns the tool name behind a name the API used; a name not assigned (a
// tool the API runs itself, a name the model made up) is returned as is, and so is
// every name on nil ToolNames.
func (n *ToolNames) Original(apiName string) string {
	if n != nil {
		if o, ok := n.fromAPI[apiName]; ok {
			return o
		}
	}
	return apiName
}
