// The API reference page (/docs) of both environments in a real browser: its stylesheet loads
// under the page's CSP (a blocked stylesheet is a console error, which fails the test), it makes
// no request to another origin, and every in-page link lands on an element.
import { readFileSync } from "node:fs";
import path from "node:path";
import { test, expect, env } from "./fixtures.mjs";

for (const [name, url] of [["ControlBench", "LS_URL"], ["audit", "LS_AUDIT_URL"]]) {
  test(`${name} /docs renders offline with every link resolving`, async ({ page }) => {
    const base = env(url);
    const origin = new URL(base).origin;
    const foreign = [];
    page.on("request", (r) => { const u = new URL(r.url()); if (u.protocol.startsWith("http") && u.origin !== origin) foreign.push(r.url()); });
    await page.goto(`${base}/docs`);
    await expect(page.locator("h1")).toContainText("API reference");
    // The stylesheet applied: the index and the routes sit side by side.
    await expect(page.locator(".layout")).toHaveCSS("display", "grid");
    await expect(page.locator("article.op").first()).toBeVisible();
    const dangling = await page.locator("a[href^='#']").evaluateAll((links) =>
      links.map((a) => a.getAttribute("href").slice(1)).filter((id) => !document.getElementById(id)));
    expect(dangling).toEqual([]);
    // The index jumps to an operation.
    await page.locator("nav a", { hasText: "/reset" }).first().click();
    await expect(page.locator("#post_reset")).toBeInViewport();
    expect(await page.locator("script").count()).toBe(0);
    expect(foreign).toEqual([]);
  });
}

for (const [name, url, log] of [["ControlBench", "LS_URL", "controlbench"], ["audit", "LS_AUDIT_URL", "audit"]]) {
  test(`${name}: GET / and the startup line name the workbench and the API reference`, async ({ page, request }) => {
    const base = env(url);
    const root = await (await request.get(`${base}/`)).json();
    expect(root.workbench).toBe("/ui/");
    expect(root.docs).toBe("/docs");
    const lines = readFileSync(path.join(env("LS_LOG_DIR"), `${log}.log`), "utf8").split("\n").filter((l) => l.includes(base));
    expect(lines[0]).toBe(`LedgerShield listening on ${base}`);
    expect(lines[1]).toBe(`Workbench: ${base}/ui/ · API reference: ${base}/docs`);
    // Both links work.
    await page.goto(`${base}${root.workbench}`);
    await expect(page.locator("#tabs a").first()).toBeVisible();
    await page.goto(`${base}${root.docs}`);
    await expect(page.locator("h1")).toContainText("API reference");
  });
}
