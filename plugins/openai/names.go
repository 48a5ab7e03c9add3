package main

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// maxToolName is the longest function name the Chat Completions API accepts.
const maxToolName = 64

// sanitizeName turns a tool name into one the API accepts, ^[a-zA-Z0-9_-]{1,64}$:
// '/' becomes "__" ("calculator/calc" → "calculator__calc"), any other character
// outside the set becomes '_', and a name too long is cut, keeping a hash of the whole
// name so that two long names stay apart.
func sanitizeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '/':
			b.WriteString("__")
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		return "tool"
	}
	if len(s) > maxToolName {
		s = s[:maxToolName-9] + "_" + hash8(name)
	}
	return s
}

func hash8(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// toolNames maps the tool names of a request to the names sent to the API and back.
type toolNames struct {
	toAPI   map[string]string // original name → API name
	fromAPI map[string]string // API name → original name
	// wrapped holds the API names of tools whose input schema is not an object: the API
	// only takes object parameters, so their input travels as {"input": ...}.
	wrapped map[string]bool
}

func newToolNames() *toolNames {
	return &toolNames{toAPI: map[string]string{}, fromAPI: map[string]string{}, wrapped: map[string]bool{}}
}

// add registers a tool name and returns its API name, unique within the request: a
// sanitized name already taken by another tool gets a numbered suffix.
func (n *toolNames) add(name string) string {
	if s, ok := n.toAPI[name]; ok {
		return s
	}
	s := sanitizeName(name)
	for i := 2; ; i++ {
		if _, taken := n.fromAPI[s]; !taken {
			break
		}
		suffix := fmt.Sprintf("_%d", i)
		base := sanitizeName(name)
		if len(base)+len(suffix) > maxToolName {
			base = base[:maxToolName-len(suffix)]
		}
		s = base + suffix
	}
	n.toAPI[name] = s
	n.fromAPI[s] = name
	return s
}

// api returns the API name of a tool, registering it if the request did not offer it
// (a tool request in the history of a tool no longer offered).
func (n *toolNames) api(name string) string { return n.add(name) }

// original returns the name a tool had in the request, given the name the API used; a
// name the request did not map (a tool from config.tools) is returned as is.
func (n *toolNames) original(apiName string) string {
	if o, ok := n.fromAPI[apiName]; ok {
		return o
	}
	return apiName
}
