// Command mainpanics is a test plugin whose main panics after registering a tool.
package main

import (
	"context"

	"github.com/terrarium-ai/terrarium/sdk"
)

func main() {
	sdk.Plugin(sdk.Info{Name: "mainpanics"})
	sdk.Tool("t", "A tool.", func(context.Context, struct{}) (string, error) { return "", nil })
	panic("main failed")
}
