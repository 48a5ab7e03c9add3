// Launches the headless Chromium the page tests drive.
import { chromium } from "playwright-core";

export function launch(executablePath) {
  return chromium.launch({
    executablePath,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}
