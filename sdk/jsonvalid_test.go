package sdk

import (
	"encoding/json"
	"strings"
	"testing"
)

// validJSONCases are inputs on each side of json.Valid's line; the strings put their
// special bytes at every offset of an eight-byte word.
func validJSONCases() []string {
	cases := []string{
		``, ` `, `null`, ` true `, `false`, `nul`, `truex`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`,
		`1e5`, `1E+5`, `1e-`, `1e`, `-1.25e-10`, `[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `{}`,
		`{ }`, `{"a":1}`, `{"a" : [1, {"b":null}] }`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`,
		`{"a":1 "b":2}`, `[[[[]]]]`, `[[[[]]]`, `[]]`, `{} {}`, `"\u00e9\n\"\\\/\b\f\r\t"`,
		`"\u12"`, `"\u12g4"`, `"\x"`, `"\`, `"a`, "\"\x01\"", "\"\xff\xfe\"", "\t[1]\r\n",
	}
	for _, special := range []string{`"`, `\\`, `\u0041`, "\x1f", `\`} {
		for pad := range 17 {
			s := strings.Repeat("x", pad) + special + strings.Repeat("y", 17-pad)
			cases = append(cases, `"`+s+`"`, `{"k":"`+s+`"}`, `"`+s)
		}
	}
	return cases
}

func TestValidJSON(t *testing.T) {
	for _, in := range validJSONCases() {
		if got, want := validJSON([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("validJSON(%q) = %v, json.Valid says %v", in, got, want)
		}
	}
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	if !validJSON([]byte(deep)) {
		t.Error("validJSON refused arrays nested 100000 deep")
	}
}

// FuzzValidJSON holds validJSON to json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, in := range validJSONCases() {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if got, want := validJSON([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("validJSON(%q) = %v, json.Valid says %v", in, got, want)
		}
	})
}
