// Every task family can be finished by hand: for one curated case of each family A–E, run the
// teacher on the server (POST /agent-runs), then play the same actions by clicks in Play — each
// tool through its form, then the decision form generated from the family's output contract
// (fields typed, codes checked, ids added, line items added, evidence chosen by clicking tokens,
// the certificate pasted) — and check the hand-played episode scores exactly as the teacher's.
import { test, expect, env } from "./fixtures.mjs";

const BASE = () => env("LS_URL");
const KEY = () => env("LS_OPERATOR_KEY");
const CASES = ["CASE-A-001", "CASE-B-001", "CASE-C-001", "CASE-D-001", "CASE-E-001"];

async function teacherOn(request, caseId) {
  const r = await request.post(`${BASE()}/agent-runs`, { headers: { "X-API-Key": KEY() }, data: { agent: "teacher", case_ids: [caseId] } });
  expect(r.status()).toBe(200);
  return (await r.json()).episodes[0];
}

/** Open a tool's control, fill the fields its form has, run it, wait for the reply. */
async function runTool(page, tool, payload) {
  const box = page.locator(`details.tool:has(form[data-tool="${tool}"])`);
  if (!(await box.evaluate((d) => d.open))) await box.locator("summary").click();
  for (const [name, value] of Object.entries(payload)) {
    const el = box.locator(`[name="${name}"]`);
    if (!(await el.count())) continue; // a key the tool does not read (e.g. vendor_key of an intervention)
    if ((await el.evaluate((e) => e.tagName)) === "SELECT") await el.selectOption(String(value));
    else await el.fill(Array.isArray(value) ? value.join(",") : String(value));
  }
  const before = await page.evaluate(() => window.LS.log.length);
  await box.getByRole("button", { name: `Run ${tool}` }).click();
  await page.waitForFunction((n) => window.LS.log.length > n, before);
}

/** Fill the decision form from a submission, field by field as the contract lays it out. */
async function fillDecision(page, contract, sub) {
  for (const f of contract.fields) {
    const v = sub[f.name];
    if (v === undefined) continue;
    switch (f.kind) {
      case "decision": await page.selectOption("#decision", v); break;
      case "probability": await page.fill(`#${f.name}`, String(v)); break;
      case "codes": for (const c of v) await page.check(`fieldset[data-field="${f.name}"] input[value="${c}"]`); break;
      case "ids": for (const id of v) { await page.fill(`#ids-${f.name}`, id); await page.click(`#add-${f.name}`); } break;
      case "checks": for (const [k, s] of Object.entries(v)) await page.selectOption(`#pc-${k}`, s); break;
      case "fields": for (const [k, x] of Object.entries(v)) await page.fill(`#xf-${k}`, String(x)); break;
      case "line_items":
        for (let i = 0; i < v.length; i++) {
          if (i > 0) await page.click("#add-line");
          for (const [c, x] of Object.entries(v[i])) await page.fill(`[name="li:${i}:${c}"]`, String(x));
        }
        break;
      case "evidence":
        for (const [claim, ref] of Object.entries(v)) {
          await page.selectOption("#claim", claim);
          await page.getByRole("tab", { name: new RegExp(`^${ref.doc_id} `) }).click();
          for (const t of ref.token_ids) await page.locator(`g.tok[data-token-id="${t}"]`).click();
        }
        break;
      case "text": await page.fill(`#${f.name}`, typeof v === "string" ? v : JSON.stringify(v)); break;
      case "object":
        await page.locator(`details:has(#${f.name}) > summary`).click();
        await page.fill(`#${f.name}`, JSON.stringify(v));
        break;
      default: break;
    }
  }
}

test("every family A–E is played by hand to the teacher's score", async ({ page, request }) => {
  test.setTimeout(150_000);
  const cat = await (await request.get(`${BASE()}/ui/catalog.json`)).json();
  for (const caseId of CASES) {
    const teacher = await teacherOn(request, caseId);
    expect(teacher.result_class, `${caseId} teacher`).toBe("valid_success");
    const submit = teacher.trajectory.at(-1);
    expect(submit.action_type).toBe("submit_decision");
    // A fresh page is a fresh session (fresh institution), as the teacher's run had.
    await page.goto(`${BASE()}/ui/#play`);
    await page.selectOption("#case-id", caseId);
    await page.click("#start");
    await expect(page.locator(".instruction")).toContainText(caseId);
    for (const st of teacher.trajectory.slice(0, -1)) await runTool(page, st.action_type, st.payload);
    await expect(page.locator("table.steps tbody tr")).toHaveCount(teacher.trajectory.length - 1);

    const contract = cat.output_contracts[teacher.task_type];
    await expect(page.locator("#decision-form")).toHaveAttribute("data-task", teacher.task_type);
    // Every non-empty field of the teacher's submission is a field of the family's contract.
    const names = contract.fields.map((f) => f.name);
    for (const [k, v] of Object.entries(submit.payload)) if (!(Array.isArray(v) && !v.length)) expect(names, `${caseId}: ${k}`).toContain(k);
    await fillDecision(page, contract, submit.payload);
    const req = page.waitForRequest((r) => r.url().endsWith("/step") && (r.postDataJSON() || {}).action_type === "submit_decision");
    await page.click("#submit-decision");
    const sent = (await req).postDataJSON().payload;
    expect(Object.keys(sent.evidence_map).sort()).toEqual(Object.keys(submit.payload.evidence_map).sort());
    await expect(page.locator("#final-score")).toHaveText(teacher.final_score.toFixed(4));
    await expect(page.locator("#result-class")).toHaveText("valid_success");
    await expect(page.locator("#grade-why")).toContainText("valid_success");
  }
});
