// The Terrarium chat page: plain JavaScript over the server's HTTP API and WebSocket
// (see /openapi.json). No build step, nothing fetched from elsewhere. On a server of
// tenants it asks for an API key and sends it with every request: in the
// Authorization header, and on the WebSocket, where a browser sets no header, as the
// subprotocol bearer.<key>. Never in a URL, which logs and histories keep.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { agents: [], agent: null, sessionId: null, ws: null, running: false, modelEl: null, route: null };

// Where the API key is kept: sessionStorage, for this tab only. Not localStorage,
// which outlives the tab, nor a cookie, which the browser would send by itself.
const keyItem = "terrarium.apiKey";

// Unauthenticated is the error of a request refused for want of a valid API key (401).
class Unauthenticated extends Error {}

async function api(method, path, body) {
  const headers = body ? { "Content-Type": "application/json" } : {};
  const key = sessionStorage.getItem(keyItem);
  if (key) headers.Authorization = `Bearer ${key}`;
  const resp = await fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined });
  if (resp.status === 204) return null;
  const data = await resp.json();
  if (resp.status === 401) throw new Unauthenticated(data.message);
  if (!resp.ok) throw new Error(`${data.code}: ${data.message}`);
  return data;
}

// askKey forgets the API key, which the server refused or was never given, and asks
// for one, saying why; it resolves once one is entered.
function askKey(why) {
  sessionStorage.removeItem(keyItem);
  const dialog = $("#signin");
  $("#signin-error").textContent = why;
  $("#apikey").value = "";
  if (!dialog.open) dialog.showModal();
  return new Promise((resolve) => {
    dialog.oncancel = (e) => e.preventDefault(); // nothing works without a key
    dialog.onsubmit = (e) => {
      e.preventDefault();
      sessionStorage.setItem(keyItem, $("#apikey").value.trim());
      dialog.close();
      resolve();
    };
  });
}

// askKeyAgain asks for a key after a 401: a first one, or another.
function askKeyAgain(e) {
  return askKey(sessionStorage.getItem(keyItem)
    ? `The server refused this API key (${e.message}). Check it and enter it again.`
    : "This server serves tenants: enter your API key.");
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function show(node) {
  const t = $("#transcript");
  t.appendChild(node);
  t.scrollTop = t.scrollHeight;
  return node;
}

function event(text, cls) {
  show(el("div", "event" + (cls ? " " + cls : ""), text));
}

function setStatus(text) {
  $("#status").textContent = text;
}

// Messages of a stored conversation, as the transcript shows them.
function showMessage(m) {
  for (const p of m.content || []) {
    if (p.text !== undefined && (m.role === "user" || m.role === "model")) {
      show(el("div", "msg " + m.role, p.text));
    } else if (p.toolRequest) {
      event(`tool ${p.toolRequest.name} ${JSON.stringify(p.toolRequest.input ?? null)}`);
    } else if (p.toolResponse) {
      event(`tool ${p.toolResponse.name} → ${JSON.stringify(p.toolResponse.output ?? null)}`);
    }
  }
}

// A chunk of the running turn.
function onChunk(c) {
  if (c.error) {
    event(`refused: ${c.error.message}`, "error");
  }
  if (c.chunk) {
    for (const p of c.chunk.content || []) {
      if (p.text !== undefined && c.chunk.role === "model") {
        if (!state.modelEl) state.modelEl = show(el("div", "msg model", ""));
        state.modelEl.textContent += p.text;
      } else if (p.toolRequest && p.metadata && p.metadata.interrupt) {
        showInterrupt(p);
      } else if (p.toolRequest) {
        state.modelEl = null;
        event(`tool ${p.toolRequest.name} ${JSON.stringify(p.toolRequest.input ?? null)}`);
      } else if (p.toolResponse) {
        event(`tool ${p.toolResponse.name} → ${JSON.stringify(p.toolResponse.output ?? null)}`);
      }
    }
  }
  if (c.status !== undefined) showStatus(c.status);
  if (c.artifact) event(`artifact ${c.artifact.name || ""} ${JSON.stringify(c.artifact.parts || [])}`);
  if (c.snapshotCreated) event(`snapshot ${c.snapshotCreated}`);
  if (c.endTurn) {
    state.running = false;
    state.modelEl = null;
    setStatus(`${state.agent.name} · session ${state.sessionId}${routeText()} · turn ended (${c.finishReason || "stop"})`);
    refreshSnapshots();
  }
}

// A status report: a routed agent's says where the conversation stands (route,
// step, the tools its turn ran); anything else shows as it is.
function showStatus(status) {
  if (!status || typeof status !== "object" || !status.route) {
    event(`status ${JSON.stringify(status)}`);
    return;
  }
  for (const call of status.toolCalls || []) {
    event(`tool ${call.toolName} ${JSON.stringify(call.arguments ?? null)} → ${JSON.stringify(call.result ?? null)}`);
  }
  showRoute(status.route, status.routeComplete ? "complete" : status.step);
}

// showRoute shows where a routed conversation stands, in the transcript and beside
// the session.
function showRoute(route, step) {
  state.route = `route ${route} · ${step === "complete" ? "complete" : "step " + step}`;
  event(state.route, "route");
}

// routeText is where a routed conversation stands, for the status line.
function routeText() {
  return state.route ? ` · ${state.route}` : "";
}

// An interrupted tool request: ask the user, answer with a resume.
function showInterrupt(part) {
  const box = show(el("div", "interrupt"));
  const md = part.metadata.interrupt;
  const question = md && typeof md === "object" && md.question ? md.question : JSON.stringify(md);
  box.appendChild(el("div", "", `${part.toolRequest.name} asks: ${question}`));
  const form = el("form");
  const input = el("input");
  input.placeholder = "Your answer";
  const button = el("button", "", "Answer");
  button.type = "submit";
  form.append(input, button);
  box.appendChild(form);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    form.remove();
    box.appendChild(el("div", "muted", `answered: ${input.value}`));
    send({ resume: { respond: [{ toolResponse: { name: part.toolRequest.name, ref: part.toolRequest.ref, output: input.value } }] } });
  });
  input.focus();
}

async function send(turn) {
  if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
    // The server closes a socket left idle: open the session's again.
    if (!state.sessionId) {
      event("not connected", "error");
      return;
    }
    try {
      await connect({ sessionId: state.sessionId });
    } catch (e) {
      event(`not connected: ${e.message}`, "error");
      return;
    }
  }
  state.running = true;
  setStatus(`${state.agent.name} · session ${state.sessionId} · answering…`);
  state.ws.send(JSON.stringify(turn));
}

// connect opens a WebSocket on the agent: a new session, or the one named.
function connect(query) {
  if (state.ws) state.ws.close();
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const protocols = ["terrarium.v1"];
  const key = sessionStorage.getItem(keyItem);
  if (key) protocols.push(`bearer.${key}`);
  const ws = new WebSocket(`${proto}//${location.host}/api/agents/${encodeURIComponent(state.agent.name)}/connect?${new URLSearchParams(query)}`, protocols);
  state.ws = ws;
  setStatus("Connecting…");
  return new Promise((resolve, reject) => {
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.type === "session") {
        state.sessionId = m.sessionId;
        setStatus(`${state.agent.name} · session ${m.sessionId}${routeText()}`);
        refreshSessions();
        refreshSnapshots();
        resolve();
      } else if (m.type === "chunk") {
        onChunk(m.chunk);
      } else if (m.type === "error") {
        state.running = false;
        event(`${m.error.code}: ${m.error.message}`, "error");
      }
    };
    // A refused handshake's status is hidden from the page: ask the API whether the key
    // still holds, which rejects with Unauthenticated if not.
    ws.onerror = () => api("GET", "/api/agents").then(() => reject(new Error("the connection failed")), reject);
    ws.onclose = () => {
      if (state.ws === ws) setStatus(`${state.agent.name} · disconnected`);
    };
  });
}

// The lists are refreshed as turns end and sockets open, which may overlap: each is
// replaced whole, by its latest refresh only.
const refreshes = { sessions: 0, snapshots: 0 };

async function refreshSessions() {
  const seq = ++refreshes.sessions;
  const { sessions } = await api("GET", `/api/agents/${encodeURIComponent(state.agent.name)}/sessions`);
  if (seq !== refreshes.sessions) return;
  $("#sessions").replaceChildren(...sessions.map((s) => {
    const li = el("li");
    li.appendChild(el("code", "", s.sessionId));
    if (s.sessionId !== state.sessionId && state.agent.stateManagement === "server") {
      const b = el("button", "", "open");
      b.type = "button";
      b.onclick = () => openSession(s.sessionId);
      li.appendChild(b);
    }
    return li;
  }));
}

async function refreshSnapshots() {
  const seq = ++refreshes.snapshots;
  let snapshots = [];
  if (state.sessionId && state.agent.stateManagement === "server") {
    try {
      ({ snapshots } = await api("GET", `/api/agents/${encodeURIComponent(state.agent.name)}/sessions/${encodeURIComponent(state.sessionId)}/snapshots`));
    } catch {
      // a new session has none yet
    }
  }
  if (seq !== refreshes.snapshots) return;
  $("#snapshots").replaceChildren(...snapshots.map((s) => {
    const li = el("li");
    li.appendChild(el("code", "", `turn ${s.turnIndex} · ${s.snapshotId.slice(0, 12)}`));
    const b = el("button", "", "resume");
    b.type = "button";
    b.className = "resume";
    b.dataset.snapshot = s.snapshotId;
    b.onclick = () => resumeSnapshot(s.snapshotId);
    li.appendChild(b);
    return li;
  }));
}

// showState replaces the transcript with a stored conversation.
function showState(snapshot) {
  $("#transcript").replaceChildren();
  state.route = null;
  for (const m of snapshot.state.messages || []) showMessage(m);
  event(`resumed from snapshot ${snapshot.snapshotId} (turn ${snapshot.turnIndex})`);
  const custom = snapshot.state.custom;
  if (custom && custom.currentRoute && custom.currentStep) {
    showRoute(custom.currentRoute.id, custom.currentStep.id === "END_ROUTE" ? "complete" : custom.currentStep.id);
  }
}

async function openSession(id) {
  const info = await api("GET", `/api/agents/${encodeURIComponent(state.agent.name)}/sessions/${encodeURIComponent(id)}`);
  if (info.snapshot) showState(info.snapshot);
  await connect({ sessionId: id });
}

async function resumeSnapshot(snapshotId) {
  const name = encodeURIComponent(state.agent.name);
  const snapshot = await api("GET", `/api/agents/${name}/snapshots/${encodeURIComponent(snapshotId)}`);
  if (state.ws) state.ws.close();
  // The session is open on the server: close it, then reopen it from the snapshot.
  try {
    await api("DELETE", `/api/agents/${name}/sessions/${encodeURIComponent(snapshot.sessionId)}`);
  } catch (e) {
    event(e.message, "error");
  }
  showState(snapshot);
  await connect({ snapshotId });
}

async function selectAgent(name) {
  state.agent = state.agents.find((a) => a.name === name);
  const routes = state.agent.routes ? ` Routes: ${state.agent.routes.join(", ")}.` : "";
  $("#agent-description").textContent = (state.agent.description || "") + routes;
  $("#transcript").replaceChildren();
  state.sessionId = null;
  state.route = null;
  await connect({});
}

// start lists the agents, asking for an API key for as long as the server refuses, and
// opens a session on the first.
async function start() {
  for (;;) {
    try {
      ({ agents: state.agents } = await api("GET", "/api/agents"));
      break;
    } catch (e) {
      if (!(e instanceof Unauthenticated)) throw e;
      await askKeyAgain(e);
    }
  }
  const select = $("#agent");
  select.replaceChildren();
  for (const a of state.agents) {
    const o = el("option", "", a.name);
    o.value = a.name;
    select.appendChild(o);
  }
  if (state.agents.length) await selectAgent(state.agents[0].name);
}

function main() {
  const select = $("#agent");
  select.onchange = () => selectAgent(select.value);
  $("#new-session").onclick = () => selectAgent(select.value);
  // A key refused later (revoked, say), by whatever request: ask again, start over.
  window.addEventListener("unhandledrejection", (e) => {
    if (!(e.reason instanceof Unauthenticated)) return;
    e.preventDefault();
    fail(e.reason);
  });
  $("#composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("#input").value.trim();
    if (!text || state.running) return;
    $("#input").value = "";
    state.modelEl = null;
    show(el("div", "msg user", text));
    send({ text });
  });
  return start();
}

// fail shows what went wrong; after a 401, it asks for a key and starts over.
function fail(e) {
  if (e instanceof Unauthenticated) {
    askKeyAgain(e).then(start).catch(fail);
    return;
  }
  setStatus(`error: ${e.message}`);
}

main().catch(fail);
