// Run an agent: pick a scripted agent (the teacher, a baseline) or the LLM agent with an
// OpenAI-compatible endpoint (URL + model name; the server calls it), and curated cases; each case is
// played on the server by `POST /agent-runs` (an operator route) one at a time, so the table fills
// in as the cases finish. Each result opens to the agent's actions, payloads and rewards and the
// grade, explained as on Play.
import { api, catalog, operatorKey } from "./api.js";
import { h, replace, num, table } from "./dom.js";
import { gradeView } from "./grade.js";

let view = null;
const results = [];

function agentSelect(agents) {
  const names = agents.includes("llm") ? agents : [...agents, "llm"];
  return h("select", { id: "runner-agent", "aria-label": "Agent" }, names.map((a) => h("option", { value: a }, a === "llm" ? "llm (OpenAI-compatible endpoint)" : a)));
}

/** The endpoint fields, shown while the `llm` agent is chosen. */
function llmFields(agent) {
  const url = h("input", { type: "url", id: "runner-llm-url", placeholder: "base URL ending in /v1", size: 36, "aria-label": "endpoint URL" });
  const model = h("input", { type: "text", id: "runner-llm-model", placeholder: "model name", "aria-label": "model name" });
  const box = h("div", { class: "field", id: "runner-llm", hidden: true }, h("label", { for: "runner-llm-url" }, "endpoint"), url, h("label", { for: "runner-llm-model" }, "model"), model,
    h("p", { class: "muted" }, "The server plays the llm agent against this OpenAI-compatible API (POST {endpoint}/chat/completions), one call per decision."));
  const sync = () => { box.hidden = agent.value !== "llm"; };
  agent.addEventListener("change", sync);
  sync();
  return { box, body: () => (agent.value === "llm" ? { llm: { api_base: url.value.trim(), model: model.value.trim() } } : {}) };
}

function caseBoxes(cases) {
  const byTask = {};
  for (const c of cases) (byTask[c.task_type] = byTask[c.task_type] || []).push(c);
  return h("div", { class: "runner-cases" }, Object.entries(byTask).map(([task, list]) => h("fieldset", { class: "codes" }, h("legend", {}, task),
    list.map((c) => h("label", { class: "check" }, h("input", { type: "checkbox", name: "runner-case", value: c.case_id }), c.case_id)))));
}

function resultTable(detail) {
  if (!results.length) return h("p", { class: "muted" }, "No results yet.");
  return table(["agent", "model", "case", "task", "score", "result", "decision", "steps", ""], results.map((r, i) => r.error
    ? [r.agent, "—", r.case_id, "—", "—", h("span", { class: "error" }, r.error), "—", "—", ""]
    : r.pending ? [r.agent, "—", r.case_id, "—", h("span", { class: "muted" }, "running…"), "", "", "", ""]
      : [r.agent, h("span", { class: "model" }, r.model || r.ep.model), r.case_id, r.ep.task_type, h("span", { class: "score" }, num(r.ep.final_score, 4)), r.ep.result_class, r.ep.decision, String(r.ep.steps),
        h("button", { type: "button", class: "link show-run", dataset: { i }, onclick: () => detail(i) }, "show")]), { class: "runner-results", id: "runner-results" });
}

function episodeDetail(ep) {
  const submit = ep.trajectory.find((t) => t.action_type === "submit_decision");
  return h("section", { class: "panel", id: "runner-detail" },
    h("h3", {}, `${ep.agent} on ${ep.case_id}`),
    table(["#", "action", "payload", "reward", "ok"], ep.trajectory.map((t) => [String(t.step), t.action_type,
      h("code", { class: "payload-inline" }, t.action_type === "submit_decision" ? Object.keys(t.payload).join(", ") : JSON.stringify(t.payload)), num(t.reward, 4), t.success ? "✔" : "✘"]), { class: "compact runner-steps" }),
    gradeView(ep.terminal_info, submit ? submit.payload : null));
}

export async function mount(root) {
  view = root;
  const cat = await catalog();
  if (!operatorKey()) {
    replace(view, h("h2", {}, "Run an agent"),
      h("p", { class: "muted", id: "runner-needs-key" }, "Running an agent on the server is an operator action (its submissions are worked answers): open the workbench with ?token=<operator key>."));
    return;
  }
  const agent = agentSelect(cat.agents || []);
  const llm = llmFields(agent);
  const boxes = caseBoxes(cat.curated_cases);
  const out = h("div", { id: "runner-out" });
  const detailBox = h("div");
  const progress = h("p", { id: "runner-progress", "aria-live": "polite" }, "");
  const draw = () => replace(out, resultTable((i) => replace(detailBox, episodeDetail(results[i].ep))));
  const run = h("button", { type: "button", id: "runner-run" }, "Run");
  run.addEventListener("click", async () => {
    const ids = [...boxes.querySelectorAll('input[name="runner-case"]:checked')].map((b) => b.value);
    if (!ids.length) { progress.textContent = "Choose at least one case."; return; }
    run.disabled = true;
    const rows = ids.map((case_id) => ({ agent: agent.value, case_id, pending: true }));
    results.unshift(...rows);
    draw();
    let done = 0;
    for (const row of rows) {
      progress.textContent = `Running ${row.agent} on ${row.case_id} (${done + 1} of ${rows.length})…`;
      try {
        const r = await api("/agent-runs", { body: { agent: row.agent, case_ids: [row.case_id], ...llm.body() } });
        row.ep = r.episodes[0];
        row.model = r.model;
      } catch (e) {
        row.error = String(e.message || e);
      }
      row.pending = false;
      done += 1;
      draw();
    }
    progress.textContent = `Done: ${done} case${done === 1 ? "" : "s"}.`;
    run.disabled = false;
  });
  replace(view, h("h2", {}, "Run an agent"),
    h("p", { class: "muted" }, "A scripted agent, or the llm agent against your endpoint, plays each chosen case on the server, each in a fresh institution; results appear as each case finishes. Nothing is stored (use `ledgershield run --url` for a stored run)."),
    h("div", { class: "panel runner-form" }, h("div", { class: "field" }, h("label", { for: "runner-agent" }, "agent"), agent), llm.box, boxes, run, progress),
    out, detailBox);
  draw();
}
