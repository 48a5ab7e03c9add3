// The MCP TypeScript SDK against terrarium serve's /mcp, as two tenants and as no one:
// each key lists its tenant's tools, and keeps notes in its MCP session that another
// session does not see. usage: node mcp-tenants.mjs <server URL> <key> <key>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [base, ...keys] = process.argv.slice(2);
const url = new URL("/mcp", base);

async function connect(key) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const client = new Client({ name: "terrarium-mcp-tenants", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  return client;
}

const text = (res) => res.content.map((c) => c.text).join("");
const out = { tenants: [] };
for (const key of keys) {
  const client = await connect(key);
  const { tools } = await client.listTools();
  const seen = { tools: tools.map((t) => t.name).sort() };
  if (seen.tools.includes("scratchpad_note")) {
    await client.callTool({ name: "scratchpad_note", arguments: { text: "first" } });
    await client.callTool({ name: "scratchpad_note", arguments: { text: "second" } });
    seen.notes = (await client.callTool({ name: "scratchpad_notes", arguments: {} })).structuredContent;
    seen.calc = (await client.callTool({ name: "calculator_calc", arguments: { expression: "6 * 7" } })).structuredContent;
    const other = await connect(key);
    seen.otherSession = (await other.callTool({ name: "scratchpad_notes", arguments: {} })).structuredContent;
    await other.close();
  }
  seen.session = client.transport.sessionId;
  await client.close();
  out.tenants.push(seen);
}
try {
  await connect("");
  out.noKey = "connected";
} catch (e) {
  out.noKey = `${e.constructor.name} ${e.code}: ${e.message}`;
}
console.log(JSON.stringify(out));
