// Play: start a case, call tools and interventions from forms, watch meters, the artifact
// timeline and pressure events, then submit a decision whose evidence is chosen by clicking OCR
// tokens. The grade (score breakdown, certificate, TrustGraph) appears only after the terminal step.
import { api, catalog, mcpTools, operatorKey } from "./api.js";
import { h, replace, meter, num, errorBox, randomId, table } from "./dom.js";
import { clockline } from "./charts.js";
import { DocState, renderDocs } from "./docview.js";
import { renderGrade } from "./grade.js";
import { contractFields, contractClaims, readSubmission } from "./submitform.js";
import { instrumentedPanel } from "./instrumented.js";
import { resultsPanel, collectIds } from "./results.js";

let S = null; // this page's play state
// A fresh state has no ids seen yet.
function idsSeen() { return (S && S.ids) || {}; }
// One session for the whole page visit: its institutional memory carries across episodes like an
// AP week. `history` keeps each graded episode's authority level and loss score for Institution.
let SESSION = randomId("ui-play");
export const history = [];
// Which tool controls are open, and what was typed in them, across re-renders.
const openTools = new Set();
const toolValues = {};

/** The session Play uses (Institution reads its memory). */
export function playSession() {
  return SESSION;
}

/** Start a new session (fresh institutional memory). */
export function newSession() {
  SESSION = randomId("ui-play");
  history.length = 0;
  S = null;
}

function fresh() {
  return { session: SESSION, env: null, steps: [], docs: new DocState(), evidence: {}, claim: "", done: false, pressure: [], results: [], form: { ids: {}, suggest: {}, lineRows: 1 } };
}

/** The form input for one payload property of a tool's JSON schema. */
function field(tool, name, prop, required) {
  const id = `f-${tool}-${name}`;
  let input;
  const docs = S.env ? S.env.observation.visible_documents : [];
  const docIds = docs.map((d) => d.doc_id);
  if (prop.enum) {
    input = h("select", { id, name }, required ? null : h("option", { value: "" }, "—"), prop.enum.map((v) => h("option", { value: v }, v)));
  } else if (name === "doc_id" || name === "thread_id") {
    input = h("select", { id, name }, optionIds(name, docs).map((d) => h("option", { value: d }, d)));
    if (name === "doc_id" && S.docs.selected) input.value = S.docs.selected;
  } else if (prop.type === "array") {
    input = h("input", { id, name, placeholder: "x0,y0,x1,y1", dataset: { kind: "array" } });
  } else if (prop.type === "integer" || prop.type === "number") {
    input = h("input", { id, name, type: "number", step: prop.type === "integer" ? 1 : "any", dataset: { kind: prop.type } });
  } else {
    const seen = idsSeen()[name] || [];
    input = h("input", { id, name, type: "text", list: seen.length ? `dl-${tool}-${name}` : null });
    if (seen.length) return h("div", { class: "field" }, h("label", { for: id, title: prop.description || "" }, name + (required ? " *" : "")), input,
      h("datalist", { id: `dl-${tool}-${name}` }, seen.map((v) => h("option", { value: v }))));
  }
  return h("div", { class: "field" }, h("label", { for: id, title: prop.description || "" }, name + (required ? " *" : "")), input);
}

/** The ids a document selector offers, in order: for `thread_id` the e-mail threads first (so
 *  the default is a thread, not the invoice, which `inspect_email_thread` cannot open), then the
 *  other documents; for `doc_id` every document in catalogue order. */
export function optionIds(name, docs) {
  const ids = docs.map((d) => d.doc_id);
  if (name !== "thread_id") return ids;
  const threads = docs.filter((d) => /email|thread/i.test(d.doc_type || "")).map((d) => d.doc_id);
  return [...threads, ...ids.filter((d) => !threads.includes(d))];
}

function readPayload(form) {
  const payload = {};
  for (const el of form.elements) {
    if (!el.name || el.value === "") continue;
    if (el.dataset.kind === "array") payload[el.name] = el.value.split(",").map((x) => Number(x.trim()));
    else if (el.dataset.kind === "integer" || el.dataset.kind === "number") payload[el.name] = Number(el.value);
    else payload[el.name] = el.value;
  }
  return payload;
}

function toolControl(tool, cost, kind, rerender) {
  const props = (tool.inputSchema || tool.input_schema || {}).properties || {};
  const req = new Set((tool.inputSchema || tool.input_schema || {}).required || []);
  const form = h("form", { class: "tool-form", dataset: { tool: tool.name } },
    Object.entries(props).map(([n, p]) => field(tool.name, n, p, req.has(n))),
    h("button", { type: "submit", disabled: S.done || !S.env }, `Run ${tool.name}`));
  for (const el of form.elements) {
    const saved = (toolValues[tool.name] || {})[el.name];
    if (el.name && saved !== undefined) el.value = saved;
  }
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    toolValues[tool.name] = Object.fromEntries([...form.elements].filter((el) => el.name).map((el) => [el.name, el.value]));
    await step(tool.name, readPayload(form), rerender);
  });
  const ontoggle = (e) => { if (e.target.open) openTools.add(tool.name); else openTools.delete(tool.name); };
  return h("details", { class: `tool ${kind}`, open: openTools.has(tool.name), ontoggle }, h("summary", {}, h("span", { class: "tool-name" }, tool.name), h("span", { class: "cost" }, `cost ${cost}`)), form);
}

async function step(actionType, payload, rerender) {
  try {
    const env = await api("/step", { body: { action_type: actionType, payload }, session: S.session });
    S.lastPayload = payload;
    S.env = env;
    const info = env.info || {};
    const rm = info.reward_model || {};
    S.steps.push({ n: env.observation.step_count, actionType, payload, reward: env.reward, components: rm.components || rm, success: (env.observation.last_tool_result || {}).success, done: env.done });
    S.docs.setCatalog(env.observation.visible_documents);
    S.docs.absorb(actionType, payload, env.observation.last_tool_result);
    if (actionType !== "submit_decision") S.results.push({ n: env.observation.step_count, actionType, result: env.observation.last_tool_result });
    S.ids = collectIds(S.results);
    S.form.suggest = { duplicate_links: S.ids.ledger_id || [], cross_invoice_links: [...(S.docs.docs || []).filter((d) => /invoice/i.test(d.doc_type)).map((d) => d.doc_id), ...(S.ids.invoice_number || [])] };
    notice(env.observation);
    S.done = env.done;
    if (env.terminated && info.institutional_memory) {
      const m = info.institutional_memory;
      history.push({ n: history.length + 1, case_id: env.observation.case_id, authority_level: m.authority_level, loss_score: (m.controlbench_summary || {}).institutional_loss_score ?? (m.loss_ledger || {}).institutional_loss_score, final_score: info.final_score });
    }
    S.error = null;
  } catch (e) {
    S.error = e;
  }
  rerender();
}

/** After the grade: store this hand-played episode as a run (`POST /hand-runs`, an operator
 *  route); the stored run is listed on Replay and replays like any run. */
function storePanel(rerender) {
  if (!operatorKey()) return h("p", { class: "muted", id: "store-needs-key" }, "Storing a hand-played episode as a run is an operator action: open the workbench with ?token=<operator key>.");
  if (S.stored) {
    return h("p", { class: "ok", id: "stored-run" }, `Stored as run ${S.stored.run_id} (score ${num(S.stored.final_score, 4)} when its actions were played again in a fresh institution). `,
      h("a", { href: S.stored.replay, id: "stored-run-link" }, "Replay it"));
  }
  const btn = h("button", { type: "button", id: "store-run" }, "Store this episode as a run");
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    try {
      S.stored = await api("/hand-runs", { body: {}, session: S.session });
      S.error = null;
    } catch (e) {
      S.error = e;
    }
    rerender();
  });
  return h("p", { id: "store-run-box" }, btn);
}

/** Record the step's messages, and flag pressure events and documents that arrive mid-episode. */
function notice(obs) {
  const step = obs.step_count;
  const seen = obs.risk_snapshot.pressure_events_seen;
  if (seen > (S.pressureSeen || 0)) S.pressure.push({ step, text: `Pressure event arrived (${seen} so far)`, cls: "shock" });
  S.pressureSeen = seen;
  const known = S.knownDocs || new Set();
  for (const d of obs.visible_documents) {
    if (S.knownDocs && !known.has(d.doc_id)) S.pressure.push({ step, text: `New document arrived: ${d.doc_id} (${d.doc_type})`, cls: "shock" });
    known.add(d.doc_id);
  }
  S.knownDocs = known;
  for (const m of obs.messages || []) S.pressure.push({ step, text: m });
}

/** The episode's benchmark track and mode (from the observation's case metadata). */
function trackLine(obs) {
  const m = obs.case_metadata || {};
  return h("p", { class: "track-line", id: "episode-track" }, h("b", {}, "Track: "), `${m.benchmark_track_label || m.benchmark_track || "—"} (${m.benchmark_track || "?"}) · mode ${m.track_mode || "?"}`,
    m.benchmark_track_description ? h("span", { class: "muted" }, ` — ${m.benchmark_track_description}`) : null);
}

function meters(obs) {
  return h("section", { class: "meters", "aria-label": "Budget, steps and clock" },
    meter("Budget", obs.budget_remaining, obs.budget_total, `${num(obs.budget_remaining)} / ${num(obs.budget_total)} left`),
    meter("Steps", obs.step_count, obs.max_steps, `${obs.step_count} / ${obs.max_steps}`),
    meter("Case clock", obs.case_clock, Math.max(obs.risk_snapshot.days_until_due || 0, obs.case_clock, 1), `clock ${obs.case_clock}, due in ${obs.risk_snapshot.days_until_due} days`));
}

function timelinePanel(obs) {
  const pending = obs.pending_events.map((p) => h("li", { class: "pending" }, `⏳ ${p.artifact_id} (from ${p.source_action}) ready at clock ${p.ready_at_clock} · ${p.status}`));
  const arrived = obs.revealed_artifacts.map((a) => h("li", { class: "arrived" }, h("details", {}, h("summary", {}, `✔ ${a.artifact_id || a.id || "artifact"}`), h("pre", {}, JSON.stringify(a, null, 2)))));
  const items = [
    ...obs.revealed_artifacts.map((a) => ({ label: a.artifact_id, at: a.revealed_at_clock, arrived: true })),
    ...obs.pending_events.map((p) => ({ label: p.artifact_id, at: p.ready_at_clock, arrived: false })),
  ];
  return h("section", { class: "panel", "aria-label": "Artifact timeline" }, h("h3", {}, "Artifacts"),
    items.length ? clockline("Artifacts on the case clock", obs.case_clock, items) : null,
    h("ol", { class: "timeline" }, pending.length || arrived.length ? [...arrived, ...pending] : h("li", { class: "muted" }, "No artifacts requested yet.")),
    h("h3", {}, "Pressure & messages"),
    h("ol", { class: "pressure" }, S.pressure.length ? S.pressure.map((p) => h("li", { class: p.cls || null }, `step ${p.step}: ${p.text}`)) : h("li", { class: "muted" }, "None yet.")),
    h("p", { class: "muted" }, `Observed signals: ${obs.risk_snapshot.observed_signals.join(", ") || "none"} · pressure events seen: ${obs.risk_snapshot.pressure_events_seen}`));
}

function stepLog() {
  return h("section", { class: "panel", "aria-label": "Steps and rewards" }, h("h3", {}, "Steps"),
    S.steps.length ? table(["#", "action", "reward", "components"], S.steps.map((st) => [
      String(st.n), `${st.actionType}${st.success === false ? " (failed)" : ""}`, num(st.reward, 4),
      h("span", { class: "components" }, Object.entries(st.components || {}).filter(([, v]) => typeof v === "number").map(([k, v]) => `${k} ${num(v, 3)}`).join(" · ")),
    ]), { class: "steps" }) : h("p", { class: "muted" }, "No steps yet."));
}

function toggleToken(docId, t) {
  if (!S.claim) return;
  const ev = S.evidence[S.claim];
  if (ev && ev.doc_id === docId) {
    const i = ev.token_ids.indexOf(t.token_id);
    if (i >= 0) { ev.token_ids.splice(i, 1); ev.tokens.splice(i, 1); } else { ev.token_ids.push(t.token_id); ev.tokens.push(t); }
    if (!ev.token_ids.length) delete S.evidence[S.claim];
  } else {
    S.evidence[S.claim] = { doc_id: docId, page: t.page || 1, token_ids: [t.token_id], tokens: [t] };
  }
}

function evidenceRef(ev) {
  const b = ev.tokens.map((t) => t.bbox.map(Number));
  const bbox = [Math.min(...b.map((x) => x[0])), Math.min(...b.map((x) => x[1])), Math.max(...b.map((x) => x[2])), Math.max(...b.map((x) => x[3]))];
  return { doc_id: ev.doc_id, page: ev.page, bbox, token_ids: [...ev.token_ids] };
}

/** The evidence map as submitted: claim -> {doc_id, page, bbox, token_ids}. */
export function evidenceMap() {
  return Object.fromEntries(Object.entries(S.evidence).map(([k, v]) => [k, evidenceRef(v)]));
}

/** The evidence-map widget: pick a claim, click tokens in the documents. */
function evidenceWidget(claims, rerender) {
  return (f) => {
    const claimSel = h("select", { id: "claim", onchange: (e) => { S.claim = e.target.value; } }, h("option", { value: "" }, "— choose a claim —"), claims.map((c) => h("option", { value: c }, c)));
    claimSel.value = S.claim;
    return h("fieldset", { class: "evidence contract-field" }, h("legend", {}, f.name, f.graded ? h("span", { class: "graded" }, "graded") : null),
      h("p", { class: "help" }, f.description),
      h("div", { class: "field" }, h("label", { for: "claim" }, "claim for clicked tokens"), claimSel),
      h("ul", { id: "evidence-list" }, Object.keys(S.evidence).length ? Object.entries(evidenceMap()).map(([k, v]) => h("li", {}, `${k} → ${v.doc_id} p${v.page} [${v.bbox.join(", ")}] ${v.token_ids.join(", ")} `,
        h("button", { type: "button", class: "link", "aria-label": `remove evidence for ${k}`, onclick: () => { delete S.evidence[k]; rerender(); } }, "remove"))) : h("li", { class: "muted" }, "No evidence chosen.")));
  };
}

/** The decision form of this episode's task family, from its output contract. */
function decisionForm(cat, rerender) {
  const task = S.env.observation.task_type;
  const contract = cat.output_contracts[task];
  if (!contract) return h("p", { class: "error", role: "alert" }, `No output contract for task type ${task}.`);
  const form = h("form", { id: "decision-form", class: "panel", dataset: { task } },
    h("h3", {}, `Decision · ${task} output contract`),
    h("p", { class: "muted" }, "Fields marked graded are read by this family's grade; * is required."),
    h("div", { class: "contract" }, contractFields(contract, S.form, { evidence: evidenceWidget(contractClaims(contract), rerender), rerender })),
    S.formError ? h("p", { class: "error", role: "alert", id: "form-error" }, S.formError) : null,
    h("button", { type: "submit", id: "submit-decision", disabled: S.done || !S.env }, "Submit decision"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    let payload;
    try {
      payload = readSubmission(contract, form, S.form, evidenceMap());
    } catch (err) {
      S.formError = err.message;
      rerender();
      return;
    }
    S.formError = null;
    await step("submit_decision", payload, rerender);
  });
  return form;
}

function startForm(cat, rerender) {
  const mode = h("select", { id: "case-mode", "aria-label": "Case source" }, h("option", { value: "curated" }, "curated case"), h("option", { value: "seeded" }, "seeded pick from the served pool (incl. generated)"));
  const caseSel = h("select", { id: "case-id", "aria-label": "Curated case" }, cat.curated_cases.map((c) => h("option", { value: c.case_id }, `${c.case_id} (${c.task_type})`)));
  const seed = h("input", { id: "seed", type: "number", value: "2026", "aria-label": "Seed" });
  const track = h("select", { id: "track", "aria-label": "Track" }, h("option", { value: "" }, "track: the case's own"),
    (cat.tracks || []).map((t) => h("option", { value: t.track, title: t.description }, t.label)));
  if (S && S.startBody) {
    mode.value = S.startBody.case_id ? "curated" : "seeded";
    if (S.startBody.case_id) caseSel.value = S.startBody.case_id;
    if (S.startBody.seed !== undefined) seed.value = String(S.startBody.seed);
    if (S.startBody.track) track.value = S.startBody.track;
  }
  const form = h("form", { class: "start" }, mode, caseSel, seed, track, h("button", { type: "submit", id: "start" }, "Start episode"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { ...(mode.value === "curated" ? { case_id: caseSel.value } : { seed: Number(seed.value) }), ...(track.value ? { track: track.value } : {}) };
    S = fresh();
    S.startBody = body;
    try {
      S.env = await api("/reset", { body, session: S.session });
      S.docs.setCatalog(S.env.observation.visible_documents);
      notice(S.env.observation);
    } catch (err) {
      S.error = err;
    }
    rerender();
  });
  return form;
}

/** Keep what the user typed in the decision form across re-renders. */
function saveForm() {
  const f = document.getElementById("decision-form");
  if (!f) return null;
  return [...f.elements].filter((e) => e.name).map((e) => [e.name, e.type === "checkbox" ? (e.checked ? e.value : null) : e.value, e.type]);
}

function restoreForm(saved) {
  const f = document.getElementById("decision-form");
  if (!f || !saved) return;
  const checked = new Set(saved.filter(([, v, t]) => t === "checkbox" && v).map(([n, v]) => `${n}=${v}`));
  for (const e of f.elements) {
    if (!e.name) continue;
    if (e.type === "checkbox") e.checked = checked.has(`${e.name}=${e.value}`);
    else {
      const s = saved.find(([n]) => n === e.name);
      if (s) e.value = s[1];
    }
  }
}

export async function mount(view) {
  const [cat, tools] = await Promise.all([catalog(), mcpTools()]);
  const costs = Object.fromEntries(cat.actions.map((a) => [a.name, a]));
  S = S || fresh();
  const rerender = () => {
    const obs = S.env && S.env.observation;
    const docRoot = h("section", { class: "docs", id: "docs", "aria-label": "Documents" });
    const selected = new Set(Object.values(S.evidence).flatMap((e) => e.token_ids));
    const controls = tools.filter((t) => t.name !== "submit_decision");
    const saved = saveForm();
    replace(view,
      h("h2", {}, "Play a case"),
      startForm(cat, rerender),
      S.error ? errorBox(S.error) : null,
      obs ? h("p", { class: "instruction" }, h("b", {}, `${obs.case_id} · ${obs.task_type} · `), obs.instruction) : h("p", { class: "muted" }, "Start an episode to see its documents."),
      obs ? trackLine(obs) : null,
      obs ? meters(obs) : null,
      h("div", { class: "play-grid" },
        h("aside", { class: "controls", "aria-label": "Tools and interventions" },
          ["investigation", "intervention"].map((kind) => h("section", {}, h("h3", {}, kind === "investigation" ? "Tools" : "Interventions"),
            controls.filter((t) => (costs[t.name] || {}).kind === kind).map((t) => toolControl(t, (costs[t.name] || {}).cost ?? "?", kind, rerender))))),
        docRoot,
        h("aside", { class: "side" }, obs ? timelinePanel(obs) : null, stepLog())),
      obs ? h("div", { class: "play-lower" }, instrumentedPanel(obs), S.results.length ? resultsPanel(S.results) : null) : null,
      obs && !S.done ? decisionForm(cat, rerender) : null,
      S.done ? h("section", { id: "grade", class: "panel" }, renderGrade(S.env, S.lastPayload)) : null,
      S.done ? storePanel(rerender) : null);
    restoreForm(saved);
    if (obs) renderDocs(docRoot, S.docs, { selectedIds: selected, onToken: S.done ? null : (d, t) => { toggleToken(d, t); rerender(); }, onSelect: rerender });
  };
  rerender();
}
