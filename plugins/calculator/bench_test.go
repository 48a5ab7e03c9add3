package main

import (
	"context"
	"testing"
)

// BenchmarkCalc is the calculator's own work for the guest benchmarks' expression,
// natively: through quickEval, and through go/parser and go/constant (evalExpr), which
// it took for every expression before.
func BenchmarkCalc(b *testing.B) {
	const expr = "(1.5 + 2) * -3 / 7"
	b.Run("quick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := calc(context.Background(), Input{Expression: expr}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := evalExpr(expr); err != nil {
				b.Fatal(err)
			}
		}
	})
}
