// The AI SDK (ai, with @ai-sdk/openai-compatible) against a Terrarium agent:
// generateText with a tool it runs itself, over as many steps as the tool takes, and
// streamText. usage: node vercel.mjs <server URL> <agent>
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const [base, agent] = process.argv.slice(2);
const terrarium = createOpenAICompatible({ name: "terrarium", baseURL: `${base}/v1`, includeUsage: true });
const model = terrarium.chatModel(agent);

const ran = [];
const generated = await generateText({
  model,
  tools: {
    lookup: tool({
      description: "Looks a word up.",
      inputSchema: z.object({ word: z.string() }),
      execute: async ({ word }) => {
        ran.push(word);
        return `a glass garden (${word})`;
      },
    }),
  },
  stopWhen: stepCountIs(3),
  prompt: '/call lookup {"word": "terrarium"}',
});

const streamed = streamText({ model, prompt: "Hello from the AI SDK" });
let text = "";
let parts = 0;
for await (const delta of streamed.textStream) {
  text += delta;
  parts++;
}

console.log(JSON.stringify({
  text: generated.text,
  steps: generated.steps.map((s) => s.finishReason),
  toolCalls: generated.steps.flatMap((s) => s.toolCalls.map((c) => ({ name: c.toolName, input: c.input }))),
  ran,
  usage: generated.totalUsage,
  streamed: { text, parts, finish: await streamed.finishReason, usage: await streamed.usage },
}));
