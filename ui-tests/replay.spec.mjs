// Store teacher and always-escalate runs against the server with `ledgershield run --url`, open
// the teacher run and step through its replay to the grade, then compare the two runs.
import { test, expect, env, shot } from "./fixtures.mjs";
import { execFileSync } from "node:child_process";

function storeRun(agent) {
  const out = execFileSync(env("LS_BIN"), ["run", "--agent", agent, "--cases", "CASE-D-001,CASE-A-001", "--url", env("LS_URL"), "--db", env("LS_DB"), "--format", "json"], { encoding: "utf8" });
  return JSON.parse(out);
}

test("replay a stored teacher run step by step, then compare two runs", async ({ page }) => {
  const teacher = storeRun("teacher");
  const escalate = storeRun("always-escalate");
  expect(teacher.agent).toBe("teacher");
  expect(teacher.episodes[0].case_id).toBe("CASE-D-001");

  await page.goto(`${env("LS_URL")}/ui/?token=${env("LS_OPERATOR_KEY")}#replay`);
  const row = page.locator("table.runs tr", { has: page.locator(`button[data-run="${teacher.run_id}"]`) });
  await expect(row).toContainText("teacher");
  await expect(row).toContainText("public");
  await row.locator("button.open-run").click();
  await expect(page.locator("table.episodes tbody tr")).toHaveCount(2);
  await page.locator('button.replay-ep[data-idx="0"]').click();
  await expect(page.locator("#replay-pos")).toHaveText(`Step 0 of ${teacher.episodes[0].steps}`);
  for (let i = 1; i <= teacher.episodes[0].steps; i++) {
    await page.click("#replay-next");
    await expect(page.locator("#replay-pos")).toHaveText(`Step ${i} of ${teacher.episodes[0].steps}`);
    await expect(page.locator("#replay-check")).toHaveClass("ok");
    if (i === 2) await shot(page, "replay");
  }
  // The grade appears only at the terminal step, with the stored score.
  await expect(page.locator("#replay-grade #final-score")).toHaveText(teacher.episodes[0].final_score.toFixed(4));
  await expect(page.locator("#replay-grade figure.chart", { hasText: "Decision certificate" }).locator("g.node").first()).toBeVisible();
  await page.click("#replay-prev");
  await expect(page.locator("#replay-grade")).toHaveCount(0);

  await page.click('#tabs a[data-page="board"]');
  await page.click('#tabs a[data-page="replay"]');
  for (const id of [teacher.run_id, escalate.run_id]) {
    await page.locator("table.runs tr", { has: page.locator(`button[data-run="${id}"]`) }).locator('input[type="checkbox"]').check();
  }
  await page.click("#compare");
  await page.selectOption("#compare-case", "CASE-D-001");
  const panels = page.locator(".compare section.panel");
  await expect(panels).toHaveCount(2);
  await expect(panels.nth(0)).toContainText("teacher");
  await expect(panels.nth(1)).toContainText("always-escalate");
  await shot(page, "replay-compare");
});
