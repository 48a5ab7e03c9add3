// An MCP client written with the official TypeScript SDK, run against `terrarium mcp`
// serving a directory of plugins (cmd/terrarium/mcp_test.go):
//
//   node client.mjs stdio <command> [args...]   start the server and speak over stdio
//   node client.mjs http <url>                  reach a streamable HTTP endpoint
//
// It lists the tools, calls the calculator, sends bad input, calls an unknown tool, and
// cancels a long call at its first progress report, then prints one line of JSON
// saying what it saw. The Go test judges it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";

const [mode, ...rest] = process.argv.slice(2);
const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(rest[0]));

const client = new Client({ name: "terrarium-ts-test", version: "1.0.0" });
await client.connect(transport);

const sdkVersion = JSON.parse(
  readFileSync(new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url)),
).version;
const summary = { sdk: sdkVersion, server: client.getServerVersion() };

const { tools } = await client.listTools();
summary.tools = tools.map((t) => t.name).sort();
const calc = tools.find((t) => t.name === "calculator_calc");
summary.calcDescription = calc?.description;
summary.calcInput = calc?.inputSchema;
summary.calcOutput = calc?.outputSchema;

// The result. The SDK checks the structured content against the output schema.
const res = await client.callTool({ name: "calculator_calc", arguments: { expression: "(1.5 + 2) * -3 / 7" } });
summary.calc = { isError: res.isError ?? false, structured: res.structuredContent, text: res.content[0]?.text };

// Bad input: an expression the plugin refuses, and a number the schema refuses.
const errorOf = async (args) => {
  const r = await client.callTool({ name: "calculator_calc", arguments: args });
  return { isError: r.isError ?? false, text: r.content.map((c) => c.text).join("\n"), meta: r._meta };
};
summary.badExpression = await errorOf({ expression: "1 +" });
summary.wrongType = await errorOf({ expression: 42 });

// An unknown tool is a protocol error.
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
  summary.unknownTool = { thrown: false };
} catch (e) {
  summary.unknownTool = { thrown: true, mcpError: e instanceof McpError, code: e.code, message: e.message };
}

// A long call, cancelled at its first progress report.
const controller = new AbortController();
const progress = [];
try {
  await client.callTool({ name: "slow_wait", arguments: { steps: 1000000 } }, undefined, {
    signal: controller.signal,
    timeout: 120000,
    onprogress: (p) => {
      progress.push(p);
      controller.abort("enough");
    },
  });
  summary.cancel = { thrown: false };
} catch (e) {
  summary.cancel = { thrown: true, name: e.name, message: String(e.message ?? e) };
}
summary.cancel.progress = progress[0];
// The slow plugin has one instance: this call can run only once the cancelled one has
// stopped and given it back.
const after = await client.callTool({ name: "slow_wait", arguments: { steps: 1 } }, undefined, { timeout: 60000 });
summary.afterCancel = { isError: after.isError ?? false, structured: after.structuredContent };

await client.close();
console.log(JSON.stringify(summary));
