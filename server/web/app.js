// The Terrarium chat page: plain JavaScript over the server's HTTP API and WebSocket
// (see /openapi.json). No build step, nothing fetched from elsewhere. On a server of
// tenants it asks for an API key and sends it with every request: in the
// Authorization header, and on the WebSocket, where a browser sets no header, as the
// subprotocol bearer.<key>. Never in a URL, which logs and histories keep.
//
// A new session is opened with its first message, so that a page load stores nothing.
// A failed turn shows under the message that caused it, and the session goes on. A
// socket lost while the page is open is opened again by itself, on the same session
// (docs/serving.md, "Draining a host"): a turn it lost is settled from the session's
// snapshots, shown if it was kept, sent again if not.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = {
  agents: [], agent: null,
  sessionId: null, // null until the first message of a new session opens it
  head: null, // the snapshot the session continues: the last one streamed or resumed from
  ws: null, running: false, modelEl: null, route: null,
  turnEl: null, // the user message of the running turn
  inflight: null, // the running turn's input, until its end is seen
  resent: 0, // how many times the running turn was sent again
  reconnecting: null, // the promise of a reconnection under way
};

// Reconnecting, as terrarium chat does: reconnectTries tries, waits growing from about
// a second to maxWait, each drawn between half and all of its length.
const reconnectTries = 8;
const maxWait = 8000;
const resendTries = 2;

// Where the API key is kept: sessionStorage, for this tab only. Not localStorage,
// which outlives the tab, nor a cookie, which the browser would send by itself.
const keyItem = "terrarium.apiKey";

// ApiError is a request the server refused: its status and code.
class ApiError extends Error {
  constructor(status, data) {
    super(`${data.code}: ${data.message}`);
    this.status = status;
    this.code = data.code;
  }
}

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
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

// agentPath is the API path of the current agent, with more segments.
function agentPath(...parts) {
  return [`/api/agents/${encodeURIComponent(state.agent.name)}`, ...parts.map(encodeURIComponent)].join("/");
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
  return show(el("div", "event" + (cls ? " " + cls : ""), text));
}

function setStatus(text, warn) {
  const s = $("#status");
  s.textContent = text;
  s.classList.toggle("warn", !!warn);
}

// where is the status line's account of the session.
function where() {
  const session = state.sessionId ? `session ${state.sessionId}` : "new session";
  return `${state.agent.name} · ${session}${state.route ? ` · ${state.route}` : ""}`;
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

// describe says what a refused or failed turn's error says: its code and message, and
// the model, tool or handler that failed.
function describe(err) {
  if (!err) return "no reason given";
  const who = err.tool ? `tool ${err.tool}` : err.model ? `model ${err.model}` : err.handler ? `handler ${err.handler}` : "";
  return `${err.code ? err.code + ": " : ""}${err.message || ""}${who ? ` (${who})` : ""}`;
}

// showFailure shows a failed turn under the message that caused it: the session goes
// on from where it was before that message.
function showFailure(err) {
  if (state.turnEl) state.turnEl.classList.add("failed");
  const box = show(el("div", "failure"));
  box.appendChild(el("strong", "", "This turn failed. "));
  box.appendChild(el("span", "", "The session goes on from before this message: send another, or this one again."));
  box.appendChild(el("div", "detail", describe(err)));
}

// A chunk of the running turn.
function onChunk(c) {
  if (c.error && !c.endTurn) {
    state.modelEl = null;
    event(`refused: ${describe(c.error)}`, "error");
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
  if (c.snapshotCreated) {
    state.head = c.snapshotCreated;
    event(`snapshot ${c.snapshotCreated}`);
  }
  if (c.endTurn) {
    const failed = c.finishReason === "failed" || !!c.error;
    if (failed) showFailure(c.error);
    turnEnded();
    setStatus(`${where()} · turn ${failed ? "failed" : `ended (${c.finishReason || "stop"})`}`);
    background(refreshSnapshots());
    background(refreshSessions());
  }
}

// turnEnded forgets the running turn.
function turnEnded() {
  state.running = false;
  state.modelEl = null;
  state.inflight = null;
  state.resent = 0;
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
    state.turnEl = box;
    send({ resume: { respond: [{ toolResponse: { name: part.toolRequest.name, ref: part.toolRequest.ref, output: input.value } }] } }).catch(fail);
  });
  input.focus();
}

// send sends a turn, opening the session's socket first if it has none: a new
// session's first message opens it.
async function send(turn) {
  state.running = true;
  state.modelEl = null;
  try {
    if (!connected() && !(await reconnect(false))) {
      event("not sent: not connected", "error");
      turnEnded();
      return;
    }
  } catch (e) {
    turnEnded();
    throw e;
  }
  state.inflight = turn;
  state.resent = 0;
  setStatus(`${where()} · answering…`);
  state.ws.send(JSON.stringify(turn));
}

// background runs a request whose failure only leaves a list as it was; a refused key
// is asked for again.
function background(p) {
  p.catch((e) => {
    if (e instanceof Unauthenticated) fail(e);
  });
}

// connected reports whether the socket is open.
function connected() {
  return state.ws && state.ws.readyState === WebSocket.OPEN && state.ws.opened;
}

// closeSocket closes the socket on purpose: no reconnection follows.
function closeSocket() {
  if (!state.ws) return;
  state.ws.deliberate = true;
  state.ws.close();
  state.ws = null;
}

// connect opens a WebSocket on the agent: a new session, or the one named (query:
// sessionId, snapshotId). It resolves once the server opened the session.
function connect(query) {
  closeSocket();
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const protocols = ["terrarium.v1"];
  const key = sessionStorage.getItem(keyItem);
  if (key) protocols.push(`bearer.${key}`);
  const ws = new WebSocket(`${proto}//${location.host}${agentPath("connect")}?${new URLSearchParams(query)}`, protocols);
  state.ws = ws;
  setStatus("Connecting…");
  return new Promise((resolve, reject) => {
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.type === "session") {
        ws.opened = true;
        state.sessionId = m.sessionId;
        setStatus(where());
        background(refreshSessions());
        resolve();
      } else if (m.type === "chunk") {
        onChunk(m.chunk);
      } else if (m.type === "detached") {
        event(`the turn goes on in the background: snapshot ${m.snapshotId}`);
        turnEnded();
      } else if (m.type === "error" && m.error.code === "shutting_down") {
        // The server drains: the turn did not start; the socket closes next, and the
        // turn is sent again once reconnected.
        event("the server is restarting: the message will be sent again", "link");
      } else if (m.type === "error") {
        event(describe(m.error), "error");
        if (state.inflight) {
          if (state.turnEl) state.turnEl.classList.add("failed");
          turnEnded();
          setStatus(where());
        }
      }
    };
    ws.onclose = (e) => {
      if (!ws.opened) {
        // A refused handshake's status is hidden from the page: ask the API whether
        // the key still holds, which rejects with Unauthenticated if not.
        api("GET", "/api/agents").then(() => reject(new Error("the connection failed")), reject);
        return;
      }
      if (ws.deliberate || state.ws !== ws) return;
      state.ws = null;
      dropped(e.code, e.reason);
    };
  });
}

// dropped handles a socket the page did not close: at once when the server is
// restarting or the connection broke, with the next message when the server closed
// it otherwise (idle, say).
function dropped(code, reason) {
  const why = `${code}${reason ? " " + reason : ""}`;
  const now = [1006, 1011, 1012, 1013, 1014].includes(code) || state.inflight;
  if (!now) {
    event(`the connection was closed (${why}): your next message reconnects`, "link");
    setStatus(`${where()} · not connected`);
    return;
  }
  event(`the connection was lost (${why}): reconnecting`, "link");
  reconnect(true).catch(fail);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// reconnect opens the session's socket again (or a new session's), with bounded
// tries; one reconnection at a time. wait asks for a first wait of up to a second.
function reconnect(wait) {
  if (!state.reconnecting) {
    state.reconnecting = reconnectTrying(wait).finally(() => {
      state.reconnecting = null;
    });
  }
  return state.reconnecting;
}

async function reconnectTrying(wait) {
  const agent = state.agent;
  for (let n = 0; n < reconnectTries; n++) {
    if (n > 0 || wait) {
      const d = Math.min(1000 * 2 ** n, maxWait);
      const ms = n === 0 ? Math.random() * 1000 : d / 2 + (Math.random() * d) / 2;
      setStatus(`${where()} · reconnecting${n > 0 ? ` in ${(ms / 1000).toFixed(1)} s (try ${n + 1} of ${reconnectTries})` : ""}…`, true);
      await sleep(ms);
    }
    if (state.agent !== agent) return false; // another agent was chosen meanwhile
    try {
      await reopen();
      if (n > 0 || wait) event(`reconnected: session ${state.sessionId}`, "link");
      if (state.inflight) resend();
      return true;
    } catch (e) {
      if (e instanceof Unauthenticated) throw e;
      if (e instanceof ApiError && e.status < 500) {
        event(`could not reconnect: ${e.message}`, "error");
        break;
      }
    }
  }
  setStatus(`${where()} · not connected: your next message tries again`, true);
  return false;
}

// reopen connects to the session where it stands: its latest snapshot, or the older
// one it was resumed from before a turn continued it. A turn that ended while the
// socket was down shows in the latest snapshot: the transcript reloads from it.
async function reopen() {
  if (!state.sessionId) return connect({});
  let latest = null;
  try {
    ({ snapshot: latest } = await api("GET", agentPath("sessions", state.sessionId)));
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw e;
  }
  const query = { sessionId: state.sessionId };
  if (latest && state.head && latest.snapshotId !== state.head) {
    if (latest.parentId === state.head) {
      showState(latest, "the turn ended while the connection was down");
      turnEnded();
      background(refreshSnapshots());
    } else {
      // Resumed from an older snapshot, and no turn continued it yet: from it again.
      await api("DELETE", agentPath("sessions", state.sessionId)).catch(() => {});
      query.snapshotId = state.head;
    }
  }
  await connect(query);
}

// resend sends the running turn again, whose end was lost with the socket and which
// the session's snapshots show did not end.
function resend() {
  if (state.resent >= resendTries) {
    event(`not sent again after ${resendTries} tries: send it again if you wish`, "error");
    turnEnded();
    setStatus(where());
    return;
  }
  state.resent++;
  event("sending it again", "link");
  state.running = true;
  setStatus(`${where()} · answering…`);
  state.ws.send(JSON.stringify(state.inflight));
}

// ago says how long ago a time was, roughly.
function ago(iso) {
  if (!iso) return "now";
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

// The lists are refreshed as turns end and sockets open, which may overlap: each is
// replaced whole, by its latest refresh only.
const refreshes = { sessions: 0, snapshots: 0 };

async function refreshSessions() {
  const seq = ++refreshes.sessions;
  const { sessions } = await api("GET", agentPath("sessions"));
  if (seq !== refreshes.sessions) return;
  const list = $("#sessions");
  list.replaceChildren();
  for (const s of sessions) {
    const li = el("li", s.sessionId === state.sessionId ? "current" : "");
    const b = el("button", "session");
    b.type = "button";
    b.title = `session ${s.sessionId}${s.updatedAt ? `, last used ${new Date(s.updatedAt).toLocaleString()}` : ""}`;
    b.append(el("span", "title", s.title || (s.sessionId === state.sessionId ? "this session" : "(no message yet)")), el("span", "when", ago(s.updatedAt)));
    if (s.sessionId !== state.sessionId && state.agent.stateManagement === "server") {
      b.onclick = () => openSession(s.sessionId).catch(fail);
    } else {
      b.disabled = s.sessionId !== state.sessionId;
    }
    li.appendChild(b);
    list.appendChild(li);
  }
  if (!sessions.length) list.appendChild(el("li", "empty", "none yet"));
}

async function refreshSnapshots() {
  const seq = ++refreshes.snapshots;
  const list = $("#snapshots");
  // A new session has none until its first turn ends: asking would be a 404.
  if (!state.sessionId || !state.head || state.agent.stateManagement !== "server") {
    list.replaceChildren();
    return;
  }
  const { snapshots } = await api("GET", agentPath("sessions", state.sessionId, "snapshots"));
  if (seq !== refreshes.snapshots) return;
  list.replaceChildren();
  for (const s of snapshots) {
    const li = el("li", s.status === "failed" ? "failed" : "");
    const failed = s.status && s.status !== "completed" ? ` · ${s.status}` : "";
    li.appendChild(el("code", "", `turn ${s.turnIndex} · ${s.snapshotId.slice(0, 8)}${failed}`));
    const b = el("button", "resume", "resume");
    b.type = "button";
    b.dataset.snapshot = s.snapshotId;
    b.onclick = () => resumeSnapshot(s.snapshotId).catch(fail);
    li.appendChild(b);
    list.appendChild(li);
  }
}

// showState replaces the transcript with a stored conversation.
function showState(snapshot, why) {
  $("#transcript").replaceChildren();
  state.route = null;
  state.turnEl = null;
  for (const m of snapshot.state.messages || []) showMessage(m);
  state.head = snapshot.snapshotId;
  event(`${why || "resumed"} from snapshot ${snapshot.snapshotId} (turn ${snapshot.turnIndex})`);
  if (snapshot.status === "failed") showFailure(snapshot.error);
  const custom = snapshot.state.custom;
  if (custom && custom.currentRoute && custom.currentStep) {
    showRoute(custom.currentRoute.id, custom.currentStep.id === "END_ROUTE" ? "complete" : custom.currentStep.id);
  }
}

async function openSession(id) {
  closeNav();
  const info = await api("GET", agentPath("sessions", id));
  turnEnded();
  $("#transcript").replaceChildren();
  state.sessionId = id;
  state.head = null;
  state.route = null;
  if (info.snapshot) showState(info.snapshot, "opened");
  await connect({ sessionId: id });
  background(refreshSnapshots());
}

// resumeSnapshot continues from a snapshot, by its ID or a unique prefix of it. The
// snapshot is found first, so that a wrong ID leaves the session as it was.
async function resumeSnapshot(id) {
  closeNav();
  let snapshot;
  try {
    snapshot = await api("GET", agentPath("snapshots", id));
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    event(`cannot resume ${id}: ${e.message}`, "error");
    return false;
  }
  closeSocket();
  // The session may be open on the server: close it, then reopen it from the snapshot.
  await api("DELETE", agentPath("sessions", snapshot.sessionId)).catch(() => {});
  turnEnded();
  state.sessionId = snapshot.sessionId;
  showState(snapshot);
  await connect({ snapshotId: snapshot.snapshotId });
  background(refreshSnapshots());
  return true;
}

// newSession starts over with a new session, opened by its first message.
function newSession() {
  closeNav();
  closeSocket();
  turnEnded();
  $("#transcript").replaceChildren();
  state.sessionId = null;
  state.head = null;
  state.route = null;
  state.turnEl = null;
  setStatus(where());
  $("#snapshots").replaceChildren();
  return refreshSessions();
}

async function selectAgent(name) {
  state.agent = state.agents.find((a) => a.name === name);
  const routes = state.agent.routes ? ` Routes: ${state.agent.routes.join(", ")}.` : "";
  $("#agent-description").textContent = (state.agent.description || "") + routes;
  await newSession();
}

// start lists the agents, asking for an API key for as long as the server refuses, and
// picks the first, without opening a session: its first message will.
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

// The sidebar folds away on a narrow screen, behind the menu button.
function closeNav() {
  document.body.classList.remove("nav-open");
  $("#menu").setAttribute("aria-expanded", "false");
}

function main() {
  const select = $("#agent");
  select.onchange = () => selectAgent(select.value).catch(fail);
  $("#new-session").onclick = () => newSession().catch(fail);
  $("#menu").onclick = () => {
    const open = document.body.classList.toggle("nav-open");
    $("#menu").setAttribute("aria-expanded", String(open));
  };
  $("#backdrop").onclick = closeNav;
  $("#resume-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $("#resume-id").value.trim();
    if (!id) return;
    resumeSnapshot(id).then((ok) => {
      if (ok) $("#resume-id").value = "";
    }).catch(fail);
  });
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
    state.turnEl = show(el("div", "msg user", text));
    send({ text }).catch(fail);
  });
  return start();
}

// fail shows what went wrong; after a 401, it asks for a key and starts over.
function fail(e) {
  if (e instanceof Unauthenticated) {
    askKeyAgain(e).then(start).catch(fail);
    return;
  }
  setStatus(`error: ${e.message}`, true);
}

main().catch(fail);
