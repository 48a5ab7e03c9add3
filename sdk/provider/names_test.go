package provider

import (
	"strings"
	"testing"
)

// gemini is Gemini's rule for function names.
var gemini = NameRule{Extra: ".:", LetterFirst: true}

func TestSanitize(t *testing.T) {
	for _, tc := range []struct {
		rule     NameRule
		in, want string
	}{
		{NameRule{}, "calc", "calc"},
		{NameRule{}, "calculator/calc", "calculator__calc"},
		{NameRule{}, "plugin/tool/with-dash", "plugin__tool__with-dash"},
		{NameRule{}, "a.b c", "a_b_c"},
		{NameRule{}, "a.b:c d", "a_b_c_d"},
		{NameRule{}, "ok-name_1", "ok-name_1"},
		{NameRule{}, "Ünïcode-ok_1", "_n_code-ok_1"},
		{NameRule{}, "1tool", "1tool"},
		{NameRule{}, "", "tool"},
		{gemini, "weather/now", "weather__now"},
		{gemini, "a/b/c", "a__b__c"},
		{gemini, "calc.v2:run-x", "calc.v2:run-x"},
		{gemini, "héllo wörld", "h_llo_w_rld"},
		{gemini, "1tool", "_1tool"},
		{gemini, "-x", "_-x"},
		{gemini, "", "tool"},
		{NameRule{MaxLen: 5}, "abcdefgh", "abcde"},
	} {
		if got := tc.rule.Sanitize(tc.in); got != tc.want {
			t.Errorf("%+v.Sanitize(%q) = %q, want %q", tc.rule, tc.in, got, tc.want)
		}
	}
	// A name too long is cut, a hash of the whole at its end: two long names stay apart.
	for _, rule := range []NameRule{{}, gemini} {
		long1, long2 := strings.Repeat("x", 80)+"a", strings.Repeat("x", 80)+"b"
		s1, s2 := rule.Sanitize(long1), rule.Sanitize(long2)
		if len(s1) != 64 || len(s2) != 64 || s1 == s2 || !strings.HasPrefix(s1, strings.Repeat("x", 55)+"_") {
			t.Errorf("long names: %q %q", s1, s2)
		}
		if s := rule.Sanitize(strings.Repeat("x", 64)); s != strings.Repeat("x", 64) {
			t.Errorf("64 bytes: %q", s)
		}
	}
}

func TestToolNames(t *testing.T) {
	n := NewToolNames(NameRule{})
	a, b, c := n.API("a/b"), n.API("a__b"), n.API("a/b")
	if a != "a__b" || b != "a__b_2" || c != a || n.Original(b) != "a__b" || n.Original(a) != "a/b" || n.Original("web_search") != "web_search" {
		t.Errorf("collision: %q %q %q", a, b, c)
	}
	// Two names sanitized alike stay apart, and each maps back.
	x, y := n.API("a.b"), n.API("a:b")
	if x == y || n.Original(x) != "a.b" || n.Original(y) != "a:b" || n.API("a.b") != x {
		t.Errorf("a.b, a:b: %q, %q", x, y)
	}

	long := strings.Repeat("y", 70)
	n = NewToolNames(gemini, "a/b", "a__b", long, long+"z", "plain")
	for name, want := range map[string]string{"a/b": "a__b", "a__b": "a__b_2", "plain": "plain"} {
		if got := n.API(name); got != want {
			t.Errorf("API(%q) = %q, want %q", name, got, want)
		}
		if back := n.Original(want); back != name {
			t.Errorf("Original(%q) = %q, want %q", want, back, name)
		}
	}
	l1, l2 := n.API(long), n.API(long+"z")
	if len(l1) != 64 || len(l2) != 64 || l1 == l2 || n.Original(l1) != long || n.Original(l2) != long+"z" {
		t.Errorf("long names: %q %q", l1, l2)
	}
	// A name met later (a tool request in the history) is sanitized and mapped too.
	if g := n.API("old/tool"); g != "old__tool" || n.Original(g) != "old/tool" {
		t.Errorf("history name = %q", g)
	}
	// A numbered suffix keeps the name within the limit.
	n = NewToolNames(NameRule{MaxLen: 8}, "abcdefgh", "abcdefgh/")
	if got := n.API("abcdefgh/"); got != "abcdef_2" {
		t.Errorf("suffix = %q", got)
	}
	var none *ToolNames
	if none.Original("x") != "x" {
		t.Error("nil ToolNames")
	}
}
