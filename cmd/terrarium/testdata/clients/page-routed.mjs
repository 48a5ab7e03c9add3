// Drives the web chat page with a routed agent in a headless Chromium: its routes
// beside it, the route and step after each turn, and a resumed snapshot showing where
// its conversation stood. Writes a screenshot.
// usage: node page-routed.mjs <server URL> <screenshot.png> <chromium>
import { launch } from "./browser.mjs";

const [url, screenshot, executablePath] = process.argv.slice(2);
const browser = await launch(executablePath);
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  await page.waitForSelector("#status:has-text('session')");
  const description = await page.textContent("#agent-description");

  await page.fill("#input", "I'd like to fly to Lisbon");
  await page.click("#send");
  const answer = page.locator(".msg.model", { hasText: "Noted. Now tell me the day of departure." });
  await answer.waitFor();
  await page.locator(".event.route", { hasText: "route flight · step ask_date" }).waitFor();
  await page.waitForSelector("#status:has-text('turn ended')");
  const status = await page.textContent("#status");

  await page.fill("#input", "Actually, find me a hotel in Porto instead");
  await page.click("#send");
  await page.locator(".event.route", { hasText: "route hotel · step ask_nights" }).waitFor();
  await page.waitForFunction(() => document.querySelectorAll("#snapshots button.resume").length === 2);

  // Resuming the first snapshot reloads its conversation and where it stood.
  await page.locator("#snapshots button.resume").first().click();
  await page.locator(".event", { hasText: "resumed from snapshot" }).waitFor();
  const resumed = await page.locator(".event.route").allTextContents();
  await page.waitForSelector("#status:has-text('route flight')");
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ description, answer: await answer.textContent(), status, resumed, errors }));
} finally {
  await browser.close();
}
