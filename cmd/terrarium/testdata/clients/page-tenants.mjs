// Drives the web chat page of a server of tenants in a headless Chromium: the page
// asks for an API key, refuses a wrong one with a message, then with the right one
// streams an answer. Writes a screenshot.
// usage: node page-tenants.mjs <server URL> <screenshot.png> <chromium> <key>
import { launch } from "./browser.mjs";

const [url, screenshot, executablePath, key] = process.argv.slice(2);
const browser = await launch(executablePath);
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  await page.locator("#signin").waitFor();
  const asked = await page.textContent("#signin-error");

  await page.fill("#apikey", key + "x");
  await page.click("#signin-submit");
  await page.waitForSelector("#signin-error:has-text('refused')");
  const refused = await page.textContent("#signin-error");

  await page.fill("#apikey", key);
  await page.click("#signin-submit");
  await page.waitForSelector("#status:has-text('session')");
  await page.fill("#input", "hello tenant");
  await page.click("#send");
  const answer = page.locator(".msg.model", { hasText: "echo: hello tenant" });
  await answer.waitFor();
  await page.waitForSelector("#status:has-text('turn ended')");
  const kept = await page.evaluate(() => ({
    session: Object.values(sessionStorage),
    local: localStorage.length,
    cookie: document.cookie,
    url: location.href,
  }));
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ asked, refused, answer: await answer.textContent(), kept, errors }));
} finally {
  await browser.close();
}
