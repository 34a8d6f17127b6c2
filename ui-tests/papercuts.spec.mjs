// The workbench's first-user paper cuts, checked on the page's own modules (imported into the
// served page, so they run under its CSP exactly as the pages use them) and on the board.
import { test, expect, env } from "./fixtures.mjs";
import { screenshotDir } from "./fixtures.mjs";
import path from "node:path";

const BASE = () => env("LS_URL");

test("grade details never contradict the verdict", async ({ page }) => {
  await page.goto(`${BASE()}/ui/#play`);
  const text = await page.evaluate(async () => {
    const { explain } = await import("/ui/js/grade.js");
    // A 0.99 valid_success whose efficiency dimension carries a length penalty: the penalty is
    // inside the weighted score, not a deduction from the final score.
    const info = {
      final_score: 0.99, result_class: "valid_success",
      score_breakdown: { weighted_score: 0.97, length_penalty: 0.12, budget_penalty: 0.05, certificate_adjustment: 0.02 },
    };
    return explain(info).textContent;
  });
  expect(text).not.toContain("Penalties and adjustments");
  expect(text).toContain("Applied to the score: certificate adjustment +0.0200");
  expect(text).toContain("Inside the weighted dimensions (already counted in the weighted score, not subtracted again)");
  expect(text).toContain("length penalty 0.1200 (efficiency)");
});

test("money has one format and the thread selector lists threads first", async ({ page }) => {
  await page.goto(`${BASE()}/ui/#board`);
  const r = await page.evaluate(async () => {
    const { money, isMoneyKey } = await import("/ui/js/dom.js");
    const { optionIds } = await import("/ui/js/play.js");
    const docs = [{ doc_id: "INV-1", doc_type: "invoice" }, { doc_id: "THR-7", doc_type: "email" }, { doc_id: "PO-1", doc_type: "purchase_order" }];
    return {
      money: [money(1234.5), money(0), money(1000000), money(12.345), money(null)],
      keys: ["institutional_loss_total", "fraud_loss_prevented", "institutional_loss_score", "unsafe_release_rate", "case_count"].map(isMoneyKey),
      thread: optionIds("thread_id", docs),
      doc: optionIds("doc_id", docs),
    };
  });
  expect(r.money).toEqual(["1,234.50", "0.00", "1,000,000.00", "12.35", "—"]);
  expect(r.keys).toEqual([true, true, false, false, false]);
  expect(r.thread).toEqual(["THR-7", "INV-1", "PO-1"]);
  expect(r.doc).toEqual(["INV-1", "THR-7", "PO-1"]);
  // On the board every amount cell of the quarter table has exactly two decimals.
  // The board renders after its report arrives: wait for the quarter table before reading it
  // (allTextContents does not wait, and on a slow machine it read an empty page).
  const quarter = page.locator("table").filter({ hasText: "institutional_loss_total" });
  await expect(quarter.locator("tbody tr").first()).toBeVisible({ timeout: 60_000 });
  const cells = await quarter.locator("tbody tr td:last-child").allTextContents();
  expect(cells.length).toBeGreaterThan(0);
  for (const c of cells) expect(c).toMatch(/^-?[\d,]+\.\d\d$/);
});

test("screenshots go outside the tracked docs unless asked", () => {
  const here = path.dirname(new URL(import.meta.url).pathname);
  expect(screenshotDir({ LS_SCREENSHOT_DIR: path.join(here, "..", "target", "shots-x") })).toBe(path.join(here, "..", "target", "shots-x"));
  expect(screenshotDir({})).toBe(path.join(here, "..", "target", "ui-screenshots"));
  expect(screenshotDir({ LS_UPDATE_SCREENSHOTS: "1" })).toBe(path.join(here, "..", "docs", "screenshots"));
});
