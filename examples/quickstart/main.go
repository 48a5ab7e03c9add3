// Quickstart: a model that calls a tool and answers with structured output.
//
// It runs offline: the model is the programmable test model, scripted to ask for the
// weather tool and then answer in JSON, so every step of the generate loop is visible.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// Forecast is the structured answer we ask the model for.
type Forecast struct {
	City    string  `json:"city"`
	TempC   float64 `json:"tempC"`
	Summary string  `json:"summary"`
}

type weatherInput struct {
	City string `json:"city" jsonschema:"description=the city to look up"`
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer) error {
	r := agent.NewRegistry()

	// A native Go tool; its input schema is inferred from weatherInput.
	agent.DefineTool(r, "weather", "Current temperature in a city, in Celsius.",
		func(ctx context.Context, in weatherInput) (float64, error) {
			return map[string]float64{"Oslo": -3.5, "Lisbon": 17}[in.City], nil
		})

	// The scripted model: first it asks for the tool, then it answers in JSON.
	model := testmodel.Define(r, "demo/scripted")
	model.Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "weather", Ref: "call-1", Input: map[string]any{"city": "Oslo"}}))
	model.ReplyText("```json\n{\"city\": \"Oslo\", \"tempC\": -3.5, \"summary\": \"Cold: wear a hat.\"}\n```")

	forecast, resp, err := agent.GenerateData[Forecast](ctx, r,
		agent.WithModelName("demo/scripted"),
		agent.WithSystem("You are a weather assistant."),
		agent.WithPrompt("What should I wear in Oslo today?"),
		agent.WithToolNames("weather"),
	)
	if err != nil {
		return err
	}
	for i, req := range model.Requests() {
		fmt.Fprintf(w, "model call %d saw %d messages\n", i+1, len(req.Messages))
	}
	fmt.Fprintf(w, "tool said: %v\n", resp.Request.Messages[3].Content[0].ToolResponse.Output)
	fmt.Fprintf(w, "forecast: %s, %.1f°C, %s\n", forecast.City, forecast.TempC, forecast.Summary)
	return nil
}
