// Store teacher and always-escalate runs against the server with `ledgershield run --url`, open
// the teacher run and step through its replay to the grade, then compare the two runs.
import { test, expect, env, shot } from "./fixtures.mjs";
import { execFileSync } from "node:child_process";

function storeRun(agent) {
  const out = execFileSync(env("LS_BIN"), ["run", "--agent", agent, "--cases", "CASE-D-001,CASE-A-001", "--url", env("LS_URL"), "--db", env("LS_DB"), "--format", "json"], { encoding: "utf8" });
  return JSON.parse(out);
}

/** A run on a generated suite, played in-process (its cases are not served). */
function storeHoldoutRun(seed) {
  const out = execFileSync(env("LS_BIN"), ["run", "--agent", "teacher", "--suite", "holdout", "--seed", String(seed), "--db", env("LS_DB"), "--format", "json"], { encoding: "utf8" });
  return JSON.parse(out);
}

test("replay a stored teacher run step by step, then compare two runs", async ({ page }) => {
  const teacher = storeRun("teacher");
  const escalate = storeRun("always-escalate");
  expect(teacher.agent).toBe("teacher");
  expect(teacher.episodes[0].case_id).toBe("CASE-D-001");

  await page.goto(`${env("LS_URL")}/ui/?token=${env("LS_OPERATOR_KEY")}#replay`);
  const row = page.locator("table.runs tr", { has: page.locator(`a[data-run="${teacher.run_id}"]`) });
  await expect(row).toContainText("teacher");
  await expect(row).toContainText("public");
  await row.locator("a.open-run").click();
  await expect(page.locator("table.episodes tbody tr")).toHaveCount(2);
  await page.locator('a.replay-ep[data-idx="0"]').click();
  // The replay has its own link.
  expect(new URL(page.url()).hash).toBe(`#replay/${teacher.run_id}/0`);
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
    await page.locator("table.runs tr", { has: page.locator(`a[data-run="${id}"]`) }).locator('input[type="checkbox"]').check();
  }
  await page.click("#compare");
  await page.selectOption("#compare-case", "CASE-D-001");
  const panels = page.locator(".compare section.panel");
  await expect(panels).toHaveCount(2);
  await expect(panels.nth(0)).toContainText("teacher");
  await expect(panels.nth(1)).toContainText("always-escalate");
  await shot(page, "replay-compare");
});

test("a run on a generated holdout suite replays from its stored record; links and the tab work", async ({ page }) => {
  const seed = 1000 + Math.floor(Math.random() * 9000);
  console.log(`holdout seed ${seed}`);
  const run = storeHoldoutRun(seed);
  const ep = run.episodes[0];
  // The holdout case is not served: the page's reset is refused (400 unknown case_id), then it
  // falls back to the stored record.
  page.expectedErrors.push(/HTTP 400: POST .*\/reset/, /status of 400/);
  await page.goto(`${env("LS_URL")}/ui/?token=${env("LS_OPERATOR_KEY")}#replay/${run.run_id}/0`);
  await expect(page.locator("h2")).toContainText(`Replay: ${ep.case_id}`);
  await expect(page.locator("#replay-stored")).toContainText("does not serve");
  await expect(page.locator("#replay-pos")).toHaveText(`Step 0 of ${ep.steps}`);
  for (let i = 1; i <= ep.steps; i++) await page.click("#replay-next");
  await expect(page.locator("#replay-check")).toContainText("stored record");
  await expect(page.locator("#replay-grade #final-score")).toHaveText(ep.final_score.toFixed(4));
  await expect(page.locator("#replay-grade #grade-why")).toContainText(ep.result_class);
  // The run's own link lists its episodes; the Replay tab, clicked while on it, goes back to the list.
  await page.locator("a", { hasText: `← run ${run.run_id}` }).click();
  await expect(page.locator("table.episodes tbody tr")).toHaveCount(run.episodes.length);
  await page.goto(`${env("LS_URL")}/ui/#replay/${run.run_id}`);
  await expect(page.locator("h2")).toHaveText(`Run ${run.run_id}`);
  await page.click('#tabs a[data-page="replay"]');
  await expect(page.locator("table.runs")).toBeVisible();
  await page.locator("a.open-run", { hasText: run.run_id }).click();
  await expect(page.locator("h2")).toHaveText(`Run ${run.run_id}`);
  await page.click('#tabs a[data-page="replay"]');
  await expect(page.locator("h2")).toHaveText("Stored runs");
});
