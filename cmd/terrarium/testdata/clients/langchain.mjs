// LangChain's ChatOpenAI against a Terrarium agent: a tool bound with bindTools is
// called, run here, and answered with a ToolMessage. usage: node langchain.mjs <server URL> <agent>
import { ChatOpenAI } from "@langchain/openai";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { z } from "zod";

const [base, agent] = process.argv.slice(2);
const lookup = tool(async ({ word }) => `a glass garden (${word})`, {
  name: "lookup",
  description: "Looks a word up.",
  schema: z.object({ word: z.string() }),
});
const model = new ChatOpenAI({ model: agent, apiKey: "unused", configuration: { baseURL: `${base}/v1` } }).bindTools([lookup]);

const messages = [new HumanMessage('/call lookup {"word": "terrarium"}')];
const asked = await model.invoke(messages);
messages.push(asked);
for (const call of asked.tool_calls) {
  messages.push(new ToolMessage({ tool_call_id: call.id, content: await lookup.invoke(call.args) }));
}
const answered = await model.invoke(messages);
const streamed = [];
for await (const chunk of await model.stream([new HumanMessage("Hello from LangChain")])) streamed.push(chunk.content);

console.log(JSON.stringify({
  toolCalls: asked.tool_calls.map((c) => ({ name: c.name, args: c.args })),
  finish: asked.response_metadata.finish_reason,
  answer: answered.content,
  usage: answered.usage_metadata,
  streamed: streamed.join(""),
}));
