// The API reference page (/docs) of both environments in a real browser: its stylesheet loads
// under the page's CSP (a blocked stylesheet is a console error, which fails the test), it makes
// no request to another origin, and every in-page link lands on an element.
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
