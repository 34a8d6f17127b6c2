// Workbench round 2: a hand-played episode stored as a run and replayed like any run; the LLM
// agent on the agent-runner page against an OpenAI-compatible endpoint (the mock scripts/ci-ui.sh
// starts); the stored live model comparison on the Leaderboard page; one audit episode.
import { test, expect, env, shot, SHOTS } from "./fixtures.mjs";

const BASE = () => env("LS_URL");
const KEY = () => env("LS_OPERATOR_KEY");

test("a hand-played episode is stored as a run, listed on Replay and replays to its grade", async ({ page }) => {
  await page.goto(`${BASE()}/ui/?token=${KEY()}#play`);
  await page.selectOption("#case-id", "CASE-D-001");
  await page.click("#start");
  await expect(page.locator(".instruction")).toContainText("CASE-D-001");
  const box = page.locator('details.tool:has(form[data-tool="inspect_email_thread"])');
  await box.locator("summary").click();
  await box.locator('[name="thread_id"]').selectOption("THR-100");
  await box.getByRole("button", { name: "Run inspect_email_thread" }).click();
  await expect(page.locator("table.steps tbody tr")).toHaveCount(1);
  await page.selectOption("#decision", "ESCALATE_FRAUD");
  await page.fill("#confidence", "0.8");
  await page.check('input[name="reason_codes"][value="sender_domain_spoof"]');
  await page.click("#submit-decision");
  await expect(page.locator("#final-score")).toBeVisible();
  const shown = await page.locator("#final-score").innerText();

  await page.click("#store-run");
  await expect(page.locator("#stored-run")).toContainText("Stored as run hand-");
  const stored = (await page.evaluate(() => window.LS.log)).filter((e) => e.path === "/hand-runs").at(-1).body;
  // The server replayed the actions in a fresh institution: the page's first episode scores the same.
  expect(stored.final_score.toFixed(4)).toBe(shown);
  expect(stored.session_score.toFixed(4)).toBe(stored.final_score.toFixed(4));
  await shot(page, "play-stored");

  // The stored run has its replay link; the replay plays the actions again on this server.
  await page.click("#stored-run-link");
  await expect.poll(() => new URL(page.url()).hash).toBe(`#replay/${stored.run_id}/0`);
  await expect(page.locator("#replay-pos")).toHaveText("Step 0 of 2");
  for (let i = 1; i <= 2; i++) {
    await page.click("#replay-next");
    await expect(page.locator("#replay-check")).toHaveClass("ok");
  }
  await expect(page.locator("#replay-grade #final-score")).toHaveText(shown);
  // Listed with the other runs.
  await page.goto(`${BASE()}/ui/#replay`);
  const row = page.locator("table.runs tr", { has: page.locator(`a[data-run="${stored.run_id}"]`) });
  await expect(row).toContainText("human");
  await expect(row).toContainText("hand-played");
});

test("the agent-runner plays the llm agent against an OpenAI-compatible endpoint", async ({ page }) => {
  await page.goto(`${BASE()}/ui/?token=${KEY()}#agents`);
  await expect(page.locator("#runner-llm")).toBeHidden();
  await page.selectOption("#runner-agent", "llm");
  await expect(page.locator("#runner-llm")).toBeVisible();
  // A bad endpoint is refused with the field named (the request fails on purpose).
  page.expectedErrors.push(/HTTP 422: POST .*\/agent-runs/, /status of 422/);
  await page.fill("#runner-llm-url", "ftp://nowhere");
  await page.fill("#runner-llm-model", "mock-mini");
  await page.check('input[name="runner-case"][value="CASE-B-001"]');
  await page.click("#runner-run");
  await expect(page.locator("#runner-results .error")).toContainText("llm.api_base");

  await page.fill("#runner-llm-url", env("LS_MOCK_LLM_URL"));
  for (const model of ["mock-mini", "mock-strong"]) {
    await page.fill("#runner-llm-model", model);
    await page.click("#runner-run");
    await expect(page.locator("#runner-progress")).toHaveText("Done: 1 case.");
  }
  const replies = (await page.evaluate(() => window.LS.log)).filter((e) => e.path === "/agent-runs" && e.status === 200);
  expect(replies.map((r) => r.body.model)).toEqual(["mock-mini", "mock-strong"]);
  const [mini, strong] = replies.map((r) => r.body.episodes[0]);
  // The weak policy pays at once; the strong one investigates first.
  expect(mini.decision).toBe("PAY");
  expect(mini.trajectory).toHaveLength(1);
  expect(strong.trajectory.length).toBeGreaterThan(1);
  const rows = page.locator("#runner-results tbody tr");
  await expect(rows.nth(0).locator(".model")).toHaveText("mock-strong");
  await expect(rows.nth(0).locator(".score")).toHaveText(strong.final_score.toFixed(4));
  await expect(rows.nth(1).locator(".model")).toHaveText("mock-mini");
  await expect(rows.nth(1).locator(".score")).toHaveText(mini.final_score.toFixed(4));
  await shot(page, "agents-llm");
});

test("the stored live model comparison is shown on the Leaderboard page", async ({ page, request }) => {
  const pub = await (await request.get(`${BASE()}/comparisons`)).json();
  expect(pub.comparisons.length).toBeGreaterThan(0);
  const c = pub.comparisons[0];
  await page.goto(`${BASE()}/ui/#board`);
  const panel = page.locator(`#comparisons section.comparison[data-id="${c.comparison_id}"]`);
  await expect(panel.locator("table.compare-models tbody tr")).toHaveCount(c.results.length);
  for (const r of c.results) {
    const row = panel.locator("table.compare-models tbody tr", { hasText: r.model });
    await expect(row).toContainText(r.model_profile.tier);
    await expect(row).toContainText(r.average_score.toFixed(4));
  }
  await expect(panel.locator("#compare-order")).toContainText(c.capability_order.monotonic_by_capability ? "Monotonic by capability" : "Not monotonic");
  await expect(panel.locator("table.compare-families")).toBeVisible();
  // Keyless: no per-case rows, and the page says why.
  await expect(panel.locator("table.compare-cases")).toHaveCount(0);
  await expect(panel).toContainText("operators only");
  // The operator sees each case's score per model.
  await page.goto(`${BASE()}/ui/?token=${KEY()}#board`);
  const op = page.locator(`#comparisons section.comparison[data-id="${c.comparison_id}"]`);
  await expect(op.locator("table.compare-cases tbody tr")).toHaveCount(c.case_count);
  await op.screenshot({ path: `${SHOTS}/board-comparison.png` });
});

test("the audit page plays a single episode to its grade", async ({ page }) => {
  await page.goto(`${env("LS_AUDIT_URL")}/ui/#episode`);
  await expect(page.locator("#env-badge")).toHaveText("Financial Audit");
  await page.selectOption("#episode-task", "invoice_match");
  await page.fill("#episode-seed", "7");
  await page.click("#start-episode");
  await expect(page.locator("#episode-head")).toContainText("invoice_match");
  const reset = (await page.evaluate(() => window.LS.log)).filter((e) => e.path === "/reset").at(-1).body;
  expect(reset.observation.task_id).toBe("invoice_match");
  await page.click("#episode-add");
  await expect(page.locator("#episode-findings tbody tr")).toHaveCount(1);
  await page.click("#episode-submit");
  const grade = page.locator("#episode-grade");
  await expect(grade).toBeVisible();
  // The form keeps the task and seed started.
  await expect(page.locator("#episode-task")).toHaveValue("invoice_match");
  const step = (await page.evaluate(() => window.LS.log)).filter((e) => e.path === "/step").at(-1).body;
  expect(step.done).toBe(true);
  await expect(grade).toContainText(`reward ${step.reward.toFixed(4)}`);
  await expect(grade.locator("table.grade-table")).toContainText(step.grader.weighted_score.toFixed(4));
  await expect(page.locator("#episode-submit")).toHaveCount(0);
  await shot(page, "audit-episode");
});
