// Drives the web chat page in a headless Chromium: a message and its streamed answer,
// then an interrupt answered in the page. Writes a screenshot.
// usage: node page.mjs <server URL> <screenshot.png> <chromium>
import { launch } from "./browser.mjs";

const [url, screenshot, executablePath] = process.argv.slice(2);
const browser = await launch(executablePath);
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  // What the page's Content-Security-Policy refuses shows as a console error.
  page.on("console", (m) => m.type() === "error" && m.text().includes("Content Security Policy") && errors.push(m.text()));
  await page.goto(url);
  await page.waitForSelector("#status:has-text('new session')");

  // The first message opens the session.
  await page.fill("#input", "hello page");
  await page.click("#send");
  const answer = page.locator(".msg.model", { hasText: "echo: hello page" });
  await answer.waitFor();
  await page.waitForSelector("#status:has-text('turn ended')");
  const session = ((await page.textContent("#status")).match(/session ([0-9a-f-]{36})/) || [])[1];

  await page.fill("#input", '/call askUser {"question": "Favourite colour?"}');
  await page.click("#send");
  const interrupt = page.locator(".interrupt", { hasText: "Favourite colour?" });
  await interrupt.waitFor();
  await interrupt.locator("input").fill("green");
  await interrupt.locator("button").click();
  await page.locator(".msg.model", { hasText: 'Tool results: "green"' }).waitFor();
  await page.waitForSelector("#status:has-text('turn ended (stop)')");
  // One snapshot per turn: the answer, the interrupted turn, the resumed one.
  await page.waitForFunction(() => document.querySelectorAll("#snapshots button.resume").length === 3);

  // The server closes an idle socket: the next message opens the session again.
  await page.evaluate(() => state.ws.close());
  await page.waitForSelector("#status:has-text('not connected')");
  await page.fill("#input", "still there?");
  await page.click("#send");
  await page.locator(".msg.model", { hasText: "echo: still there?" }).waitFor();
  await page.waitForSelector("#status:has-text('turn ended')");
  await page.waitForFunction(() => document.querySelectorAll("#snapshots button.resume").length === 4);
  const snapshots = await page.locator("#snapshots button.resume").count();
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ session, answer: await answer.textContent(), snapshots, errors }));
} finally {
  await browser.close();
}
