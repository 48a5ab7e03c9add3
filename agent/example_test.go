package agent_test

import (
	"context"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// Generate runs the tool loop: the model asks for a tool, Generate runs it and sends
// the result back, and the model answers.
func ExampleGenerate() {
	r := agent.NewRegistry()
	agent.DefineTool(r, "weather", "Current temperature in a city.",
		func(ctx context.Context, in struct {
			City string `json:"city"`
		}) (float64, error) {
			return 11.5, nil
		})
	// A scripted stand-in for a real model: first a tool request, then an answer.
	testmodel.Define(r, "demo/scripted").
		Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "weather", Input: map[string]any{"city": "Oslo"}})).
		ReplyText("11.5 °C in Oslo: bring a jacket.")

	resp, err := agent.Generate(context.Background(), r,
		agent.WithModelName("demo/scripted"),
		agent.WithSystem("You are a weather assistant."),
		agent.WithPrompt("What should I wear in Oslo today?"),
		agent.WithToolNames("weather"),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text())
	for _, m := range resp.History() {
		fmt.Println(m.Role)
	}
	// Output:
	// 11.5 °C in Oslo: bring a jacket.
	// system
	// user
	// model
	// tool
	// model
}

// DefineTool infers the tool's schemas from its Go types; Generate checks the model's
// input against them before running the tool.
func ExampleDefineTool() {
	r := agent.NewRegistry()
	type In struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add := agent.DefineTool(r, "add", "Adds two numbers.", func(ctx context.Context, in In) (int, error) {
		return in.A + in.B, nil
	})
	fmt.Println(add.Definition().InputSchema["required"])
	out, _ := add.Run(context.Background(), map[string]any{"a": 2, "b": 3})
	fmt.Println(out)
	// Output:
	// [a b]
	// 5
}

// A client tool is the caller's to run: the model calling it interrupts the call with
// the request, and the caller's answer resumes it.
func ExampleNewClientTool() {
	r := agent.NewRegistry()
	testmodel.Define(r, "demo/scripted").
		Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "location", Ref: "l1"})).
		ReplyText("It is raining in Oslo.")
	location, err := agent.NewClientTool(&abi.ToolDefinition{Name: "location", Description: "Where the user is."})
	if err != nil {
		fmt.Println(err)
		return
	}
	opts := []agent.GenerateOption{agent.WithModelName("demo/scripted"), agent.WithTools(location)}
	resp, err := agent.Generate(context.Background(), r, append(opts, agent.WithPrompt("How is the weather?"))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	req := resp.Message.ToolRequests()[0]
	fmt.Println(resp.FinishReason, req.Name)

	// The caller runs the tool and answers.
	resp, err = agent.Generate(context.Background(), r, append(opts,
		agent.WithMessages(resp.History()...),
		agent.WithToolResponses(abi.NewToolResponsePart(&abi.ToolResponse{Name: req.Name, Ref: req.Ref, Output: "Oslo"})))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text())
	// Output:
	// interrupted location
	// It is raining in Oslo.
}
