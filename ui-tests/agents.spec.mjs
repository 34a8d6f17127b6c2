// The agent-runner page and the instrumented-mode panel.
import { test, expect, env, shot } from "./fixtures.mjs";

const BASE = () => env("LS_URL");

test("run the teacher on chosen cases: rows fill in as each case finishes, each opens to its grade", async ({ page, request }) => {
  // Without the operator key the page says how to open it (the route is an operator route).
  await page.goto(`${BASE()}/ui/#agents`);
  await expect(page.locator("#runner-needs-key")).toContainText("?token=");
  const refused = await request.post(`${BASE()}/agent-runs`, { data: { agent: "teacher", case_ids: ["CASE-B-001"] } });
  expect(refused.status()).toBe(403);
  expect((await refused.json()).error.message).toContain("X-API-Key");
  const bad = await request.post(`${BASE()}/agent-runs`, { headers: { "X-API-Key": env("LS_OPERATOR_KEY") }, data: { agent: "oracle", case_ids: ["CASE-B-001"] } });
  expect(bad.status()).toBe(422);
  expect((await bad.json()).error.message).toContain("unknown agent 'oracle'");

  await page.goto(`${BASE()}/ui/?token=${env("LS_OPERATOR_KEY")}#agents`);
  await page.selectOption("#runner-agent", "teacher");
  for (const c of ["CASE-B-001", "CASE-D-002"]) await page.check(`input[name="runner-case"][value="${c}"]`);
  await page.click("#runner-run");
  await expect(page.locator("#runner-progress")).toHaveText("Done: 2 cases.");
  const replies = (await page.evaluate(() => window.LS.log)).filter((e) => e.path === "/agent-runs");
  expect(replies).toHaveLength(2);
  const rows = page.locator("#runner-results tbody tr");
  await expect(rows).toHaveCount(2);
  for (const [i, r] of replies.entries()) {
    const ep = r.body.episodes[0];
    await expect(rows.nth(i)).toContainText(ep.case_id);
    await expect(rows.nth(i).locator(".score")).toHaveText(ep.final_score.toFixed(4));
    await expect(rows.nth(i)).toContainText(ep.result_class);
  }
  await rows.nth(1).locator("button.show-run").click();
  const detail = page.locator("#runner-detail");
  await expect(detail.locator("table.runner-steps tbody tr")).toHaveCount(replies[1].body.episodes[0].trajectory.length);
  await expect(detail.locator("#final-score")).toHaveText(replies[1].body.episodes[0].final_score.toFixed(4));
  await expect(detail.locator("#grade-why")).toBeVisible();
  await shot(page, "agents");
});

test("instrumented mode: the SPRT belief, tool rankings and reward machine follow the observation", async ({ page }) => {
  const base = env("LS_INSTRUMENTED_URL");
  await page.goto(`${base}/ui/#play`);
  await page.selectOption("#case-id", "CASE-D-001");
  await page.click("#start");
  const box = page.locator('details.tool:has(form[data-tool="inspect_email_thread"])');
  await box.locator("summary").click();
  await box.locator('[name="thread_id"]').selectOption("THR-100");
  await box.getByRole("button", { name: "Run inspect_email_thread" }).click();
  await expect(page.locator("table.steps tbody tr")).toHaveCount(1);
  const obs = (await page.evaluate(() => window.LS.log)).filter((e) => e.path === "/step").at(-1).body.observation;
  const panel = page.locator("#instrumented");
  const belief = panel.locator("figure.chart", { hasText: "Posterior probability per hypothesis" });
  await expect(belief.locator("rect.bar")).toHaveCount(Object.keys(obs.sprt_state.posterior_probabilities).length);
  // Bars are drawn largest first, on a 0-1 axis, with the server's values.
  const top = Object.entries(obs.sprt_state.posterior_probabilities).sort((a, b) => b[1] - a[1])[0];
  await expect(belief.locator("rect.bar").first()).toHaveAttribute("data-label", `${top[0]}: ${top[1].toFixed(2)} probability`);
  await expect(panel.locator("#recommended-tool")).toHaveText(obs.tool_rankings.recommended_tool);
  await expect(panel.locator(".rank-table tbody tr")).toHaveCount(Object.keys(obs.tool_rankings.rankings).length);
  await expect(panel.locator("#rm-progress")).toHaveAttribute("value", String(obs.reward_machine.progress_fraction));
  await expect(panel.locator(".machine")).toContainText("Completed: inspect_email_thread");
  await shot(page, "play-instrumented");
  // The blind-control track is blind on this server too: the panel says so.
  await page.selectOption("#track", "blind_control");
  await page.click("#start");
  await expect(page.locator("#instrumented-blind")).toBeVisible();
});
