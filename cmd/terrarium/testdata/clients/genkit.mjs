// Lists a Terrarium server's actions and runs its agent through Genkit's reflection
// API, with the runtime manager of Genkit's CLI (what `genkit` and its Developer UI
// use). usage: node genkit.mjs <project root holding .genkit/runtimes> <agent>
import { createRequire } from "node:module";

// The package's ES module build misses files; its CommonJS build is what the CLI runs.
const require = createRequire(import.meta.url);
const { RuntimeManager } = require("@genkit-ai/tools-common/manager");

const [projectRoot, agent] = process.argv.slice(2);
const manager = await RuntimeManager.create({ projectRoot, manageHealth: false });
const runtimes = manager.listRuntimes();
if (runtimes.length === 0) throw new Error(`no runtime found in ${projectRoot}/.genkit/runtimes`);
const actions = await manager.listActions();
const chunks = [];
const response = await manager.runAction(
  {
    key: `/session-flow/${agent}`,
    input: { messages: [{ role: "user", content: [{ text: "hello Genkit" }] }] },
  },
  (chunk) => chunks.push(chunk),
);
const model = await manager.runAction({
  key: "/model/offline/echo",
  input: { messages: [{ role: "user", content: [{ text: "direct" }] }] },
});
console.log(JSON.stringify({
  runtime: runtimes[0].genkitVersion,
  keys: Object.keys(actions).sort(),
  types: Object.fromEntries(Object.entries(actions).map(([k, a]) => [k, a.type])),
  result: response.result,
  traceId: response.telemetry?.traceId,
  chunks,
  model: model.result,
}));
process.exit(0);
