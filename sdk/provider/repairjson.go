package provider

import (
	"encoding/json"
	"strings"
)

// RepairJSON returns the value of JSON text cut off anywhere, as far as it goes, as the
// arguments of a tool call stream in: an open string is closed (an incomplete escape
// dropped), open arrays and objects are closed, and a member or element not yet
// complete (a key without its value, a literal half written, a number cut after its
// point) is left out, so that `{"city": "Lis` gives {"city": "Lis"} and
// `{"a": 1, "b` gives {"a": 1}. It reports false when no value can be made of the
// text (it is empty, or not the start of JSON).
func RepairJSON(fragment string) (any, bool) {
	var v any
	if json.Unmarshal([]byte(fragment), &v) == nil {
		return v, true
	}
	const (
		expectKey = iota
		afterKey
		expectValue
		afterValue
	)
	type frame struct {
		closer byte
		phase  int
	}
	var stack []frame
	closers := func() string {
		b := make([]byte, 0, len(stack))
		for i := len(stack) - 1; i >= 0; i-- {
			b = append(b, stack[i].closer)
		}
		return string(b)
	}
	// safeEnd is where the text last ended a whole value (or opened a container), and
	// safeClose what closes the containers open there.
	safeEnd, safeClose := -1, ""
	valueDone := func(end int) {
		if n := len(stack); n > 0 {
			stack[n-1].phase = afterValue
		}
		safeEnd, safeClose = end, closers()
	}
	var candidates []string
	i := 0
scan:
	for i < len(fragment) {
		c := fragment[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			i++
		case '"':
			isKey := len(stack) > 0 && stack[len(stack)-1].closer == '}' && stack[len(stack)-1].phase == expectKey
			j, closed := stringEnd(fragment, i+1)
			if !closed {
				if !isKey {
					candidates = append(candidates, fragment[:j]+`"`+closers())
				}
				break scan
			}
			if isKey {
				stack[len(stack)-1].phase = afterKey
			} else {
				valueDone(j)
			}
			i = j
		case ':':
			if n := len(stack); n > 0 {
				stack[n-1].phase = expectValue
			}
			i++
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].closer == '}' {
					stack[n-1].phase = expectKey
				} else {
					stack[n-1].phase = expectValue
				}
			}
			i++
		case '{', '[':
			f := frame{closer: '}', phase: expectKey}
			if c == '[' {
				f = frame{closer: ']', phase: expectValue}
			}
			stack = append(stack, f)
			i++
			safeEnd, safeClose = i, closers()
		case '}', ']':
			if len(stack) == 0 {
				break scan
			}
			stack = stack[:len(stack)-1]
			i++
			valueDone(i)
		default: // a number or a literal
			j := i
			for j < len(fragment) && !strings.ContainsRune(" \t\r\n,:]}", rune(fragment[j])) {
				j++
			}
			if j == len(fragment) {
				candidates = append(candidates, fragment+closers())
				break scan
			}
			valueDone(j)
			i = j
		}
	}
	if safeEnd >= 0 {
		candidates = append(candidates, fragment[:safeEnd]+safeClose)
	}
	for _, c := range candidates {
		if json.Unmarshal([]byte(c), &v) == nil {
			return v, true
		}
	}
	return nil, false
}

// stringEnd scans a JSON string whose contents start at i. It returns the index after
// the closing quote and true, or, when the text ends first, the end of the complete
// contents (an incomplete escape left out) and false.
func stringEnd(text string, i int) (int, bool) {
	for i < len(text) {
		switch text[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(text) {
				return i, false
			}
			if text[i+1] == 'u' {
				if i+6 > len(text) {
					return i, false
				}
				i += 6
				continue
			}
			i += 2
		default:
			i++
		}
	}
	return i, false
}
