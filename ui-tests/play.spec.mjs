// Play CASE-D-001 by clicks to a graded decision with clicked evidence tokens; check that no gold
// field reached the page before the terminal step; then read the session's institution page.
import { readFileSync } from "node:fs";
import { test, expect, env, shot } from "./fixtures.mjs";

// Token ids are seeded per document (they do not give a line's position away), so the lines to
// click are looked up in the case file by their text.
const CASE = JSON.parse(readFileSync(new URL("../fixtures/controlbench/cases/CASE-D-001.json", import.meta.url)));
function tokenOf(docId, prefix) {
  const doc = CASE.documents.find((d) => d.doc_id === docId);
  return doc.accurate_ocr.find((t) => t.text.startsWith(prefix));
}
const FROM_LINE = tokenOf("THR-100", "From:");
const BANK_LINE = tokenOf("INV-D-001", "Bank:");

const BASE = () => env("LS_URL");
// Keys that exist only in the hidden world or in the grade: none may reach the page before the
// terminal step (the case file's `gold` block holds decision, reason_codes, policy_checks,
// evidence_targets, unsafe_if_pay).
const HIDDEN_KEYS = ["gold", "evidence_targets", "unsafe_if_pay", "hidden_world", "ground_truth", "score_breakdown", "result_class", "trust_graph", "adversarial_falsifier", "decision_certificate_report"];
const ENV_ROUTES = ["/reset", "/step", "/state", "/institutional-memory"];

function keysOf(v, out = new Set()) {
  if (Array.isArray(v)) v.forEach((x) => keysOf(x, out));
  else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) { out.add(k); keysOf(x, out); }
  return out;
}

async function runTool(page, tool, fields) {
  const box = page.locator(`details.tool:has(form[data-tool="${tool}"])`);
  if (!(await box.evaluate((d) => d.open))) await box.locator("summary").click();
  for (const [name, value] of Object.entries(fields)) {
    const el = box.locator(`[name="${name}"]`);
    if ((await el.evaluate((e) => e.tagName)) === "SELECT") await el.selectOption(value);
    else await el.fill(String(value));
  }
  const before = await page.evaluate(() => window.LS.log.length);
  await box.getByRole("button", { name: `Run ${tool}` }).click();
  await page.waitForFunction((n) => window.LS.log.length > n, before);
}

test("play CASE-D-001 to a graded decision with clicked evidence", async ({ page }) => {
  await page.goto(`${BASE()}/ui/#play`);
  await page.selectOption("#case-id", "CASE-D-001");
  await page.click("#start");
  await expect(page.locator(".instruction")).toContainText("CASE-D-001");
  await expect(page.locator(".meter")).toHaveCount(3);

  await runTool(page, "ocr", { doc_id: "INV-D-001", mode: "accurate" });
  // The thread selector defaults to the e-mail thread (it defaulted to the invoice, so a Run
  // with the default failed "thread not found" and the grade listed the thread as a missing
  // control): run it with the default.
  const threadBox = page.locator('details.tool:has(form[data-tool="inspect_email_thread"])');
  await threadBox.locator("summary").click();
  await expect(threadBox.locator('[name="thread_id"]')).toHaveValue("THR-100");
  await runTool(page, "inspect_email_thread", {});
  // The thread is readable: subject, sender, body and the request signals (not only a header).
  const thread = page.locator('article.thread[data-thread="THR-100"]');
  await expect(thread.locator(".mail-subject")).toContainText("URGENT: release INV-2048-A");
  await expect(thread).toContainText("accounts@northwind-payments.example.net");
  await expect(thread.locator(".mail-body")).toContainText("Please release invoice INV-2048-A");
  await expect(thread.locator(".mail-body")).toContainText("skip callback verification");
  await expect(thread.locator(".mail-signals")).toContainText("bank change language");
  // The tool result is in words (a table of fields), and the thread's vendor key is offered to
  // the vendor_key inputs of the tools.
  await expect(page.locator('.tool-result[data-tool="inspect_email_thread"]')).toContainText("Email thread inspection complete.");
  await expect(page.locator('datalist[id="dl-lookup_vendor_history-vendor_key"] option[value="northwind-industrial"]')).toHaveCount(1);
  await runTool(page, "ocr", { doc_id: "THR-100", mode: "accurate" });
  await runTool(page, "request_callback_verification", {});
  await expect(page.locator(".timeline .pending")).toContainText("callback_verification_result");
  await expect(page.locator("table.steps tbody tr")).toHaveCount(4);
  await expect(page.locator("figure.chart", { hasText: "Artifacts on the case clock" }).locator("circle.pending")).toHaveCount(1);
  // Half-way through the step limit (step 9 of 18) the case's pressure event arrives.
  for (let i = 0; i < 5; i++) await runTool(page, "lookup_policy", {});
  await expect(page.locator(".pressure li.shock").first()).toBeVisible();
  await expect(page.locator(".pressure")).toContainText("Pressure event arrived");

  // Evidence by clicking tokens: the spoofed sender line of the thread (mouse) ...
  await page.selectOption("#claim", "sender_domain_spoof");
  await page.locator(`g.tok[data-token-id="${FROM_LINE.token_id}"]`).click();
  await expect(page.locator(`g.tok[data-token-id="${FROM_LINE.token_id}"]`)).toHaveAttribute("aria-pressed", "true");
  // ... and the changed bank account on the invoice (keyboard: focus the token, press Enter).
  await page.selectOption("#claim", "bank_override_attempt");
  await page.getByRole("tab", { name: /INV-D-001/ }).click();
  await page.locator(`g.tok[data-token-id="${BANK_LINE.token_id}"]`).focus();
  await page.keyboard.press("Enter");
  await expect(page.locator("#evidence-list li")).toHaveCount(2);

  // No gold field in any environment reply the page holds, nor in the page text.
  const log = await page.evaluate(() => window.LS.log);
  const envReplies = log.filter((e) => ENV_ROUTES.includes(e.path));
  expect(envReplies.length).toBeGreaterThanOrEqual(5);
  const keys = keysOf(envReplies.map((e) => e.body));
  for (const k of HIDDEN_KEYS) expect(keys.has(k), `hidden key '${k}' before the terminal step`).toBe(false);
  expect(envReplies.every((e) => !e.body.done)).toBe(true);
  const text = await page.locator("body").innerText();
  expect(text).not.toMatch(/\bgold\b/i);
  await shot(page, "play");

  await page.selectOption("#decision", "ESCALATE_FRAUD");
  await page.fill("#confidence", "0.9");
  for (const c of ["bank_override_attempt", "sender_domain_spoof", "policy_bypass_attempt"]) await page.check(`input[name="reason_codes"][value="${c}"]`);
  await page.selectOption("#pc-bank_change_verification", "fail");
  const req = page.waitForRequest((r) => r.url().endsWith("/step") && (r.postDataJSON() || {}).action_type === "submit_decision");
  await page.click("#submit-decision");
  const sent = (await req).postDataJSON().payload;
  expect(sent.evidence_map.sender_domain_spoof).toEqual({ doc_id: "THR-100", page: 1, bbox: FROM_LINE.bbox, token_ids: [FROM_LINE.token_id] });
  expect(sent.evidence_map.bank_override_attempt.token_ids).toEqual([BANK_LINE.token_id]);

  await expect(page.locator("#final-score")).toBeVisible();
  const score = Number(await page.locator("#final-score").innerText());
  expect(score).toBeGreaterThan(0);
  await expect(page.locator("#result-class")).not.toHaveText("—");
  // The grade explains itself from the API's reasons: the result class in words, each cap that
  // bound the score, every missing required control and artifact, every failed SOX control.
  const terminal = (await page.evaluate(() => window.LS.log)).filter((e) => e.path === "/step").at(-1).body.info;
  const sb = terminal.score_breakdown;
  const why = page.locator("#grade-why");
  await expect(why.locator(".why-class")).toContainText(terminal.result_class);
  expect(sb.missing_required_actions.length + sb.missing_required_artifacts.length).toBeGreaterThan(0);
  for (const a of [...sb.missing_required_actions, ...sb.missing_required_artifacts]) await expect(why).toContainText(a);
  for (const c of terminal.compliance.failed_controls) await expect(why).toContainText(c);
  if (terminal.result_class === "correct_but_policy_incomplete") await expect(why).toContainText("required controls or artifacts were missing");
  for (const [k, v] of Object.entries(sb)) if (k.endsWith("_cap") && v < 1) await expect(why).toContainText(`Capped at ${v.toFixed(2)}`);
  await expect(page.locator("#grade .score-line")).toContainText(`track ${terminal.benchmark_track}`);
  await expect(page.locator("figure.chart", { hasText: "TrustGraph" }).locator("g.node").first()).toBeVisible();
  await expect(page.locator("figure.chart", { hasText: "Decision certificate" }).locator("g.node").first()).toBeVisible();
  // The certificate summary counts what is drawn, and no node label is cut off by its box.
  const drawn = await page.locator("figure.chart", { hasText: "Decision certificate" }).locator("g.node").count();
  await expect(page.locator("#certificate-summary")).toContainText(`Drawn: ${drawn} nodes`);
  const overflow = await page.locator("svg.graph g.node").evaluateAll((gs) => gs.filter((g) => [...g.querySelectorAll("text")].some((t) => t.getComputedTextLength() > g.querySelector("rect").width.baseVal.value - 8)).length);
  expect(overflow).toBe(0);
  await expect(page.locator("figure.chart", { hasText: "Component scores" }).locator("rect.bar").first()).toBeVisible();
  await shot(page, "play-grade");

  // The same session's institutional memory now counts the decided case.
  await page.click('#tabs a[data-page="institution"]');
  await expect(page.locator("main h2")).toHaveText("Institution");
  await expect(page.locator("main")).toContainText("1 cases decided");
  await expect(page.locator("figure.chart", { hasText: "Authority level after each episode" }).locator("circle")).toHaveCount(1);
  await expect(page.locator("figure.chart", { hasText: "Ratios" })).toBeVisible();
  await expect(page.locator("figure.chart", { hasText: "Amounts and counts" })).toBeVisible();
  await shot(page, "institution");
});

test("a seeded pick from the served pool starts an episode and keeps the choice", async ({ page }) => {
  await page.goto(`${BASE()}/ui/#play`);
  await page.selectOption("#case-mode", "seeded");
  await page.fill("#seed", "7");
  await page.click("#start");
  await expect(page.locator(".instruction")).toBeVisible();
  await expect(page.locator("#case-mode")).toHaveValue("seeded");
  await expect(page.locator("#seed")).toHaveValue("7");
  await expect(page.locator(".doc-tab").first()).toBeVisible();
});

test("a payload the server rejects shows its error and the episode goes on", async ({ page }) => {
  page.expectedErrors.push(/HTTP 422: POST .*\/step/, /status of 422/);
  await page.goto(`${BASE()}/ui/#play`);
  await page.selectOption("#case-id", "CASE-D-001");
  await page.click("#start");
  const box = page.locator('details.tool:has(form[data-tool="zoom"])');
  await box.locator("summary").click();
  await box.locator('[name="bbox"]').fill("1,2");
  await box.getByRole("button", { name: "Run zoom" }).click();
  await expect(page.locator("[role=alert]")).toContainText("bbox");
  await expect(page.locator("table.steps tbody tr")).toHaveCount(0);
  // The same control works with a valid box.
  await page.locator('details.tool:has(form[data-tool="zoom"]) [name="bbox"]').fill("0,0,300,200");
  await page.locator('details.tool:has(form[data-tool="zoom"])').getByRole("button", { name: "Run zoom" }).click();
  await expect(page.locator("table.steps tbody tr")).toHaveCount(1);
  await expect(page.locator("[role=alert]")).toHaveCount(0);
});

test("the track box labels a curated case and the episode shows its track", async ({ page }) => {
  await page.goto(`${BASE()}/ui/#play`);
  await page.selectOption("#case-id", "CASE-D-001");
  // The case's own track first ...
  await page.click("#start");
  await expect(page.locator("#episode-track")).toContainText("Adversarial Data Track (adversarial)");
  // ... then the same curated case on the blind-control track: the reset names it and the
  // episode shows it.
  await page.selectOption("#track", "blind_control");
  const req = page.waitForRequest((r) => r.url().endsWith("/reset"));
  await page.click("#start");
  expect((await req).postDataJSON()).toEqual({ case_id: "CASE-D-001", track: "blind_control" });
  await expect(page.locator("#episode-track")).toContainText("Blind-Control Track (blind_control) · mode blind");
  await expect(page.locator("#instrumented-blind")).toBeVisible();
});

test("a hand-filled certificate that is not JSON is refused in the page, naming the field", async ({ page }) => {
  await page.goto(`${BASE()}/ui/#play`);
  await page.selectOption("#case-id", "CASE-B-001");
  await page.click("#start");
  await page.locator("details:has(#decision_certificate) > summary").click();
  await page.fill("#decision_certificate", "{not json");
  await page.click("#submit-decision");
  await expect(page.locator("#form-error")).toContainText("decision_certificate: not valid JSON");
  const steps = (await page.evaluate(() => window.LS.log)).filter((e) => e.path === "/step");
  expect(steps).toHaveLength(0);
  // The Task B form offers the family's own fields and no Task A extraction inputs.
  await expect(page.locator('fieldset[data-field="discrepancies"] input[value="price_mismatch"]')).toHaveCount(1);
  await expect(page.locator("#xf-vendor_name")).toHaveCount(0);
});
