package abi

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ExtractJSON finds the JSON value in a model's text output. It accepts, in this order:
// the contents of the first Markdown code fence (```json or bare ```) that holds valid
// JSON; the whole text when it is one JSON value; the first object or array that starts
// somewhere in the text and parses (among the first 32 candidates). It returns ErrNoJSON when none of these is found.
func ExtractJSON(text string) (json.RawMessage, error) {
	rest := text
	for {
		start := strings.Index(rest, "```")
		if start < 0 {
			break
		}
		body := rest[start+3:]
		// The info string (e.g. "json") runs to the end of the fence's first line.
		nl := strings.IndexByte(body, '\n')
		if nl < 0 {
			break
		}
		info := strings.TrimSpace(body[:nl])
		body = body[nl+1:]
		end := strings.Index(body, "```")
		if end < 0 {
			end = len(body) // an unterminated fence still holds the value
		}
		if info == "" || strings.EqualFold(info, "json") {
			if v, ok := oneValue(body[:end]); ok {
				return v, nil
			}
		}
		if end == len(body) {
			break
		}
		rest = body[end+3:]
	}
	if v, ok := oneValue(text); ok {
		return v, nil
	}
	// Each attempt may read to the end of the text, so the number of attempts is bounded
	// to keep pathological input ("[[[[...") from taking quadratic time.
	const maxAttempts = 32
	for i, attempts := 0, 0; i < len(text) && attempts < maxAttempts; i++ {
		if text[i] != '{' && text[i] != '[' {
			continue
		}
		attempts++
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == nil {
			return raw, nil
		}
	}
	return nil, ErrNoJSON
}

// oneValue reports whether s, trimmed, is exactly one JSON value.
func oneValue(s string) (json.RawMessage, bool) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 || !json.Valid(b) {
		return nil, false
	}
	return json.RawMessage(b), true
}
