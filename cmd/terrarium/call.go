package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// callResult is what plugin call prints with --json.
type callResult struct {
	Output   any            `json:"output"`
	State    map[string]any `json:"state"`
	Messages []*abi.Message `json:"messages,omitempty"`
}

// pluginCall runs one tool, model or handler of a plugin, in a session made for the
// call, and prints its output (and, when it may touch the session, the state after).
func pluginCall(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin call", flag.ContinueOnError)
	var g grants
	g.register(fs)
	stateJSON := fs.String("session-state", "{}", "the session's custom state before the call, as a JSON object")
	asJSON := fs.Bool("json", false, "print {output, state, messages} as JSON")
	verbose := fs.Bool("v", false, "show the plugin's debug log lines too")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: terrarium plugin call <file.wasm> <name> <json input> [flags] [grants]

Runs the tool, model or handler <name> of the plugin with the input, in a fresh session,
and prints the output; the plugin's log lines go to stderr. A tool's input is checked
against its input schema; a model's input is a GenerateRequest ({"messages": [...]}) or
a string, sent as one user message; a handler's is a HandlerInput ({"point": "turnStart"}).`)
		fs.PrintDefaults()
	}
	pos, ok := parseArgs(fs, args, 3, stderr)
	if !ok {
		return exitUsage
	}
	file, name, input := pos[0], pos[1], []byte(pos[2])
	failed := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "terrarium plugin call: "+format+"\n", args...)
		return exitFailed
	}
	m, err := g.build()
	if err != nil {
		fmt.Fprintf(stderr, "terrarium plugin call: %v\n", err)
		return exitUsage
	}
	var state map[string]any
	if err := json.Unmarshal([]byte(*stateJSON), &state); err != nil || state == nil {
		fmt.Fprintf(stderr, "terrarium plugin call: --session-state: want a JSON object (%v)\n", err)
		return exitUsage
	}
	if !json.Valid(input) {
		fmt.Fprintf(stderr, "terrarium plugin call: the input is not JSON: %s\n", abbreviate(string(input)))
		return exitUsage
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	reg := agent.NewRegistry()
	h, err := host.New(reg, host.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))))
	if err != nil {
		return failed("%v", err)
	}
	defer h.Close(context.Background())
	p, err := h.LoadFile(ctx, file, m)
	if err != nil {
		return failed("%v", err)
	}
	sess := session.New("plugin-call", &session.SessionState[map[string]any]{Custom: state})
	out, err := callAction(agent.NewSessionContext(ctx, sess), reg, p.Name()+"/"+name, input)
	if err != nil {
		return failed("%s: %v", name, err)
	}
	res := callResult{Output: out, State: sess.Custom(), Messages: sess.Messages()}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if *asJSON {
		enc.Encode(res)
		return exitOK
	}
	enc.Encode(res.Output)
	if p.Manifest().State.Allows(plugin.StateRead) {
		st, _ := json.Marshal(res.State)
		fmt.Fprintf(stderr, "state after: %s\n", st)
	}
	return exitOK
}

// callAction runs the registry's tool, model or handler key with a JSON input.
func callAction(ctx context.Context, reg *agent.Registry, key string, input []byte) (any, error) {
	if t, err := reg.LookupTool(key); err == nil {
		var in any
		json.Unmarshal(input, &in) // valid JSON: checked by the caller
		def := t.Definition()
		v, err := schema.Compile(def.InputSchema)
		if err != nil {
			return nil, err
		}
		if err := v.Validate(in); err != nil {
			return nil, fmt.Errorf("the input does not match the tool's input schema: %w", err)
		}
		return t.Run(ctx, in)
	}
	if m, err := reg.LookupModel(key); err == nil {
		var req abi.GenerateRequest
		var text string
		if json.Unmarshal(input, &text) == nil {
			req.Messages = []*abi.Message{abi.NewUserTextMessage(text)}
		} else if err := strictJSON(input, &req); err != nil {
			return nil, fmt.Errorf("want a GenerateRequest or a string: %w", err)
		}
		return m.Generate(ctx, &req, nil)
	}
	if hd, err := reg.LookupHandler(key); err == nil {
		var in abi.HandlerInput
		if err := strictJSON(input, &in); err != nil {
			return nil, fmt.Errorf("want a HandlerInput: %w", err)
		}
		return hd.Handle(ctx, &in)
	}
	return nil, errors.New("the plugin has no tool, model or handler of that name")
}

// strictJSON decodes data into v, refusing fields v does not have.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// abbreviate shortens a string for a message.
func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
