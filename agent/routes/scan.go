package routes

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// messageScanner reads the JSON of a structured answer as it streams in and yields the
// text of its top-level "message" string as soon as each piece of it arrives, decoded
// (escapes, surrogate pairs, invalid UTF-8 replaced as encoding/json replaces it).
// Whatever the chunking, the pieces add up to the same text: Respond uses it on whole
// messages, RespondStream on chunks, and their answers agree. Text before the first
// "{" (a code fence) is skipped; only the first "message" counts.
type messageScanner struct {
	started, done bool
	depth         int
	inString      bool
	escape        bool
	hex           []byte // the digits of a \u escape being read
	high          rune   // a high surrogate waiting for its low half, or 0
	pending       []byte // the first bytes of a UTF-8 sequence split by a chunk
	keyNext       bool   // at depth 1, the next string is a key
	readingKey    bool
	key           strings.Builder
	lastKey       string
	inMessage     bool
	out           strings.Builder
}

// Write consumes a piece of the answer and returns the message text it completes.
func (s *messageScanner) Write(text string) string {
	s.out.Reset()
	for i := 0; i < len(text); i++ {
		c := text[i]
		if s.done {
			break
		}
		if !s.started {
			if c == '{' {
				s.started, s.depth, s.keyNext = true, 1, true
			}
			continue
		}
		if s.inString {
			s.stringByte(c)
			continue
		}
		switch c {
		case '"':
			s.inString = true
			s.readingKey = s.depth == 1 && s.keyNext
			s.inMessage = s.depth == 1 && !s.keyNext && s.lastKey == "message"
			s.key.Reset()
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				s.done = true
			}
		case ',':
			if s.depth == 1 {
				s.keyNext = true
			}
		case ':':
			if s.depth == 1 {
				s.keyNext = false
			}
		}
	}
	return s.out.String()
}

// stringByte consumes one byte inside a string.
func (s *messageScanner) stringByte(c byte) {
	switch {
	case s.hex != nil:
		s.hex = append(s.hex, c)
		if len(s.hex) == 4 {
			r := rune(0)
			for _, h := range s.hex {
				r = r<<4 | rune(unhex(h))
			}
			s.hex = nil
			s.unicode(r)
		}
		return
	case s.escape:
		s.escape = false
		if c == 'u' {
			s.hex = make([]byte, 0, 4)
			return
		}
		s.flushHigh()
		switch c {
		case 'n':
			s.emit("\n")
		case 't':
			s.emit("\t")
		case 'r':
			s.emit("\r")
		case 'b':
			s.emit("\b")
		case 'f':
			s.emit("\f")
		default: // " \ /
			s.emit(string(c))
		}
		return
	case c == '\\':
		s.flushPending()
		s.escape = true
		return
	case c == '"':
		s.flushHigh()
		s.flushPending()
		s.inString = false
		if s.readingKey {
			s.lastKey = s.key.String()
			s.readingKey = false
		}
		if s.inMessage {
			s.inMessage, s.done = false, true
		}
		return
	}
	s.flushHigh()
	if c < utf8.RuneSelf && len(s.pending) == 0 {
		s.emit(string(c))
		return
	}
	s.pending = append(s.pending, c)
	for len(s.pending) > 0 && (utf8.FullRune(s.pending) || len(s.pending) >= utf8.UTFMax) {
		r, size := utf8.DecodeRune(s.pending)
		if r == utf8.RuneError && size == 1 {
			s.emit(string(utf8.RuneError))
		} else {
			s.emit(string(s.pending[:size]))
		}
		s.pending = s.pending[size:]
	}
}

// unicode handles the rune of a \u escape, pairing surrogates as encoding/json does.
func (s *messageScanner) unicode(r rune) {
	if s.high != 0 {
		high := s.high
		s.high = 0
		if dec := utf16.DecodeRune(high, r); dec != utf8.RuneError {
			s.emit(string(dec))
			return
		}
		s.emit(string(utf8.RuneError))
	}
	if utf16.IsSurrogate(r) {
		if r < 0xDC00 {
			s.high = r
			return
		}
		r = utf8.RuneError
	}
	s.emit(string(r))
}

// flushHigh writes a high surrogate that no low half followed.
func (s *messageScanner) flushHigh() {
	if s.high != 0 {
		s.high = 0
		s.emit(string(utf8.RuneError))
	}
}

// flushPending writes the bytes of an incomplete UTF-8 sequence, each invalid.
func (s *messageScanner) flushPending() {
	for range s.pending {
		s.emit(string(utf8.RuneError))
	}
	s.pending = s.pending[:0]
}

func (s *messageScanner) emit(text string) {
	switch {
	case s.readingKey:
		s.key.WriteString(text)
	case s.inMessage:
		s.out.WriteString(text)
	}
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

// scanMessage returns the message of a whole answer.
func scanMessage(text string) string {
	var s messageScanner
	return s.Write(text)
}
