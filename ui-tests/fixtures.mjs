// Shared test fixture: every page fails its test on a console error, an uncaught exception, a
// failed request or an HTTP error status. Screenshots go to $LS_SCREENSHOT_DIR (scripts/ci-ui.sh:
// target/ui-screenshots/, ignored by git), so a test run never rewrites the tracked ones; only
// LS_UPDATE_SCREENSHOTS=1 writes docs/screenshots/ (to refresh the README's pictures on purpose).
import { test as base, expect } from "@playwright/test";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const SHOTS = screenshotDir();

/** Where screenshots go: docs/screenshots/ only when asked, else the given or an ignored folder. */
export function screenshotDir(e = process.env) {
  const dir = e.LS_UPDATE_SCREENSHOTS === "1"
    ? path.join(here, "..", "docs", "screenshots")
    : e.LS_SCREENSHOT_DIR || path.join(here, "..", "target", "ui-screenshots");
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run the tests through scripts/ci-ui.sh)`);
  return v;
}

export const test = base.extend({
  page: async ({ page }, use) => {
    const problems = [];
    // A test that provokes an error on purpose lists it here (regexes over the problem text).
    page.expectedErrors = [];
    page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()}`); });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("requestfailed", (r) => {
      const why = r.failure() && r.failure().errorText;
      // The browser fetches the favicon after the page has loaded and cancels that fetch when a
      // test navigates on first: a cancellation by the browser, not a failed resource.
      if (why === "net::ERR_ABORTED" && new URL(r.url()).pathname.endsWith("/favicon.svg")) return;
      problems.push(`request failed: ${r.method()} ${r.url()} (${why})`);
    });
    page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`); });
    await use(page);
    const unexpected = problems.filter((p) => !page.expectedErrors.some((re) => re.test(p)));
    expect(unexpected, "console errors, failed requests or error statuses").toEqual([]);
  },
});

export { expect };

export async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}
