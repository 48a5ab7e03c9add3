// Holds a multi-turn session over a WebSocket, from another process.
// usage: node ws.mjs <ws URL of /api/agents/{agent}/connect> <message>...
import WebSocket from "ws";

const [url, ...messages] = process.argv.slice(2);
const ws = new WebSocket(url);
const turns = [];
let session = null;
let current = "";

function next() {
  if (messages.length === 0) {
    ws.close();
    console.log(JSON.stringify({ session, turns }));
    return;
  }
  current = "";
  ws.send(JSON.stringify({ text: messages.shift() }));
}

ws.on("message", (data) => {
  const m = JSON.parse(data);
  if (m.type === "session") {
    session = m.sessionId;
    next();
  } else if (m.type === "chunk") {
    const c = m.chunk;
    if (c.chunk && c.chunk.role === "model") for (const p of c.chunk.content) current += p.text ?? "";
    if (c.endTurn) {
      turns.push(current);
      next();
    }
  } else {
    console.error(JSON.stringify(m));
    process.exit(1);
  }
});
ws.on("error", (e) => {
  console.error(e.message);
  process.exit(1);
});
