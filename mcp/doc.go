// Package mcp speaks the Model Context Protocol both ways over agent tools, with the
// official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// Serve: NewServer exposes any set of agent.Tools (native Go tools, plugin tools, the
// tools of an MCP server consumed below) to MCP clients, over stdio (Server.Run) or
// streamable HTTP (Server.Handler). Inputs are checked against each tool's schema as
// Generate checks them; a tool's error, bad input included, is a tool result with
// isError set (the MCP specification's tool execution error, which the client's model
// reads and can correct), while an unknown tool is a protocol error. Status reports
// (agent.ReportStatus) become progress notifications when the client asked for them,
// and a client's cancellation cancels the tool's context.
//
// Consume: Connect starts or reaches an MCP server (a command over stdio, or a URL over
// streamable HTTP, with headers that may carry secrets) and offers the tools its
// ServerConfig allows as agent.Tools named "<server>/<tool>", with the server's input
// schemas (which Generate validates, as for native tools), a timeout per call, and
// errors that say which server and tool failed and how: a server that exits, hangs or
// cannot be reached fails the tool call, never the whole turn by hanging it.
//
// The package knows nothing about plugins: the terrarium command wires a directory of
// plugins into a Server, and an agent file's "mcp:" list decodes into ServerConfigs.
package mcp
