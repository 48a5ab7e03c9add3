package main

import (
	"context"
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
