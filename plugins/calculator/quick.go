package main

import (
	"math"
	"math/bits"
)

// quickEval evaluates the common case of an expression without go/parser and
// go/constant, whose parse tree and arbitrary-precision values cost a wasm guest most
// of a call: decimal numbers of up to 18 digits, + - * / % (integer remainders only),
// unary minus and plus, parentheses and spaces, computed exactly as fractions of int64s.
// It reports false for anything else (another literal, a name, an operator it does not
// take, a syntax error, division by zero, a value outgrowing int64): calc then takes
// the general path, which gives the same value, or the error, for every expression.
func quickEval(expr string) (float64, bool) {
	p := quickParser{s: expr}
	v, ok := p.binary(lowestPrec)
	if !ok || p.skipSpace() < len(p.s) {
		return 0, false
	}
	// Both exact as float64s, their quotient is correctly rounded, as go/constant's is.
	if v.num < -1<<53 || v.num > 1<<53 || v.den > 1<<53 {
		return 0, false
	}
	return float64(v.num) / float64(v.den), true
}

// fraction is num/den in lowest terms, den > 0.
type fraction struct{ num, den int64 }

// quickParser reads an expression by precedence climbing (Go's precedences: * / %
// over + -, each left-associative).
type quickParser struct {
	s   string
	pos int
}

const lowestPrec = 1

func (p *quickParser) skipSpace() int {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
	return p.pos
}

// doubled reports whether ++ or -- is next: Go's increment and decrement, which make
// an expression a syntax error, not two signs.
func (p *quickParser) doubled() bool {
	c := p.s[p.pos]
	return (c == '+' || c == '-') && p.pos+1 < len(p.s) && p.s[p.pos+1] == c
}

// binary reads operands joined by operators of precedence prec or higher.
func (p *quickParser) binary(prec int) (fraction, bool) {
	x, ok := p.unary()
	for ok {
		if p.skipSpace() == len(p.s) {
			break
		}
		op := p.s[p.pos]
		opPrec := 0
		switch op {
		case '+', '-':
			opPrec = 1
		case '*', '/', '%':
			opPrec = 2
		}
		if opPrec < prec || p.doubled() {
			break // the caller's to read, or ++ or --, not this path's
		}
		p.pos++
		var y fraction
		if y, ok = p.binary(opPrec + 1); ok {
			x, ok = apply(op, x, y)
		}
	}
	return x, ok
}

func (p *quickParser) unary() (fraction, bool) {
	if p.skipSpace() == len(p.s) {
		return fraction{}, false
	}
	if p.doubled() {
		return fraction{}, false
	}
	switch c := p.s[p.pos]; {
	case c == '+':
		p.pos++
		return p.unary()
	case c == '-':
		p.pos++
		x, ok := p.unary()
		return fraction{-x.num, x.den}, ok && x.num != math.MinInt64
	case c == '(':
		p.pos++
		x, ok := p.binary(lowestPrec)
		if !ok || p.skipSpace() == len(p.s) || p.s[p.pos] != ')' {
			return fraction{}, false
		}
		p.pos++
		return x, true
	case c >= '0' && c <= '9' || c == '.':
		return p.number()
	}
	return fraction{}, false
}

// number reads a decimal literal: digits with at most one '.', as Go writes them
// (not an octal integer such as 017, nor an exponent, a prefix, '_' or an imaginary
// suffix, which the general path reads).
func (p *quickParser) number() (fraction, bool) {
	start := p.pos
	var num, den int64 = 0, 1
	digits, dot := 0, false
	for ; p.pos < len(p.s); p.pos++ {
		c := p.s[p.pos]
		if c == '.' && !dot {
			dot = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		if digits++; digits > 18 {
			return fraction{}, false
		}
		num = num*10 + int64(c-'0')
		if dot {
			den *= 10
		}
	}
	if p.pos < len(p.s) {
		if c := p.s[p.pos]; c == '.' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return fraction{}, false // more of a literal than this path reads
		}
	}
	if digits == 0 || !dot && digits > 1 && p.s[start] == '0' {
		return fraction{}, false // no digits, or an octal integer
	}
	return reduce(num, den), true
}

// apply computes x op y exactly, reporting false when a value outgrows int64s, for a
// division by zero and for the remainder of numbers that are not both integers.
func apply(op byte, x, y fraction) (fraction, bool) {
	switch op {
	case '+', '-':
		if op == '-' {
			if y.num == math.MinInt64 {
				return fraction{}, false
			}
			y.num = -y.num
		}
		a, ok1 := mul(x.num, y.den)
		b, ok2 := mul(y.num, x.den)
		d, ok3 := mul(x.den, y.den)
		n, ok4 := add(a, b)
		return reduce(n, d), ok1 && ok2 && ok3 && ok4
	case '*':
		n, ok1 := mul(x.num, y.num)
		d, ok2 := mul(x.den, y.den)
		return reduce(n, d), ok1 && ok2
	case '/':
		if y.num == 0 {
			return fraction{}, false
		}
		n, ok1 := mul(x.num, y.den)
		d, ok2 := mul(x.den, y.num)
		if d < 0 {
			n, d = -n, -d
		}
		return reduce(n, d), ok1 && ok2
	case '%':
		if x.den != 1 || y.den != 1 || y.num == 0 {
			return fraction{}, false
		}
		return fraction{x.num % y.num, 1}, true
	}
	return fraction{}, false
}

// mul returns a*b and whether it fits an int64 (math.MinInt64 excluded, so that every
// result can be negated).
func mul(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(abs(a), abs(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	if a < 0 != (b < 0) {
		return -int64(lo), true
	}
	return int64(lo), true
}

// add returns a+b and whether it fits an int64 (math.MinInt64 excluded).
func add(a, b int64) (int64, bool) {
	c := a + b
	return c, (b >= 0) == (c >= a) && c != math.MinInt64
}

func abs(a int64) uint64 {
	if a < 0 {
		return uint64(-a)
	}
	return uint64(a)
}

// reduce returns num/den in lowest terms; den is positive.
func reduce(num, den int64) fraction {
	a, b := abs(num), uint64(den)
	for b != 0 {
		a, b = b, a%b
	}
	if a > 1 {
		num, den = num/int64(a), den/int64(a)
	}
	return fraction{num, den}
}
