// Audit campaigns (on `serve --env audit`): start a campaign, work each period's four specialist
// tasks (documents, active instructions, findings), watch shocks fire, review as the overseer,
// advance the period and read the guarded campaign score. Routes: /campaign/*, /overseer/review.
import { api } from "./api.js";
import { h, append, replace, num, table, kv, errorBox } from "./dom.js";
import { bars } from "./charts.js";

const ROLES = ["expense_specialist", "invoice_specialist", "gst_specialist", "fraud_specialist"];
let C = null; // campaign state of this page

// The document id column of each task (the task descriptions name them).
const PRIMARY_IDS = ["expense_id", "invoice_id", "invoice_no", "txn_id"];

export function docIds(docs) {
  const ids = [];
  for (const rows of Object.values(docs || {}).filter(Array.isArray)) {
    const key = rows[0] && typeof rows[0] === "object" ? PRIMARY_IDS.find((k) => k in rows[0]) : null;
    if (key) ids.push(...rows.map((r) => r[key]));
  }
  return [...new Set(ids.filter(Boolean))];
}

export function docTables(docs) {
  return Object.entries(docs || {}).map(([name, v]) => h("details", { class: "panel", open: Array.isArray(v) && v.length <= 12 },
    h("summary", {}, `${name} (${Array.isArray(v) ? `${v.length} rows` : "record"})`),
    Array.isArray(v) && v.length && typeof v[0] === "object"
      ? table(Object.keys(v[0]), v.map((r) => Object.values(r).map((x) => (typeof x === "object" && x !== null ? JSON.stringify(x) : String(x)))), { class: "compact" })
      : typeof v === "object" && !Array.isArray(v) ? kv(v) : h("pre", {}, JSON.stringify(v, null, 2))));
}


/** A list the observation carries under `metadata` (where the reference's typed client expects
 *  our additions), or at top level from older servers. */
export function metaList(po, key) {
  return po[key] || (po.metadata || {})[key] || [];
}

function roleCard(role, rerender) {
  const r = C.roles[role] || {};
  const po = r.task && r.task.observation && r.task.observation.period_observation;
  const card = h("section", { class: "panel role-card", dataset: { role } }, h("h4", {}, role.replace("_", " ")));
  if (r.submit) {
    const g = r.submit.grader || {};
    const shock = r.submit.shock;
    append(card, h("p", {}, r.submit.grader ? `Submitted ${r.findings.length} finding(s) · grade: weighted ${num(g.weighted_score, 2)} · F1 ${num(g.partial_credit_f1, 2)} · precision ${num(g.precision, 2)} · recall ${num(g.recall, 2)}` : `Submitted ${r.findings.length} finding(s) · not graded yet`),
      shock ? h("p", { class: "shock" }, `Shock fired: ${typeof shock === "object" ? `${shock.id || ""}: ${shock.text || shock.description || JSON.stringify(shock)}` : shock}`) : null,
      r.submit.deferred ? h("p", { class: "shock" }, "Final submission was deferred by a shock: submit again.") : null,
      r.findings.length ? table(["document", "type", "confidence"], r.findings.map((f) => [f.document_id, f.error_type, num(f.confidence, 2)]), { class: "compact" }) : null);
    if (!r.submit.deferred) return card;
  }
  if (!po) {
    const i = ROLES.indexOf(role);
    const ready = ROLES.slice(0, i).every((x) => C.roles[x] && C.roles[x].submit && !C.roles[x].submit.deferred);
    append(card, h("button", { type: "button", class: "start-task", disabled: !ready, onclick: async () => {
      try { C.roles[role] = { task: await api("/campaign/task/start", { body: { campaign_id: C.id, role } }), findings: [] }; C.error = null; } catch (e) { C.error = e; }
      rerender();
    } }, `Start ${role.replace("_", " ")} task`));
    return card;
  }
  const ids = docIds(po.documents);
  const docSel = h("select", { name: "document_id", "aria-label": "document" }, ids.map((d) => h("option", { value: d }, d)));
  const typeSel = h("select", { name: "error_type", "aria-label": "error type" }, metaList(po, "valid_error_types").map((t) => h("option", { value: t }, t)));
  const conf = h("input", { type: "number", name: "confidence", min: 0, max: 1, step: 0.05, value: "0.7", "aria-label": "confidence" });
  const add = h("button", { type: "button", class: "add-finding", onclick: () => { r.findings.push({ document_id: docSel.value, error_type: typeSel.value, confidence: Number(conf.value) }); rerender(); } }, "Add finding");
  const submit = h("button", { type: "button", class: "submit-findings", onclick: async () => {
    try {
      r.submit = await api("/campaign/task/submit", { body: { campaign_id: C.id, role, findings: r.findings } });
      // A deferred submission comes back with the episode's updated context (rate notices, ...).
      if (r.submit.deferred && r.submit.observation && r.submit.observation.period_observation) r.task.observation = r.submit.observation;
      C.error = null;
    } catch (e) { C.error = e; }
    rerender();
  } }, "Submit findings (final)");
  append(card, h("p", { class: "muted" }, `${po.task_id} · step ${po.step_number} / ${po.max_steps} · ${po.feedback.split("\n")[0]}`),
    metaList(po, "notices").length ? h("ul", {}, metaList(po, "notices").map((n) => h("li", { class: "shock" }, typeof n === "string" ? n : JSON.stringify(n)))) : null,
    h("details", {}, h("summary", {}, "Task description"), h("p", {}, po.task_description)),
    docTables(po.documents),
    h("div", { class: "start" }, docSel, typeSel, conf, add),
    r.findings.length ? h("ul", {}, r.findings.map((f, i) => h("li", {}, `${f.document_id} · ${f.error_type} · ${f.confidence} `, h("button", { type: "button", class: "link", onclick: () => { r.findings.splice(i, 1); rerender(); } }, "remove")))) : null,
    submit);
  return card;
}

function overseerPanel(rerender) {
  const done = ROLES.every((r) => C.roles[r] && C.roles[r].submit && !C.roles[r].submit.deferred);
  const findings = ROLES.flatMap((role) => ((C.roles[role] || {}).findings || []).map((f) => ({ ref: `${role}:${f.document_id}:${f.error_type}`, ...f })));
  const sels = findings.map((f) => h("select", { "aria-label": `verdict for ${f.ref}`, dataset: { ref: f.ref } }, ["approve", "reject", "escalate"].map((v) => h("option", { value: v }, v))));
  const review = h("button", { type: "button", id: "overseer-review", disabled: !done, onclick: async () => {
    try { C.review = await api("/overseer/review", { body: { campaign_id: C.id, action: { decisions: sels.map((s) => ({ finding_ref: s.dataset.ref, verdict: s.value })) } } }); C.error = null; } catch (e) { C.error = e; }
    rerender();
  } }, "Submit overseer review");
  const advance = h("button", { type: "button", id: "advance", disabled: !done, onclick: async () => {
    try {
      const adv = await api("/campaign/period/advance", { body: { campaign_id: C.id } });
      C.periods.push({ period: C.obs.current_period, score: adv.period_score, review: C.review });
      C.obs = adv.observation; C.roles = {}; C.review = null; C.total = adv.score;
      C.state = await api(`/campaign/state/${encodeURIComponent(C.id)}`);
      C.report = await api(`/overseer/report?campaign_id=${encodeURIComponent(C.id)}`);
      C.error = null;
    } catch (e) { C.error = e; }
    rerender();
  } }, "Advance period");
  const res = C.review && C.review.result;
  return h("section", { class: "panel" }, h("h3", {}, "Overseer"),
    done ? null : h("p", { class: "muted" }, "The overseer reviews once all four specialists have submitted."),
    findings.length ? table(["finding", "verdict"], findings.map((f, i) => [f.ref, sels[i]]), { class: "compact" }) : h("p", { class: "muted" }, "No findings to review."),
    review, " ", advance,
    res ? h("p", { id: "review-result" }, `Reviewed: ${res.accepted} accepted, ${res.rejected} rejected, ${res.escalated} escalated, ${res.conflicts_detected.length} conflicts detected.`) : null,
    res && res.decisions.length ? table(["finding", "verdict", "document exists", "type valid for role"], res.decisions.map((d) => [d.finding_ref, d.verdict, d.document_exists ? "yes" : "no", d.type_valid_for_role ? "yes" : "no"]), { class: "compact", id: "review-decisions" }) : null);
}

function scorePanel() {
  if (!C.periods.length) return null;
  const last = C.periods[C.periods.length - 1].score || {};
  return h("section", { class: "panel", id: "campaign-score" }, h("h3", {}, `Campaign score ${num(C.total, 2)} (guarded)`),
    table(["period", "score", "raw", "core", "bonus (capped)", "floor", "critical miss"], C.periods.map((p) => [String(p.period), num(p.score.score, 2), num(p.score.raw_score, 4), num(p.score.core_component, 4), num(p.score.bonus_component_capped, 4), p.score.specialist_floor_triggered ? "yes" : "no", p.score.critical_missed ? "yes ×0.5" : "no"]), { class: "compact" }),
    C.report ? h("p", {}, `Shocks applied so far: ${(C.report.regulatory_shocks_applied || []).map((s) => (typeof s === "string" ? s : s.id || JSON.stringify(s))).join(", ") || "none"} · overseer reviews: ${Object.keys(C.report.reviews || {}).length}`) : null,
    last.components ? bars(`Period ${C.periods.length} components`, Object.entries(last.components).map(([k, v]) => ({ label: k, value: v })), { max: 1 }) : null);
}

function render(view) {
  const rerender = () => render(view);
  if (!C) {
    const seed = h("input", { type: "number", id: "campaign-seed", value: "42", "aria-label": "seed" });
    const periods = h("input", { type: "number", id: "campaign-periods", value: "5", min: 1, max: 5, "aria-label": "periods" });
    const form = h("form", { class: "start" }, h("label", { for: "campaign-seed" }, "seed"), seed, h("label", { for: "campaign-periods" }, "periods"), periods, h("button", { type: "submit", id: "start-campaign" }, "Start campaign"));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        const r = await api("/campaign/start", { body: { seed: Number(seed.value), total_periods: Number(periods.value) } });
        C = { id: r.campaign_id, obs: r.observation, roles: {}, periods: [], review: null, total: null };
        rerender();
      } catch (err) {
        view.append(errorBox(err));
      }
    });
    return replace(view, h("h2", {}, "Audit campaigns"), form);
  }
  const ws = C.obs.world_state || {};
  const task = Object.values(C.roles).find((r) => r.task);
  const instructions = task ? task.task.active_instructions : [];
  const shocks = task ? task.task.pending_regulatory_shocks : C.obs.pending_regulatory_shocks;
  replace(view, h("h2", {}, `Campaign ${C.id}`),
    C.error ? errorBox(C.error) : null,
    C.obs.finished ? h("p", { class: "ok" }, "Campaign finished.") : h("p", {}, `Period ${C.obs.current_period} of ${C.obs.total_periods} · ${ws.current_date} · policy v${ws.policy_version} · meal limit ₹${ws.meal_limit_inr} · budget ${num(C.obs.budget_remaining, 1)}`),
    (C.obs.active_alerts || []).length ? h("ul", {}, C.obs.active_alerts.map((a) => h("li", { class: "shock" }, typeof a === "string" ? a : JSON.stringify(a)))) : null,
    h("div", { class: "two" },
      h("section", { class: "panel" }, h("h3", {}, `Active instructions (${instructions.length})`), instructions.length ? table(["id", "bucket", "instruction"], instructions.map((i) => [i.id, i.bucket, i.text]), { class: "compact" }) : h("p", { class: "muted" }, "Start a task to see the instructions in force.")),
      h("section", { class: "panel" }, h("h3", {}, "Regulatory shocks"), (shocks || []).length ? h("ul", {}, shocks.map((s) => h("li", {}, typeof s === "string" ? s : `${s.id || ""} ${s.title || s.description || JSON.stringify(s)}`))) : h("p", { class: "muted" }, "None pending."),
        Object.keys(ws.policy_updates || {}).length || (ws.policy_updates || []).length ? h("details", {}, h("summary", {}, "Policy updates"), h("pre", {}, JSON.stringify(ws.policy_updates, null, 2))) : null)),
    C.obs.finished ? null : h("div", { class: "audit-grid" }, ROLES.map((r) => roleCard(r, rerender))),
    C.obs.finished ? null : overseerPanel(rerender),
    scorePanel());
}

export async function mount(view) {
  render(view);
}
