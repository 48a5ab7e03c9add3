// A turn that fails, seen by the official openai package: an APIError with OpenAI's
// status and type for a server failure; the next completion on the same session
// (its header) goes on. usage: node openai-failed.mjs <server URL> <agent> <failing
// message> <message>
import OpenAI from "openai";

const [base, agent, failing, message] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
const ask = (content, headers) =>
  client.chat.completions.create({ model: agent, messages: [{ role: "user", content }] }, { headers });
let failure = null;
try {
  await ask(failing);
} catch (err) {
  if (!(err instanceof OpenAI.APIError)) throw err;
  failure = {
    status: err.status,
    type: err.type,
    code: err.code,
    message: err.message,
    internal: err instanceof OpenAI.InternalServerError,
    session: err.headers?.get?.("x-terrarium-session-id") ?? null,
  };
}
const next = await ask(message, { "X-Terrarium-Session-Id": failure?.session ?? "" });
console.log(JSON.stringify({ failure, text: next.choices[0].message.content }));
