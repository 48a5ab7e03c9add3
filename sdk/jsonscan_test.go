package sdk

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// scanJSONCases are inputs on each side of json.Valid's line; the strings put their
// special bytes at every offset of an eight-byte word.
func scanJSONCases() []string {
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

func TestScanJSON(t *testing.T) {
	for _, in := range scanJSONCases() {
		if got, want := scanJSON([]byte(in), nil), json.Valid([]byte(in)); got != want {
			t.Errorf("scanJSON(%q) = %v, json.Valid says %v", in, got, want)
		}
	}
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	if !scanJSON([]byte(deep), nil) {
		t.Error("scanJSON refused arrays nested 100000 deep")
	}
}

// FuzzScanJSON holds scanJSON to json.Valid.
func FuzzScanJSON(f *testing.F) {
	for _, in := range scanJSONCases() {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if got, want := scanJSON([]byte(in), nil), json.Valid([]byte(in)); got != want {
			t.Errorf("scanJSON(%q) = %v, json.Valid says %v", in, got, want)
		}
		checkMembers(t, in)
	})
}

// checkMembers checks the members scanJSON reports of a valid object against gjson's.
func checkMembers(t *testing.T, in string) {
	if !json.Valid([]byte(in)) || !gjson.Parse(in).IsObject() {
		return
	}
	var got, want []string
	scanJSON([]byte(in), func(key, value []byte) { got = append(got, string(key), string(value)) })
	gjson.Parse(in).ForEach(func(key, value gjson.Result) bool {
		want = append(want, key.Raw, value.Raw)
		return true
	})
	if !slices.Equal(got, want) {
		t.Errorf("scanJSON(%q) found the members %q, want %q", in, got, want)
	}
}

func TestScanJSONMembers(t *testing.T) {
	for _, in := range append(scanJSONCases(),
		` { "tool" : "a\"b" , "input":{"tool":1,"x":[{}]},"input":[],"t\u006fol":null,"e":{}} `,
		`{"a":{"b":{"c":"d"}},"e":[1,[2]],"f":-1.5e3}`) {
		checkMembers(t, in)
	}
}
