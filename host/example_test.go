package host_test

import (
	"context"
	"fmt"
	"time"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// A plugin's tools join the registry under the plugin's name, granted only what the
// manifest allows, and work wherever native tools do.
func ExampleHost_Load() {
	ctx := context.Background()
	wasm, err := pluginbuild.Build(ctx, "../plugins/calculator") // GOOS=wasip1, cached
	if err != nil {
		fmt.Println(err)
		return
	}
	r := agent.NewRegistry()
	h, err := host.New(r)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close(ctx)
	p, err := h.LoadFile(ctx, wasm, host.Manifest{Timeout: host.Duration{Duration: 5 * time.Second}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Keys())
	calc, _ := r.LookupTool("calculator/calc")
	out, err := calc.Run(ctx, map[string]any{"expression": "(1.5 + 2) * 4"})
	fmt.Println(out, err)
	// Output:
	// [/tool/calculator/calc]
	// map[expression:(1.5 + 2) * 4 value:14] <nil>
}
