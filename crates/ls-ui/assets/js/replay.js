// Replay: stored runs → episodes → a step-by-step replay in the document view. A stored episode
// keeps the agent's actions and rewards; the replay plays those actions again in a fresh session
// (same case, same actions: the environment is deterministic), so each step shows what the agent
// saw. Each replayed reward is compared with the stored one and any difference is flagged. A case
// this server does not serve (a generated holdout or twin suite played in-process) cannot be played
// again: its replay steps through the stored record (actions, payloads, rewards, the grade) and
// says so. Runs and episodes have links: `#replay/<run>` and `#replay/<run>/<episode>`.
import { api, operatorKey } from "./api.js";
import { h, replace, num, table, errorBox, randomId, kv } from "./dom.js";
import { DocState, renderDocs } from "./docview.js";
import { gradeView } from "./grade.js";

let view = null;
// Click handlers are async: a failed request shows its error in the page instead of escaping as
// an unhandled rejection.
const safe = (fn) => (...args) => fn(...args).catch((e) => replace(view, errorBox(e)));

async function runsList() {
  if (!operatorKey()) {
    replace(view, h("h2", {}, "Stored runs"),
      h("p", { class: "muted", id: "replay-needs-key" }, "Stored runs are an operator view: open the workbench with ?token=<operator key> (the key file the server printed at start, or ADMIN_API_KEY)."));
    return;
  }
  const data = await api("/runs?limit=100");
  const picked = new Set();
  const compareBtn = h("button", { type: "button", id: "compare", disabled: true, onclick: () => safe(compare)([...picked]) }, "Compare the two selected runs");
  const rows = data.runs.map((r) => [
    h("input", { type: "checkbox", "aria-label": `select ${r.run_id} for comparison`, onchange: (e) => { if (e.target.checked) picked.add(r.run_id); else picked.delete(r.run_id); compareBtn.disabled = picked.size !== 2; } }),
    h("a", { class: "open-run", href: `#replay/${encodeURIComponent(r.run_id)}`, dataset: { run: r.run_id } }, r.run_id),
    r.agent, r.model, r.suite || "—", String(r.case_count), num(r.mean_score, 4), r.created_at]);
  replace(view, h("h2", {}, "Stored runs"),
    data.runs.length ? [table(["", "run", "agent", "model", "suite", "cases", "mean", "date"], rows, { class: "runs" }), compareBtn]
      : h("p", { class: "muted" }, data.note || "No stored runs. Create one with `ledgershield run --agent teacher --url <this server>`."));
}

async function openRun(runId) {
  const data = await api(`/runs/${encodeURIComponent(runId)}`);
  const r = data.run;
  replace(view, h("p", {}, h("a", { href: "#replay" }, "← all runs")),
    h("h2", {}, `Run ${r.run_id}`), kv({ agent: r.agent, model: r.model, agent_type: r.agent_type, suite: r.suite, seed: r.seed, mean_score: r.mean_score, created_at: r.created_at }),
    table(["#", "case", "task", "score", "result", "decision", "steps", "reward", ""], data.episodes.map((e) => [String(e.idx), e.case_id, e.task_type, num(e.final_score, 4), e.result_class, e.decision, String(e.steps), num(e.total_reward, 3),
      h("a", { class: "replay-ep button", href: `#replay/${encodeURIComponent(runId)}/${e.idx}`, dataset: { idx: e.idx } }, "Replay")]), { class: "episodes" }));
}

/** Play the stored actions again in a fresh session; returns the envelopes (reset first), or
 *  null when this server does not serve the case. */
async function reenact(record) {
  const session = randomId("ui-replay");
  let first;
  try {
    first = await api("/reset", { body: { case_id: record.case_id, ...(record.initial_observation && record.initial_observation.benchmark_track ? { track: record.initial_observation.benchmark_track } : {}) }, session });
  } catch (e) {
    if (e.body && e.body.error && /unknown case_id/i.test(e.body.error.message || "")) return null;
    throw e;
  }
  const envs = [first];
  for (const st of record.trajectory) {
    try {
      envs.push(await api("/step", { body: { action_type: st.action_type, payload: st.payload }, session }));
    } catch (e) {
      envs.push({ error: String(e.message || e) });
      break;
    }
  }
  return envs;
}

async function replayEpisode(runId, idx) {
  replace(view, h("p", { class: "muted" }, "Replaying the stored actions…"));
  const { record } = await api(`/runs/${encodeURIComponent(runId)}/episodes/${idx}`);
  const replayed = await reenact(record);
  const stored = replayed === null;
  // Without a served case, each step shows the stored action and reward only.
  const envs = stored ? [{ observation: null }, ...record.trajectory.map((t) => ({ observation: null, reward: t.reward }))] : replayed;
  let at = 0;
  const stage = h("div", { id: "replay-stage" });
  const slider = h("input", { type: "range", id: "replay-slider", min: 0, max: record.trajectory.length, value: 0, "aria-label": "Replay step" });
  const prev = h("button", { type: "button", id: "replay-prev" }, "◀ Previous");
  const next = h("button", { type: "button", id: "replay-next" }, "Next ▶");
  const go = (i) => { at = Math.max(0, Math.min(record.trajectory.length, i)); slider.value = at; draw(); };
  prev.addEventListener("click", () => go(at - 1));
  next.addEventListener("click", () => go(at + 1));
  slider.addEventListener("input", () => go(Number(slider.value)));
  const draw = () => {
    const docs = new DocState();
    for (let i = 0; i <= at && i < envs.length; i++) {
      const env = envs[i];
      if (!env.observation) continue;
      docs.setCatalog(env.observation.visible_documents);
      if (i > 0) docs.absorb(record.trajectory[i - 1].action_type, record.trajectory[i - 1].payload, env.observation.last_tool_result);
    }
    const env = envs[Math.min(at, envs.length - 1)];
    const st = at > 0 ? record.trajectory[at - 1] : null;
    const obs = env.observation;
    const diverged = st && env.reward !== undefined && Math.abs(env.reward - st.reward) > 1e-9;
    const docRoot = h("section", { class: "docs" });
    const terminal = at === record.trajectory.length && st && st.done;
    replace(stage,
      h("p", { id: "replay-pos" }, `Step ${at} of ${record.trajectory.length}`),
      env.error ? errorBox(env.error) : null,
      st ? h("section", { class: "panel" }, h("h3", {}, `Agent did: ${st.action_type}`), h("pre", { class: "payload" }, JSON.stringify(st.payload, null, 2)),
        stored ? h("p", { class: "muted", id: "replay-check" }, `stored reward ${num(st.reward, 4)} (stored record: not re-run)`)
          : h("p", { class: diverged ? "error" : "ok", id: "replay-check" }, `stored reward ${num(st.reward, 4)} · replayed ${num(env.reward, 4)}${diverged ? " · DIVERGED: this server's case or settings differ from the run's" : " · matches"}`))
        : h("p", { class: "muted" }, "Initial observation (after reset)."),
      obs ? h("p", { class: "muted" }, `budget ${num(obs.budget_remaining)} / ${num(obs.budget_total)} · step ${obs.step_count} / ${obs.max_steps} · clock ${obs.case_clock} · pending ${obs.pending_events.length} · arrived ${obs.revealed_artifacts.length}`) : null,
      obs && obs.messages.length ? h("ul", { class: "pressure" }, obs.messages.map((m) => h("li", {}, m))) : null,
      docRoot,
      obs ? h("details", {}, h("summary", {}, "What the agent saw: last tool result"), h("pre", {}, JSON.stringify(obs.last_tool_result, null, 2))) : null,
      terminal ? h("section", { class: "panel", id: "replay-grade" }, gradeView(record.terminal_info, st.payload)) : null);
    // At the terminal step, the tokens the agent cited in its evidence map are highlighted.
    const cited = terminal && st.payload.evidence_map ? Object.values(st.payload.evidence_map).flatMap((ev) => (ev && Array.isArray(ev.token_ids) ? ev.token_ids : [])) : [];
    renderDocs(docRoot, docs, { selectedIds: new Set(cited), onSelect: draw });
  };
  const track = record.initial_observation && record.initial_observation.benchmark_track;
  replace(view, h("p", {}, h("a", { href: `#replay/${encodeURIComponent(runId)}` }, `← run ${runId}`)),
    h("h2", {}, `Replay: ${record.case_id} by ${record.agent}`),
    h("p", {}, `Stored: score ${num(record.final_score, 4)}, ${record.result_class}, decision ${record.decision}, ${record.steps} steps${track ? `, track ${track}` : ""}.`),
    stored ? h("p", { class: "notice", id: "replay-stored" }, `This server does not serve ${record.case_id} (a generated suite's case, played in-process when the run was made), so it cannot be played again here: the replay steps through the stored record — each action, its payload and stored reward, and the stored grade — without the observations.`) : null,
    h("div", { class: "replay-bar" }, prev, slider, next), stage);
  draw();
}

async function compare(runIds) {
  const runs = await Promise.all(runIds.map((id) => api(`/runs/${encodeURIComponent(id)}`)));
  const common = runs[0].episodes.map((e) => e.case_id).filter((c) => runs[1].episodes.some((e) => e.case_id === c));
  const sel = h("select", { id: "compare-case", "aria-label": "Case to compare" }, common.map((c) => h("option", { value: c }, c)));
  const out = h("div", { class: "compare" });
  const show = async () => {
    const recs = await Promise.all(runs.map((r) => {
      const ep = r.episodes.find((e) => e.case_id === sel.value);
      return api(`/runs/${encodeURIComponent(r.run.run_id)}/episodes/${ep.idx}`).then((x) => ({ run: r.run, rec: x.record }));
    }));
    replace(out, recs.map(({ run, rec }) => h("section", { class: "panel" },
      h("h3", {}, `${run.agent} (${run.model})`),
      h("p", {}, `score ${num(rec.final_score, 4)} · ${rec.result_class} · ${rec.decision} · ${rec.steps} steps · reward ${num(rec.total_reward, 3)}`),
      table(["#", "action", "reward", "ok"], rec.trajectory.map((t) => [String(t.step), t.action_type, num(t.reward, 4), t.success ? "✔" : "✘"]), { class: "compact" }))));
  };
  sel.addEventListener("change", () => show().catch((e) => replace(out, errorBox(e))));
  replace(view, h("p", {}, h("a", { href: "#replay" }, "← all runs")), h("h2", {}, "Two runs side by side"),
    common.length ? [h("label", { for: "compare-case" }, "case "), sel, out] : h("p", { class: "muted" }, "These runs share no case."));
  if (common.length) await show();
}

/** `args`: [] for the run list, [run] for a run, [run, episode] for an episode's replay. */
export async function mount(root, args = []) {
  view = root;
  if (args.length && !operatorKey()) return runsList();
  if (args.length >= 2) return replayEpisode(args[0], Number(args[1]));
  if (args.length === 1) return openRun(args[0]);
  await runsList();
}
