package mcp_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/mcp"
)

// Serve a tool over streamable HTTP, then use it as an agent would, through Connect.
func Example() {
	ctx := context.Background()

	// Serve: any agent tools (native, plugin, or another MCP server's).
	weather := agent.NewTool("weather/now", "Current temperature in a city.",
		func(_ context.Context, in struct {
			City string `json:"city"`
		}) (map[string]float64, error) {
			return map[string]float64{"celsius": 21.5}, nil
		})
	srv, err := mcp.NewServer([]agent.Tool{weather})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler(nil)) // or srv.Run(ctx, &mcpsdk.StdioTransport{})
	defer ts.Close()

	// Consume: the server's tools become agent tools, named "<server>/<tool>".
	c, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "remote", URL: ts.URL, Allow: []string{"weather_*"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, t := range c.Tools() {
		out, err := t.Run(ctx, map[string]any{"city": "Oslo"})
		fmt.Println(t.Name(), out, err)
	}
	// Output: remote/weather_now map[celsius:21.5] <nil>
}
