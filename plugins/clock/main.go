// Command clock is a Terrarium plugin with one tool, now, that tells the current time
// in a time zone (an IANA name such as "Europe/Paris"; UTC by default). The zone
// database is compiled in, so it works without a filesystem. It needs no capabilities.
//
// Build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o clock.wasm .
package main

import (
	"context"
	"strings"
	"time"
	_ "time/tzdata" // the zone database: a plugin has no filesystem

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
)

// Input is the input of now.
type Input struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"description=An IANA time zone name such as Europe/Paris or America/New_York; UTC when empty,example=Europe/Paris"`
}

// Output is the output of now.
type Output struct {
	Time     string `json:"time" jsonschema:"description=The current time in the zone (RFC 3339),format=date-time"`
	Timezone string `json:"timezone" jsonschema:"description=The zone's name"`
	Unix     int64  `json:"unix" jsonschema:"description=Seconds since 1970-01-01 UTC"`
}

func main() {
	sdk.Plugin(sdk.Info{
		Name:        "clock",
		Version:     "1.0.0",
		Description: "Tells the current time in any time zone.",
	})
	sdk.Tool("now", "Returns the current date and time in a time zone (IANA name, UTC by default).", now)
}

func now(_ context.Context, in Input) (Output, error) {
	name := strings.TrimSpace(in.Timezone)
	if name == "" {
		name = "UTC"
	}
	// "Local" is not a zone name, and a plugin's local time is UTC anyway.
	if name == "Local" {
		return Output{}, abi.Errorf(abi.CodeInvalidInput, "unknown time zone %q: want an IANA name such as Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return Output{}, abi.Errorf(abi.CodeInvalidInput, "unknown time zone %q: want an IANA name such as Europe/Paris", name)
	}
	t := time.Now().In(loc)
	return Output{Time: t.Format(time.RFC3339), Timezone: loc.String(), Unix: t.Unix()}, nil
}
