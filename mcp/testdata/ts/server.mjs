// An MCP server written with the official TypeScript SDK, on stdio, whose tools a
// Terrarium agent uses (mcp/interop_test.go):
//
//   add    adds two numbers (structured output)
//   fail   answers with a tool error
//   crash  kills its own process mid-call, as a crashing server would
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "terrarium-ts-test-server", version: "1.0.0" });

server.registerTool(
  "add",
  {
    description: "Adds two numbers.",
    inputSchema: { a: z.number(), b: z.number() },
    outputSchema: { sum: z.number() },
  },
  async ({ a, b }) => ({
    content: [{ type: "text", text: JSON.stringify({ sum: a + b }) }],
    structuredContent: { sum: a + b },
  }),
);

server.registerTool("fail", { description: "Always fails." }, async () => ({
  content: [{ type: "text", text: "the answer is not available today" }],
  isError: true,
}));

server.registerTool("crash", { description: "Dies mid-call." }, async () => {
  process.kill(process.pid, "SIGKILL");
  return new Promise(() => {});
});

await server.connect(new StdioServerTransport());
