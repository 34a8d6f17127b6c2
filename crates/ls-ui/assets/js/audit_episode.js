// One audit episode (on `serve --env audit`): reset a task by id and seed (`POST /reset`), read its
// documents, add findings and submit them (`POST /step` with `submit_final`), then read the grade.
// A held-out seed keeps its grade sealed for the evaluator: the page says so instead of a grade.
import { api } from "./api.js";
import { h, replace, num, table, errorBox, randomId } from "./dom.js";
import { docIds, docTables, metaList } from "./audit.js";

const TASKS = ["expense_audit", "invoice_match", "gst_reconciliation", "fraud_detection"];
let E = null; // this page's episode
let choice = { task: TASKS[0], seed: 7 }; // the last task and seed started, kept in the form

function startForm(rerender) {
  const task = h("select", { id: "episode-task", "aria-label": "task" }, TASKS.map((t) => h("option", { value: t }, t)));
  task.value = choice.task;
  const seed = h("input", { type: "number", id: "episode-seed", value: String(choice.seed), min: 0, "aria-label": "seed" });
  const form = h("form", { class: "start" }, h("label", { for: "episode-task" }, "task"), task, h("label", { for: "episode-seed" }, "seed"), seed,
    h("button", { type: "submit", id: "start-episode" }, "Start episode"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const session = randomId("ui-audit");
    choice = { task: task.value, seed: Number(seed.value) };
    try {
      const r = await api("/reset", { body: { task_id: task.value, seed: Number(seed.value) }, session });
      E = { session, obs: r.observation, findings: [], reply: null, error: null };
    } catch (err) {
      E = { error: err };
    }
    rerender();
  });
  return form;
}

function gradePanel() {
  const r = E && E.reply;
  if (!r) return null;
  const info = r.info || {};
  if (!r.grader) {
    return h("section", { class: "panel", id: "episode-grade" }, h("h3", {}, `Episode finished · reward ${num(r.reward, 4)}`),
      h("p", { class: "notice", id: "episode-sealed" }, info.grade_sealed ? "This is a held-out seed: the grade is sealed for the evaluator (GET /grader with the operator key), not shown to the agent." : "No grade came back."));
  }
  const g = r.grader;
  const rows = [["weighted score", num(g.weighted_score, 4)], ["F1 (partial credit)", num(g.partial_credit_f1, 4)], ["precision", num(g.precision, 4)], ["recall", num(g.recall, 4)]];
  return h("section", { class: "panel", id: "episode-grade" }, h("h3", {}, `Grade · reward ${num(r.reward, 4)}`),
    table(["measure", "value"], rows, { class: "compact grade-table" }),
    Array.isArray(g.missed_errors) && g.missed_errors.length ? h("p", {}, `Missed: ${g.missed_errors.length} error(s).`) : null,
    (info.warnings || []).length ? h("ul", {}, info.warnings.map((w) => h("li", { class: "shock" }, w))) : null);
}

function findingForm(rerender) {
  const po = E.obs;
  const docSel = h("select", { name: "document_id", id: "episode-doc", "aria-label": "document" }, docIds(po.documents).map((d) => h("option", { value: d }, d)));
  const typeSel = h("select", { name: "error_type", id: "episode-type", "aria-label": "error type" }, metaList(po, "valid_error_types").map((t) => h("option", { value: t }, t)));
  const conf = h("input", { type: "number", name: "confidence", min: 0, max: 1, step: 0.05, value: "0.8", "aria-label": "confidence" });
  const add = h("button", { type: "button", id: "episode-add", onclick: () => { E.findings.push({ document_id: docSel.value, error_type: typeSel.value, confidence: Number(conf.value) }); rerender(); } }, "Add finding");
  const submit = h("button", { type: "button", id: "episode-submit", onclick: async () => {
    try {
      E.reply = await api("/step", { body: { action: { findings: E.findings, submit_final: true } }, session: E.session });
      E.obs = E.reply.observation;
      E.error = null;
    } catch (err) { E.error = err; }
    rerender();
  } }, "Submit findings (final)");
  return h("section", { class: "panel" }, h("h3", {}, "Findings"),
    h("div", { class: "start" }, docSel, typeSel, conf, add),
    E.findings.length ? table(["document", "type", "confidence", ""], E.findings.map((f, i) => [f.document_id, f.error_type, num(f.confidence, 2),
      h("button", { type: "button", class: "link", onclick: () => { E.findings.splice(i, 1); rerender(); } }, "remove")]), { class: "compact", id: "episode-findings" }) : h("p", { class: "muted" }, "No findings yet."),
    submit);
}

function render(view) {
  const rerender = () => render(view);
  const po = E && E.obs;
  replace(view, h("h2", {}, "Audit episode"),
    h("p", { class: "muted" }, "One task, one episode: the single-episode protocol agents play (POST /reset, POST /step). Campaigns chain the four tasks over periods."),
    startForm(rerender),
    E && E.error ? errorBox(E.error) : null,
    po ? h("p", { class: "instruction", id: "episode-head" }, h("b", {}, `${po.task_id} · step ${po.step_number} / ${po.max_steps} · `), po.task_description) : null,
    po && !po.done ? findingForm(rerender) : null,
    gradePanel(),
    po ? docTables(po.documents) : null);
}

export async function mount(view) {
  render(view);
}
