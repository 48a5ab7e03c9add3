// Drives the web chat page in a headless Chromium, at a desktop's width and at a
// phone's (390 px), through what it must recover from: a page load that stores
// nothing and logs no error, a WebSocket dropped between turns and within them (the
// test's proxy drops it when told) or closed by a host restarting, a snapshot resumed
// by its ID's first digits, the session list, newest first with each session's first
// words, and, with the agent fragile, failed turns shown under their message, each
// followed by a good turn in the same session. Writes screenshots per width:
// chat-page-<width>.png, after the failures -failed.png, and the phone's open menu
// -menu.png.
// usage: node page-recovers.mjs <page URL> <screenshot dir> <chromium> <control URL> <failing message>...
import { launch } from "./browser.mjs";

const [url, shots, executablePath, control, ...failing] = process.argv.slice(2);
const browser = await launch(executablePath);
const out = {};

// drop tells the test's proxy to drop the page's connections: all of them now (""),
// or the next read towards the host ("host") or towards the page ("page:<bytes>").
async function drop(how = "") {
  const resp = await fetch(`${control}/drop?${new URLSearchParams({ how })}`, { method: "POST" });
  if (!resp.ok) throw new Error(`drop: ${resp.status}`);
}

async function run(name, viewport) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const r = { errors: [], console: [], loadConsole: [], requests: [], sockets: 0, turns: [] };
  page.on("pageerror", (e) => r.errors.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error") r.console.push(m.text());
  });
  page.on("request", (req) => r.requests.push(new URL(req.url()).pathname));
  page.on("websocket", () => r.sockets++);
  const status = () => page.textContent("#status");
  const sessionOf = async () => ((await status()).match(/session ([0-9a-f-]{36})/) || [])[1];
  // turn sends a message and waits for the turn's end, returning how it ended.
  const turn = async (text, want) => {
    const before = await page.locator(".msg.model").count();
    await page.fill("#input", text);
    await page.click("#send");
    await page.waitForFunction(() => /turn (ended|failed)/.test(document.querySelector("#status").textContent));
    if (want) await page.locator(".msg.model", { hasText: want }).last().waitFor();
    const ended = await status();
    if (want) r.turns.push({ text, status: ended.replace(/^.* · /, ""), models: (await page.locator(".msg.model").count()) - before });
    return ended;
  };

  // A page load: no session, no socket, nothing stored, no error.
  await page.goto(url);
  await page.waitForSelector("#status:has-text('new session')");
  await page.waitForTimeout(300);
  r.loadConsole = [...r.console];
  r.socketsOnLoad = r.sockets;
  r.loadRequests = [...r.requests];
  r.sessionsOnLoad = await page.locator("#sessions li:not(.empty)").count();

  // The sidebar: beside the chat on a desktop; folded away behind the menu on a phone.
  const sidebar = async () => {
    const box = await page.locator("aside").boundingBox();
    return box && box.x + box.width > 1;
  };
  r.sidebarShown = await sidebar();
  r.menuShown = await page.locator("#menu").isVisible();
  if (r.menuShown) {
    await page.click("#menu");
    await page.waitForTimeout(400);
    r.sidebarAfterMenu = await sidebar();
    await page.screenshot({ path: `${shots}/chat-page-${name}-menu.png` });
    await page.click("#backdrop", { position: { x: viewport.width - 10, y: 10 } });
    await page.waitForTimeout(400);
    r.sidebarAfterBackdrop = await sidebar();
  }

  await turn(`hello from the ${name}`, `echo: hello from the ${name}`);
  const session = await sessionOf();
  r.session = session;

  // A socket dropped between turns reconnects by itself, on the same session.
  await drop();
  await page.locator(".event", { hasText: "the connection was lost" }).last().waitFor();
  await page.locator(".event", { hasText: `reconnected: session ${session}` }).last().waitFor();
  await turn("after the drop", "echo: after the drop");
  r.sessionAfterDrop = await sessionOf();

  if (name === "desktop") {
    // The host restarts: sent SIGTERM, it closes the socket with 1012 (Service
    // Restart), and another host answers at the address; the page follows by itself.
    // While no host answers, the browser logs each failed request: set them apart.
    const loggedBefore = r.console.length;
    const reconnected = await page.locator(".event", { hasText: "reconnected: session" }).count();
    await drop("restart");
    await page.waitForFunction(
      (n) => [...document.querySelectorAll(".event")].filter((e) => e.textContent.startsWith("reconnected: session")).length > n,
      reconnected,
    );
    r.restartConsole = r.console.splice(loggedBefore);
    r.restartClose = await page.locator(".event", { hasText: "the connection was lost (1012" }).count();
    await turn("after the restart", "echo: after the restart");
    r.sessionAfterRestart = await sessionOf();

    // Dropped before the message reached the server: sent again, once.
    await drop("host");
    await turn("lost on the way", "echo: lost on the way");
    r.resent = await page.locator(".event", { hasText: "sending it again" }).count();
    // Dropped after the turn was kept: the transcript reloads from the session.
    await drop("page:snapshotCreated");
    await page.fill("#input", "kept while away");
    await page.click("#send");
    await page.locator(".event", { hasText: "the turn ended while the connection was down" }).waitFor();
    await page.locator(".msg.model", { hasText: "echo: kept while away" }).waitFor();
    r.keptOnce = await page.locator(".msg.user", { hasText: "kept while away" }).count();

    // A snapshot resumed by the first digits of its ID; an unknown prefix is refused,
    // and the session stays as it was.
    await page.waitForFunction(() => document.querySelectorAll("#snapshots button.resume").length > 0);
    const first = await page.locator("#snapshots button.resume").first().getAttribute("data-snapshot");
    // The browser logs the refusal's 404 as a console error: set it apart.
    const logged = r.console.length;
    await page.fill("#resume-id", "00000000");
    await page.click("#resume-submit");
    r.unknownPrefix = await page.locator(".event.error", { hasText: "cannot resume 00000000" }).textContent();
    r.unknownConsole = r.console.splice(logged);
    r.sessionAfterUnknown = await sessionOf();
    await page.fill("#resume-id", first.slice(0, 8));
    await page.click("#resume-submit");
    await page.locator(".event", { hasText: `resumed from snapshot ${first}` }).waitFor();
    await page.waitForSelector("#status:has-text('session')");
    await turn("after the resume", "echo: after the resume");
    r.resumedMessages = await page.locator(".msg").count();

    // A second session: the list shows it first, each with its first words.
    await page.click("#new-session");
    await page.waitForSelector("#status:has-text('new session')");
    await turn("a second session", "echo: a second session");
    await page.waitForFunction(() => document.querySelectorAll("#sessions li:not(.empty)").length >= 2);
    r.sessionList = await page.locator("#sessions .title").allTextContents();
    r.sessionTimes = await page.locator("#sessions .when").allTextContents();
  }

  r.overflows = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  await page.screenshot({ path: `${shots}/chat-page-${name}.png` });

  // The agent that fails on purpose, in a new session: each failure, the first on the
  // session's first turn, shows under the message that caused it, and the next turn
  // goes on in the session.
  if (r.menuShown) await page.click("#menu");
  await page.selectOption("#agent", "fragile"); // which starts a new session, and folds the sidebar away
  await page.waitForSelector("#status:has-text('fragile · new session')");
  r.failures = [];
  for (const say of failing) {
    const ended = await turn(say);
    const failure = page.locator(".failure").last();
    r.failures.push({
      say,
      status: ended.replace(/^.* · /, ""),
      shown: await failure.isVisible(),
      detail: await failure.locator(".detail").textContent(),
      under: await page.evaluate(() => {
        const f = [...document.querySelectorAll(".failure")].pop();
        let prev = f.previousElementSibling;
        while (prev && !prev.classList.contains("user")) prev = prev.previousElementSibling;
        return prev ? prev.textContent : null;
      }),
      marked: await page.locator(".msg.user.failed", { hasText: say }).count(),
    });
    await turn(`after ${say}`, `ok: after ${say}`);
  }
  r.fragileSession = await sessionOf();
  await page.waitForFunction((n) => document.querySelectorAll("#snapshots li.failed").length === n, failing.length);
  r.failedSnapshots = await page.locator("#snapshots li.failed").count();
  r.overflowsFailed = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  await page.screenshot({ path: `${shots}/chat-page-${name}-failed.png` });
  await context.close();
  return r;
}

try {
  out.desktop = await run("desktop", { width: 1280, height: 800 });
  out.phone = await run("phone", { width: 390, height: 844 });
  console.log(JSON.stringify(out));
} finally {
  await browser.close();
}
