// Plugins: an agent whose model, tools and handler are WebAssembly plugins.
//
// It builds the first-party plugins from ../../plugins (cached after the first run),
// loads them into a host with the grants each needs, and runs a DefineAgent turn by
// turn: the offline model (a deterministic, rule-based stand-in for a language model)
// answers and calls the calculator when asked with "/call", the profile handler picks
// the user's name and city out of their messages into the session state, and the
// scratchpad tool keeps notes there.
//
//	go run ./examples/plugins
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// State is the session's state: plugins read and write it through host functions.
type State struct {
	Profile    map[string]any `json:"profile,omitempty"`
	Scratchpad []string       `json:"scratchpad,omitempty"`
}

func main() {
	if err := run(context.Background(), os.Stdout, pluginsDir()); err != nil {
		fmt.Fprintln(os.Stderr, "plugins:", err)
		os.Exit(1)
	}
}

func pluginsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "plugins")
}

func run(ctx context.Context, w io.Writer, plugins string) error {
	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	defer h.Close(ctx)

	grants := map[string]host.Manifest{
		"offline":    {},
		"calculator": {},
		"profile":    {State: plugin.StateWrite},
		"scratchpad": {State: plugin.StateWrite},
	}
	for _, name := range []string{"offline", "calculator", "profile", "scratchpad"} {
		path, err := pluginbuild.Build(ctx, filepath.Join(plugins, name))
		if err != nil {
			return err
		}
		p, err := h.LoadFile(ctx, path, grants[name])
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "loaded %s %s: %v\n", p.Name(), p.Descriptor().Version, p.Keys())
	}
	profile, err := r.LookupHandler("profile/extract")
	if err != nil {
		return err
	}
	assistant := session.DefineAgent[map[string]any, State](r, "assistant",
		session.WithGenerateOpts[State](
			agent.WithModelName("offline/echo"),
			agent.WithToolNames("calculator/calc", "scratchpad/note"),
		),
		session.WithHandlers[State](profile),
	)
	conn, err := assistant.StreamBidi(ctx)
	if err != nil {
		return err
	}
	for _, text := range []string{
		"Hi, my name is Ada and I live in Lisbon.",
		`/call calculator/calc {"expression": "19.99 * 3"}`,
		`/call scratchpad/note {"text": "three books"}`,
	} {
		fmt.Fprintf(w, "> %s\n", text)
		if err := conn.SendText(text); err != nil {
			return err
		}
		for chunk, err := range conn.Receive() {
			if err != nil {
				return err
			}
			switch {
			case chunk.Status != nil:
				fmt.Fprintf(w, "  [status %v]\n", chunk.Status)
			case chunk.Chunk != nil && chunk.Chunk.Role == abi.RoleModel && chunk.Chunk.Text() != "":
				fmt.Fprint(w, chunk.Chunk.Text())
			case chunk.EndTurn:
				fmt.Fprintln(w)
			}
		}
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "profile: %v\nscratchpad: %v\n", out.State.Custom.Profile, out.State.Custom.Scratchpad)
	return nil
}
