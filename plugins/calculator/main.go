// Command calculator is a Terrarium plugin with one tool, calc, that evaluates
// arithmetic expressions: numbers (decimals included), + - * / %, unary minus and
// parentheses. It is exact until the final conversion to a float64 and needs no
// capabilities.
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o calculator.wasm .
package main

import (
	"context"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"math"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
)

// maxExpression bounds the length of an expression, in bytes.
const maxExpression = 4096

// Input is the input of calc.
type Input struct {
	Expression string `json:"expression" jsonschema:"description=An arithmetic expression: numbers\\, + - * / %\\, unary minus and parentheses. Example: (1.5 + 2) * -3,minLength=1,maxLength=4096,example=(1.5 + 2) * -3"`
}

// Output is the output of calc.
type Output struct {
	Value      float64 `json:"value" jsonschema:"description=The expression's value"`
	Expression string  `json:"expression" jsonschema:"description=The expression evaluated"`
}

func main() {
	sdk.Plugin(sdk.Info{
		Name:        "calculator",
		Version:     "1.0.0",
		Description: "Evaluates arithmetic expressions.",
	})
	sdk.Tool("calc", "Evaluates an arithmetic expression (+ - * / %, parentheses, decimals) and returns its value.", calc)
}

func calc(_ context.Context, in Input) (Output, error) {
	expr := strings.TrimSpace(in.Expression)
	if expr == "" {
		return Output{}, abi.Errorf(abi.CodeInvalidInput, "expression: empty")
	}
	if len(expr) > maxExpression {
		return Output{}, abi.Errorf(abi.CodeInvalidInput, "expression: longer than %d bytes", maxExpression)
	}
	if f, ok := quickEval(expr); ok {
		return Output{Value: f, Expression: expr}, nil
	}
	f, err := evalExpr(expr)
	if err != nil {
		return Output{}, err
	}
	return Output{Value: f, Expression: expr}, nil
}

// evalExpr evaluates any expression, or says what is wrong with it: parsed as Go by
// go/parser, computed exactly by go/constant.
func evalExpr(expr string) (float64, error) {
	tree, err := parser.ParseExpr(expr)
	if err != nil {
		return 0, abi.Errorf(abi.CodeInvalidInput, "expression: %s", parseMessage(err))
	}
	v, err := eval(tree)
	if err != nil {
		return 0, err
	}
	f, _ := constant.Float64Val(v)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, abi.Errorf(abi.CodeInvalidInput, "expression: the result is out of range")
	}
	return f, nil
}

// parseMessage drops go/parser's "1:" line prefix: an expression is one line.
func parseMessage(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "1:"); ok {
		return "at " + rest
	}
	return msg
}

func eval(e ast.Expr) (constant.Value, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT && e.Kind != token.FLOAT {
			return nil, notArithmetic(e)
		}
		v := constant.MakeFromLiteral(e.Value, e.Kind, 0)
		if v.Kind() == constant.Unknown {
			return nil, abi.Errorf(abi.CodeInvalidInput, "expression: invalid number %s", e.Value)
		}
		return v, nil
	case *ast.ParenExpr:
		return eval(e.X)
	case *ast.UnaryExpr:
		if e.Op != token.SUB && e.Op != token.ADD {
			return nil, notArithmetic(e)
		}
		x, err := eval(e.X)
		if err != nil {
			return nil, err
		}
		return constant.UnaryOp(e.Op, x, 0), nil
	case *ast.BinaryExpr:
		x, err := eval(e.X)
		if err != nil {
			return nil, err
		}
		y, err := eval(e.Y)
		if err != nil {
			return nil, err
		}
		switch e.Op {
		case token.ADD, token.SUB, token.MUL:
			return constant.BinaryOp(x, e.Op, y), nil
		case token.QUO:
			if constant.Sign(y) == 0 {
				return nil, abi.Errorf(abi.CodeInvalidInput, "expression: division by zero")
			}
			return constant.BinaryOp(x, token.QUO, y), nil
		case token.REM:
			if constant.Sign(y) == 0 {
				return nil, abi.Errorf(abi.CodeInvalidInput, "expression: remainder of a division by zero")
			}
			xi, yi := constant.ToInt(x), constant.ToInt(y)
			if xi.Kind() == constant.Int && yi.Kind() == constant.Int {
				return constant.BinaryOp(xi, token.REM, yi), nil
			}
			xf, _ := constant.Float64Val(x)
			yf, _ := constant.Float64Val(y)
			return constant.MakeFloat64(math.Mod(xf, yf)), nil
		}
		return nil, notArithmetic(e)
	}
	return nil, notArithmetic(e)
}

func notArithmetic(e ast.Expr) error {
	what := "this"
	switch e := e.(type) {
	case *ast.Ident:
		what = "the name " + e.Name
	case *ast.BasicLit:
		what = "the literal " + e.Value
	case *ast.CallExpr:
		what = "a function call"
	case *ast.UnaryExpr:
		what = "the operator " + e.Op.String()
	case *ast.BinaryExpr:
		what = "the operator " + e.Op.String()
	}
	return abi.Errorf(abi.CodeInvalidInput, "expression: only numbers, + - * / %%, unary minus and parentheses are allowed, not %s", what)
}
