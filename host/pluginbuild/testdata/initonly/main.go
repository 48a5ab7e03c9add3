// Command initonly is a test plugin that registers everything in init and has an empty
// main, with a tool that panics and one that interrupts.
package main

import (
	"context"
	"log/slog"

	"github.com/terrarium-ai/terrarium/sdk"
)

func init() {
	sdk.Plugin(sdk.Info{Name: "initonly"})
	sdk.Tool("hello", "Greets.", func(_ context.Context, in struct {
		Name string `json:"name"`
	}) (string, error) {
		sdk.Logger().Info("greeting", slog.String("name", in.Name))
		return "hello " + in.Name, nil
	})
	sdk.Tool("panics", "Panics.", func(context.Context, struct{}) (string, error) {
		var m map[string]int
		m["x"] = 1 // a nil map write: a runtime panic
		return "", nil
	})
	sdk.Tool("approve", "Asks first.", func(ctx context.Context, _ struct{}) (string, error) {
		if md, ok := sdk.Resumed(ctx); ok {
			if md["approved"] == true {
				return "done", nil
			}
			return "cancelled", nil
		}
		return "", sdk.Interrupt(map[string]any{"ask": "Proceed?"})
	})
}

func main() {}
