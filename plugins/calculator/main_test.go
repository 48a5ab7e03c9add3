package main

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
)

func TestCalc(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want float64
	}{
		{"1+2*3", 7},
		{"(1+2)*3", 9},
		{"-(-2.5)", 2.5},
		{"7/2", 3.5},
		{"7 % 3", 1},
		{"-7 % 3", -1},
		{"7.5 % 2", 1.5},
		{"0.1+0.2", 0.3},
		{"1e3 / 8", 125},
		{"+4", 4},
	} {
		out, err := calc(context.Background(), Input{Expression: tc.expr})
		if err != nil || out.Value != tc.want {
			t.Errorf("calc(%q) = %v, %v; want %v", tc.expr, out.Value, err, tc.want)
		}
	}
	for _, tc := range []struct{ expr, want string }{
		{"", "empty"},
		{"1/0", "division by zero"},
		{"1 % (3-3)", "division by zero"},
		{"x + 1", "the name x"},
		{`"a" + "b"`, `the literal "a"`},
		{"len(1)", "function call"},
		{"1 << 2", "operator <<"},
		{"!1", "operator !"},
		{"1 +", "at "},
		{"2i", "the literal 2i"},
		{strings.Repeat("1+", 3000) + "1", "longer than"},
	} {
		_, err := calc(context.Background(), Input{Expression: tc.expr})
		if e := abi.AsError(err); err == nil || e.Code != abi.CodeInvalidInput || !strings.Contains(e.Message, tc.want) {
			t.Errorf("calc(%.20q) error = %v, want invalid_input containing %q", tc.expr, err, tc.want)
		}
	}
}

// quickCases are expressions for quickEval: the ones it must take (want true), and
// ones it must leave to evalExpr, whatever their value or error there.
var quickCases = []struct {
	expr  string
	quick bool
}{
	{"(1.5 + 2) * -3 / 7", true}, {"1+2*3", true}, {"(1+2)*3", true}, {"-(-2.5)", true},
	{"7/2", true}, {"7 % 3", true}, {"-7 % 3", true}, {"0.1+0.2", true}, {"+4", true},
	{"1 - 2 - 3", true}, {"24 / 4 / 3", true}, {"8 % 5 % 2", true}, {".5 + 5.", true},
	{"00.5", true}, {"0", true}, {"123456789012345678 * 1", false}, {"1 / 3", true},
	{"7.5 % 2", false}, {"1e3 / 8", false}, {"0x10", false}, {"017", false}, {"08", false},
	{"1_000", false}, {"2i", false}, {"1/0", false}, {"1 % 0", false}, {"--1", false},
	{"1--1", false}, {"1++1", false}, {"- -1", true}, {"1 +", false}, {"(1", false},
	{"1)", false}, {"1 2", false}, {"2(3)", false}, {"x + 1", false}, {"1 << 2", false},
	{"1 /* c */ + 2", false}, {"1 // c", false}, {"1.2.3", false}, {"1\n+2", false},
	{"9223372036854775807 + 1", false}, {"1234567890123456789", false},
	{"999999999999999999 * 999999999999999999", false}, {"0.00000000000000001 / 3", false}, {"0.000001 / 3", true}, {"0.000000000000000001", false},
	{"99999999999999999 / 7 * 3", false}, {"9007199254740993", false},
}

// TestQuickEvalAgrees: quickEval takes the common expressions, and its value is
// evalExpr's, bit for bit.
func TestQuickEvalAgrees(t *testing.T) {
	for _, tc := range quickCases {
		got, ok := quickEval(tc.expr)
		if ok != tc.quick {
			t.Errorf("quickEval(%q) took it: %v, want %v", tc.expr, ok, tc.quick)
		}
		if !ok {
			continue
		}
		want, err := evalExpr(tc.expr)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("quickEval(%q) = %v, evalExpr = %v, %v", tc.expr, got, want, err)
		}
	}
}

// FuzzQuickEval: whatever quickEval takes, evalExpr takes too, with the same value.
func FuzzQuickEval(f *testing.F) {
	for _, tc := range quickCases {
		f.Add(tc.expr)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		got, ok := quickEval(expr)
		if !ok {
			return
		}
		want, err := evalExpr(expr)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("quickEval(%q) = %v, evalExpr = %v, %v", expr, got, want, err)
		}
	})
}
