// Command slow is a test plugin with one tool, wait, that takes as many 10 ms steps as
// asked and reports its progress after each: a long call for MCP clients to watch and
// cancel.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/terrarium-ai/terrarium/sdk"
)

// Input is the input of wait.
type Input struct {
	Steps int `json:"steps" jsonschema:"description=How many 10 ms steps to take,minimum=1,maximum=1000000"`
}

// Output is the output of wait.
type Output struct {
	Steps int `json:"steps" jsonschema:"description=The steps taken"`
}

// Progress is the status reported after each step.
type Progress struct {
	Progress int    `json:"progress"`
	Total    int    `json:"total"`
	Message  string `json:"message"`
}

func main() {
	sdk.Plugin(sdk.Info{Name: "slow", Version: "1.0.0", Description: "Takes its time, reporting progress."})
	sdk.Tool("wait", "Waits for the given number of 10 ms steps, reporting progress after each.", wait)
}

func wait(_ context.Context, in Input) (Output, error) {
	for i := 1; i <= in.Steps; i++ {
		time.Sleep(10 * time.Millisecond)
		if err := sdk.Status(Progress{Progress: i, Total: in.Steps, Message: fmt.Sprintf("step %d of %d", i, in.Steps)}); err != nil {
			return Output{}, err
		}
	}
	return Output{Steps: in.Steps}, nil
}
