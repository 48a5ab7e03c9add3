// Command terrarium is Terrarium's command line, for operators and plugin authors:
//
//	terrarium serve [dir]                         serve the agents of a directory of agent files
//	terrarium chat <agent file | URL>             chat with an agent in the terminal
//	terrarium plugin new <name> [--model|--handler] scaffold a plugin project that conforms
//	terrarium plugin build <dir> [-o file.wasm]   build a Go plugin to .wasm (cached)
//	terrarium plugin call <file.wasm> <name> <json> run one tool, model or handler
//	terrarium plugin inspect <file.wasm | oci://...> [--json]
//	                                              describe a plugin without loading (or pulling) it
//	terrarium plugin test <file.wasm | oci://...> run the conformance suite
//	terrarium plugin push <file.wasm> <registry>/<repo>:<tag>
//	                                              push a plugin to an OCI registry
//	terrarium plugin pull <oci://...> [-o file]   pull a plugin from an OCI registry
//	terrarium plugin keygen <key file>            make an ed25519 key pair for signing
//	terrarium plugin sign <file.wasm> -key <file> sign a plugin (writes <file.wasm>.sig)
//	terrarium plugin verify <file.wasm> --trusted-key <key>
//	                                              check a plugin's signature
//	terrarium mcp <dir> [--http addr]             serve plugins' tools to MCP clients
//
// It adds no logic of its own: it drives deploy, server, mcp, host/pluginbuild,
// host.Inspect, host.LoadDir, host/conformance and host/oci, as a Go program embedding
// Terrarium would.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // the command ran and found problems (a failing check, a build error)
	exitUsage  = 2 // the command line is wrong
)

const usage = `usage: terrarium <command> [arguments]

commands:
  serve [dir]                           serve the agents of the agent files in dir over HTTP, SSE, WebSocket
                                        and an OpenAI-compatible API, with a web chat page
  chat <agent file | URL>               chat with an agent in the terminal, in-process or on a server
  plugin new <name> [--lang go|c|rust] [--tool|--model|--handler]
                                        scaffold a plugin project that builds and conforms as generated
  plugin build <dir> [-o file.wasm]     build a Go plugin (GOOS=wasip1) to .wasm, cached
  plugin call <file.wasm> <name> <json> run one tool, model or handler with grants and a session state
  plugin inspect <file.wasm | oci://...> [--json]
                                        show a plugin's descriptor, imports, exports, size and SHA-256;
                                        of a registry plugin, what its manifest says, without pulling it
  plugin test <file.wasm | oci://...> [flags]
                                        check a plugin against Terrarium's conformance suite
  plugin push <file.wasm> <registry>/<repo>:<tag>
                                        push a plugin to an OCI registry; prints its pinned oci:// reference
  plugin pull <oci://registry/repo:tag[@sha256:...]> [-o file.wasm]
                                        pull a plugin from an OCI registry into the cache
  plugin keygen <key file>              make an ed25519 key pair for signing plugins
  plugin sign <file.wasm> -key <file>   sign a plugin: writes <file.wasm>.sig
  plugin verify <file.wasm> --trusted-key <key>
                                        check a plugin's signature as a host trusting the key would
  mcp <dir> [--http host:port]          serve the tools of a plugin or agent-file directory to MCP clients

Run "terrarium plugin <command> -h" or "terrarium mcp -h" for a command's flags.
`

// run runs a command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "plugin":
		return pluginCommand(ctx, args[1:], stdout, stderr)
	case "serve":
		return serveCommand(ctx, args[1:], stdout, stderr)
	case "chat":
		return chatCommand(ctx, args[1:], os.Stdin, stdout, stderr)
	case "mcp":
		return mcpServe(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "terrarium: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}
