// A failed turn and aborts, driven through Genkit's reflection API with the runtime
// manager of Genkit's CLI: a failed turn resolves (no thrown error) with finish reason
// failed and Genkit's error shape; the session goes on from its snapshot; aborting a
// settled or unknown snapshot answers its status, or none.
// usage: node genkit-outcomes.mjs <project root holding .genkit/runtimes> <agent> <failing message> <message>
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { RuntimeManager } = require("@genkit-ai/tools-common/manager");

const [projectRoot, agent, failing, message] = process.argv.slice(2);
const manager = await RuntimeManager.create({ projectRoot, manageHealth: false });
const say = (text) => ({ messages: [{ role: "user", content: [{ text }] }] });
const failed = await manager.runAction({ key: `/session-flow/${agent}`, input: say(failing) });
const next = await manager.runAction({
  key: `/session-flow/${agent}`,
  init: { sessionId: failed.result.sessionId },
  input: say(message),
});
const snapshot = await manager.runAction({
  key: `/snapshot-store/${agent}/getSnapshot`,
  input: { snapshotId: failed.result.snapshotId },
});
const abortSettled = await manager.runAction({
  key: `/snapshot-store/${agent}/abortSnapshot`,
  input: { snapshotId: failed.result.snapshotId },
});
const abortUnknown = await manager.runAction({
  key: `/snapshot-store/${agent}/abortSnapshot`,
  input: { snapshotId: "no-such-snapshot" },
});
console.log(JSON.stringify({
  failed: failed.result,
  next: next.result,
  snapshot: snapshot.result,
  abortSettled: abortSettled.result,
  abortUnknown: abortUnknown.result,
}));
process.exit(0);
