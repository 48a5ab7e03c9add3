// What apps built on OpenAI's API do next, with the official openai package: answer an
// interrupt and a client tool as tool calls, ask for JSON of a schema, read the usage
// (streamed too), and meet each refusal.
// usage: node openai-apps.mjs <server URL> <agent> <refusals: JSON [{param, value}]>
import OpenAI from "openai";

const [base, model, refusalCases] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused" });
const out = {};

// An interrupt (askUser) is a tool call; the tool message answers it.
{
  const messages = [{ role: "user", content: '/call askUser {"question": "Which colour?"}' }];
  const asked = await client.chat.completions.create({ model, messages });
  const call = asked.choices[0].message.tool_calls[0];
  messages.push(asked.choices[0].message, { role: "tool", tool_call_id: call.id, content: "green" });
  const answered = await client.chat.completions.create({ model, messages });
  out.interrupt = {
    finish: asked.choices[0].finish_reason, name: call.function.name, arguments: JSON.parse(call.function.arguments),
    answer: answered.choices[0].message.content, answerFinish: answered.choices[0].finish_reason,
  };
}

// A client tool: offered beside the agent's own, called, run here, answered.
{
  const tools = [{ type: "function", function: { name: "lookup", description: "Looks a word up.",
    parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } } }];
  const messages = [{ role: "user", content: '/call lookup {"word": "terrarium"}' }];
  // Streamed: the tool call comes as deltas.
  const stream = await client.chat.completions.create({ model, tools, messages, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  const args = JSON.parse(calls[0].function.arguments);
  messages.push({ role: "assistant", content: null, tool_calls: calls },
    { role: "tool", tool_call_id: calls[0].id, content: `a glass garden (${args.word})` });
  const answered = await client.chat.completions.create({ model, tools, messages });
  out.clientTool = { finish, name: calls[0].function.name, arguments: args, answer: answered.choices[0].message.content };
}

// JSON of a schema.
{
  const res = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Where shall we meet?" }],
    response_format: { type: "json_schema", json_schema: { name: "place", strict: true, schema: { type: "object",
      properties: { city: { type: "string" }, day: { type: "integer" } }, required: ["city", "day"], additionalProperties: false } } } });
  out.json = JSON.parse(res.choices[0].message.content);
}

// Usage, whole and streamed: a tool round makes two model calls, summed.
{
  const messages = [{ role: "user", content: '/call calculator/calc {"expression": "6*7"}' }];
  const res = await client.chat.completions.create({ model, messages });
  const stream = await client.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true } });
  let streamed = null;
  for await (const chunk of stream) if (chunk.usage) streamed = { usage: chunk.usage, choices: chunk.choices.length };
  out.usage = { whole: res.usage, streamed };
}

// Each refusal: a 400 naming the parameter.
out.refusals = [];
for (const { param, value } of JSON.parse(refusalCases)) {
  try {
    await client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], [param]: value });
    out.refusals.push({ param, accepted: true });
  } catch (e) {
    out.refusals.push({ param, status: e.status, type: e.type, code: e.code, refused: e.param, error: e.constructor.name });
  }
}
console.log(JSON.stringify(out));
