package main

import "encoding/json"

// partialJSON parses the beginning of a JSON text, as tool call arguments stream in:
// it closes what is open (strings, arrays, objects) and drops a trailing piece that
// cannot be completed (a half-written key, a number cut after its point), so that
// `{"city": "Lis` gives {"city": "Lis"} and `{"a": 1, "b` gives {"a": 1}. It returns
// nil when nothing parses yet.
func partialJSON(s string) any {
	if v, ok := parse(s); ok {
		return v
	}
	var stack []byte   // the open '{' and '['
	inString := false  // inside a string
	isKey := false     // the string being read is an object key
	expectKey := false // the next string in the current object is a key
	escaped := false   // the previous character was a backslash in a string
	safe, safeStack := -1, []byte(nil)
	mark := func(i int) { safe, safeStack = i, append(safeStack[:0], stack...) }
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
				if !isKey {
					mark(i + 1)
				}
			}
			continue
		}
		switch c {
		case '"':
			inString, isKey = true, expectKey
			expectKey = false
		case '{':
			stack = append(stack, c)
			expectKey = true
			mark(i + 1)
		case '[':
			stack = append(stack, c)
			mark(i + 1)
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
			mark(i + 1)
		case ',':
			mark(i)
			expectKey = len(stack) > 0 && stack[len(stack)-1] == '{'
		}
	}
	if inString && !isKey {
		// A string value cut short: close it, dropping a half-written escape.
		for cut := len(s); cut >= 0 && cut >= len(s)-6; cut-- {
			if v, ok := parse(s[:cut] + `"` + closers(stack)); ok {
				return v
			}
		}
	} else if !inString {
		if v, ok := parse(s + closers(stack)); ok {
			return v
		}
	}
	if safe >= 0 {
		if v, ok := parse(s[:safe] + closers(safeStack)); ok {
			return v
		}
	}
	return nil
}

// closers returns the text that closes the open arrays and objects of stack.
func closers(stack []byte) string {
	b := make([]byte, 0, len(stack))
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i] == '{' {
			b = append(b, '}')
		} else {
			b = append(b, ']')
		}
	}
	return string(b)
}

func parse(s string) (any, bool) {
	var v any
	if len(s) == 0 || json.Unmarshal([]byte(s), &v) != nil {
		return nil, false
	}
	return v, true
}
