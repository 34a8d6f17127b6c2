// The HTML report (`ledgershield report` writes report.html) opened from disk: it needs nothing
// from anywhere (no request leaves the file), has real tables and no Markdown dump, and its chart
// labels are neither clipped by their SVG nor overlapping.
import path from "node:path";
import { pathToFileURL } from "node:url";
import { test, expect, env, shot } from "./fixtures.mjs";

test("the HTML report reads offline: tables, labelled axes, no clipped or overlapping labels", async ({ page }) => {
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  const file = pathToFileURL(path.join(env("LS_REPORT_DIR"), "report.html")).href;
  await page.goto(file);
  expect(requests).toEqual([file]);
  await expect(page.locator("h1")).toHaveText("LedgerShield ControlBench benchmark report");
  expect(await page.locator("pre").count()).toBe(0);
  expect(await page.locator("script").count()).toBe(0);
  expect(await page.locator("table").count()).toBeGreaterThan(8);
  await expect(page.locator("body")).not.toContainText("|---");
  for (const t of ["Score ladder", "Accuracy vs institutional loss score", "Authority level over the ControlBench sequence", "Loss surface: ratios", "Loss surface: amounts"]) {
    await expect(page.locator("figure", { hasText: t }).locator("svg")).toBeVisible();
  }
  // Every text of every chart lies inside its SVG.
  const clipped = await page.locator("figure svg").evaluateAll((svgs) => svgs.flatMap((svg) => {
    const box = svg.getBoundingClientRect();
    return [...svg.querySelectorAll("text")].map((t) => ({ t: t.textContent, r: t.getBoundingClientRect() }))
      .filter(({ r }) => r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
      .map(({ t }) => `${svg.getAttribute("aria-label")}: ${t}`);
  }));
  expect(clipped).toEqual([]);
  // Scatter labels do not overlap.
  const labels = await page.locator("figure", { hasText: "Accuracy vs institutional loss score" }).locator("svg text:not(.tick):not(.lab)").evaluateAll((els) => els.map((e) => e.getBoundingClientRect().toJSON()));
  for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++) {
    const a = labels[i], b = labels[j];
    expect(a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top, `labels ${i} and ${j} overlap`).toBe(true);
  }
  // Ratios and amounts are on separate axes: the ratio chart's axis ends at 1, the amounts' at a money value.
  await expect(page.locator("figure", { hasText: "Loss surface: ratios" }).locator("text.tick[text-anchor=middle]").last()).toHaveText("1.00");
  await expect(page.locator("figure", { hasText: "Loss surface: amounts" }).locator("text.lab")).toHaveText("amount (invoice currency)");
  // The authority rows are the environment's levels, full authority on top.
  const rows = await page.locator("figure", { hasText: "Authority level over" }).locator("text.tick[text-anchor=end]").allTextContents();
  expect(rows).toEqual(["full_authority", "restricted_authority", "review_only", "locked"]);
  await shot(page, "report");
});
