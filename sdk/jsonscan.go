package sdk

import (
	"bytes"
	"encoding/binary"
)

// scanJSON reports whether b is one JSON value with only whitespace around it, as
// json.Valid does (neither checks that strings are UTF-8). If member is not nil and b
// is an object, scanJSON calls it with each of the object's own members in order, the
// key as written (quoted, escapes and all) and the value, before it knows whether the
// rest of b is valid.
//
// It exists for speed. The bulk of a large input is the bytes inside its strings,
// which scanJSON checks eight at a time, and it finds a call's members in the same
// pass. In a wasm guest, gjson.ValidBytes, a byte at a time, took about 6 ms per MiB,
// most of what receiving a MiB cost, and finding the members with gjson another
// millisecond; this takes under one (BENCHMARKS.md).
func scanJSON(b []byte, member func(key, value []byte)) bool {
	var open []byte // the containers around the value being read, '{' or '['
	// Where the key and the value of the top-level object's member being read start
	// and end: a top member is a value read with one open container, an object.
	var keyStart, keyEnd, valueStart int
	topMember := func() bool { return member != nil && len(open) == 1 && open[0] == '{' }
	// readKey reads a member's key and colon from b[i] on, as memberKey.
	readKey := func(i int) int {
		end, next := memberKey(b, i)
		if topMember() {
			keyStart, keyEnd = i, end
		}
		return next
	}
	i := 0
	for {
		// A value starts at b[i], after whitespace.
		i = skipSpace(b, i)
		if i == len(b) {
			return false
		}
		if topMember() {
			valueStart = i
		}
		switch c := b[i]; c {
		case '{', '[':
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				i++
				break // an empty container, a whole value
			}
			open = append(open, c)
			if c == '{' {
				if i = readKey(i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = stringEnd(b, i+1)
		case 't':
			i = literalEnd(b, i, "true")
		case 'f':
			i = literalEnd(b, i, "false")
		case 'n':
			i = literalEnd(b, i, "null")
		default:
			i = numberEnd(b, i)
		}
		if i < 0 {
			return false
		}
		// A value ended at b[i]: next comes a comma, the end of its container or, at
		// the top, the end of b.
		for {
			if topMember() {
				member(b[keyStart:keyEnd], b[valueStart:i])
			}
			i = skipSpace(b, i)
			if len(open) == 0 {
				return i == len(b)
			}
			if i == len(b) {
				return false
			}
			c := open[len(open)-1]
			if b[i] == ',' {
				i++
				if c == '{' {
					if i = readKey(skipSpace(b, i)); i < 0 {
						return false
					}
				}
				break
			}
			if b[i] != c+2 {
				return false
			}
			open = open[:len(open)-1]
			i++
		}
	}
}

// skipSpace returns the index of the first byte from b[i] on that is not JSON
// whitespace, or len(b).
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// memberKey reads an object member's key and colon from b[i] on and returns the index
// after the key and the index after the colon, or next -1.
func memberKey(b []byte, i int) (keyEnd, next int) {
	if i == len(b) || b[i] != '"' {
		return 0, -1
	}
	if keyEnd = stringEnd(b, i+1); keyEnd < 0 {
		return 0, -1
	}
	if i = skipSpace(b, keyEnd); i == len(b) || b[i] != ':' {
		return 0, -1
	}
	return keyEnd, i + 1
}

// Masks for looking at the eight bytes of a uint64 at once.
const (
	ones = 0x0101010101010101 // 1 in each byte
	tops = 0x8080808080808080 // each byte's top bit
)

// plainWord reports whether none of the eight bytes of w is a quote, a backslash or a
// control character, the bytes that end a string's plain run. A byte x is zero exactly
// when x-1 borrows into its top bit while x's own top bit is clear; (w-n*ones)&^w&tops
// is non-zero when some byte is below n (n <= 0x80).
func plainWord(w uint64) bool {
	quote, backslash := w^('"'*ones), w^('\\'*ones)
	return ((w-' '*ones)&^w|(quote-ones)&^quote|(backslash-ones)&^backslash)&tops == 0
}

// stringEnd reads a string's contents and closing quote from b[i] on and returns the
// index after the quote, or -1.
func stringEnd(b []byte, i int) int {
	for {
		for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i == len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < ' ':
			return -1
		case c != '\\':
			i++
		case i+1 == len(b):
			return -1
		case b[i+1] == 'u':
			if i+6 > len(b) || !hex4(b[i+2:i+6]) {
				return -1
			}
			i += 6
		case bytes.IndexByte([]byte(`"\/bfnrt`), b[i+1]) >= 0:
			i += 2
		default:
			return -1
		}
	}
}

// hex4 reports whether the four bytes of h are hexadecimal digits.
func hex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// literalEnd returns the index after lit at b[i], or -1 if lit is not there.
func literalEnd(b []byte, i int, lit string) int {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return -1
	}
	return i + len(lit)
}

// numberEnd reads a number from b[i] on and returns the index after it, or -1: an
// optional minus, an integer without leading zeros, an optional fraction, an optional
// exponent.
func numberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digitsEnd(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if j := digitsEnd(b, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if j := digitsEnd(b, i); j > i {
			i = j
		} else {
			return -1
		}
	}
	return i
}

// digitsEnd returns the index of the first byte from b[i] on that is not a decimal
// digit, or len(b).
func digitsEnd(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
