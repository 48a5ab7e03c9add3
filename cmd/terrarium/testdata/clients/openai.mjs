// Streams a chat completion from a Terrarium agent with the official openai package.
// usage: node openai.mjs <server URL> <agent> <message>
import OpenAI from "openai";

const [base, agent, message] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused" });
const models = await client.models.list();
const stream = await client.chat.completions.create({
  model: agent,
  stream: true,
  messages: [{ role: "user", content: message }],
});
let text = "";
let chunks = 0;
let finish = null;
for await (const chunk of stream) {
  chunks++;
  text += chunk.choices[0]?.delta?.content ?? "";
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
console.log(JSON.stringify({ models: models.data.map((m) => m.id), text, chunks, finish }));
