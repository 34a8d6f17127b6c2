// Leaderboard and report: the stored leaderboard, the report's charts (score ladder, accuracy vs
// institutional loss, authority timeline, loss surface with ratios and money on separate axes)
// per-track tables and the newest live model comparisons (`ledgershield compare`). Data:
// GET /leaderboard, /controlbench-visualization, /benchmark-report, /comparisons.
import { api, catalog } from "./api.js";
import { h, replace, num, money, isMoneyKey, table } from "./dom.js";
import { bars, scatter, timeline, authorityTimeline } from "./charts.js";

/** Ratios (in [0, 1] by name) versus amounts: never on one axis. */
export function splitLossSurface(items) {
  const isRatio = (it) => /(ratio|rate|score|share)$/.test(it.id) && it.value >= 0 && it.value <= 1;
  return { ratios: items.filter(isRatio), amounts: items.filter((it) => !isRatio(it)) };
}

function leaderboardTable(lb) {
  const cols = [["agent", "agent"], ["model", "model"], ["type", "type"], ["track", "track"], ["public mean", "public_mean"], ["holdout mean", "holdout_mean"], ["unsafe release", "public_unsafe_release_rate"], ["control-satisfied", "public_control_satisfied_resolution"], ["institutional utility", "public_institutional_utility"], ["ControlBench accuracy", "controlbench_accuracy"]];
  // Unassisted entries first: an assisted run (teacher hint, repair, guardrails, …) ranks only on its own track.
  const assisted = (e) => (e.track || "unassisted") !== "unassisted";
  const rows = [...(lb.entries || [])].sort((a, b) => (assisted(a) - assisted(b)) || ((b.public_mean ?? 0) - (a.public_mean ?? 0)))
    .map((e) => cols.map(([, k]) => (typeof e[k] === "number" ? num(e[k], 4) : e[k] ?? "—")));
  return h("section", { class: "panel" }, h("h3", {}, "Leaderboard"),
    rows.length ? table(cols.map((c) => c[0]), rows, { id: "leaderboard" }) : h("p", { class: "muted" }, lb.note || "No entries."),
    lb.generated_at ? h("p", { class: "muted" }, `Updated ${lb.generated_at}. ${lb.note || ""}`) : null);
}

function charts(viz, levels) {
  const c = viz.charts || {};
  const out = [];
  if ((c.score_ladder || []).length) {
    out.push(bars("Score ladder (mean public score)", [...c.score_ladder].sort((a, b) => b.value - a.value).map((r) => ({ label: r.label, value: r.value })), { max: 1, unit: "score" }));
  }
  if ((c.accuracy_vs_institutional_loss || []).length) {
    out.push(scatter("Accuracy vs institutional loss score", c.accuracy_vs_institutional_loss.map((p) => ({ label: p.agent_name, x: p.x_accuracy, y: p.y_institutional_loss_score, cls: p.deployability_rating })),
      { xLabel: "accuracy", yLabel: "institutional loss score (higher is better)", xMax: 1, yMax: 1 }));
  }
  if ((c.authority_timeline || []).length) {
    const pts = c.authority_timeline;
    out.push(authorityTimeline("Authority level over the ControlBench sequence", pts.map((p) => ({ x: p.sequence_index, level: p.authority_level, label: `#${p.sequence_index} ${p.case_id}: ${p.authority_level} (decision ${p.decision})` })), levels));
    out.push(timeline("Institutional loss score and calibration error over the sequence", [
      { name: "loss score", points: pts.map((p) => ({ x: p.sequence_index, y: p.institutional_loss_score, label: `#${p.sequence_index}: loss score ${num(p.institutional_loss_score, 4)}` })) },
      { name: "calibration error", points: pts.map((p) => ({ x: p.sequence_index, y: p.running_calibration_error, label: `#${p.sequence_index}: calibration error ${num(p.running_calibration_error, 4)}` })) }], { yMax: 1, yLabel: "ratio (blue: loss score, orange: calibration error)" }));
  }
  if ((c.loss_surface || []).length) {
    const { ratios, amounts } = splitLossSurface(c.loss_surface);
    out.push(h("div", { class: "two" },
      ratios.length ? bars("Loss surface: ratios", ratios.map((r) => ({ label: r.label, value: r.value })), { max: 1, unit: "ratio" }) : null,
      amounts.length ? bars("Loss surface: amounts", amounts.map((r) => ({ label: r.label, value: r.value, cls: "money" })), { fmt: money, unit: "amount" }) : null));
  }
  return out.length ? out : [h("p", { class: "muted" }, "No chart data: run `ledgershield report`.")];
}

function trackTables(rep) {
  const tracks = Object.values(rep.official_tracks || {});
  const agents = rep.agents || [];
  const stat = (v, k) => (v && typeof v === "object" && "mean" in v ? `${num(v.mean, 4)} ± ${num(v.ci95, 4)}` : typeof v === "number" ? (isMoneyKey(k) ? money(v) : num(v, 4)) : null);
  const trackRows = tracks.map((t) => {
    const s = t.summary || t;
    // A track without data (the human baseline when no file was supplied) says so; its zeros are
    // not results.
    const noData = t.available === false || (t.case_count === 0 && !t.sequence_count);
    const picks = Object.entries(s).filter(([k]) => !["case_count", "participant_count"].includes(k) || !noData).map(([k, v]) => [k, stat(v, k)]).filter(([, v]) => v !== null).slice(0, 10);
    return h("section", { class: "panel track", dataset: { track: t.track } }, h("h4", {}, t.track_label || t.track), t.note ? h("p", { class: "muted" }, t.note) : null,
      noData ? h("p", { class: "no-data" }, "No data for this track.") : table(["metric", "value"], picks, { class: "compact" }));
  });
  const qCols = ["accuracy", "fraud_recall", "false_positive_rate", "unsafe_release_rate", "certificate_validity_rate", "institutional_loss_score", "institutional_loss_total"];
  const quarter = agents.filter((a) => a.quarter).map((a) => [a.agent, ...qCols.map((k) => (isMoneyKey(k) ? money(a.quarter[k]) : num(a.quarter[k], 4)))]);
  return [
    h("h3", {}, "Per-track results"), h("div", { class: "board-grid" }, trackRows),
    quarter.length ? h("section", { class: "panel" }, h("h4", {}, "ControlBench quarter per agent"), table(["agent", ...qCols], quarter, { class: "compact" })) : null,
    agents.length ? h("section", { class: "panel" }, h("h4", {}, "Agents (public and holdout)"), table(["agent", "public mean", "holdout mean", "unsafe (public)", "pass rate"], agents.map((a) => [a.agent, num(a.public_mean, 4), num(a.holdout_mean, 4), num(a.public_unsafe_release_rate, 4), num(a.public_trial_pass_rate, 4)]), { class: "compact" })) : null];
}

/** One stored comparison: per model (tier, scores, certificates, institutional loss), the
 *  capability-order check, per task family, and (operator view) per case. */
function comparisonPanel(c) {
  const pct = (v) => (typeof v === "number" ? `${(v * 100).toFixed(1)}%` : "—");
  const models = table(["model", "tier", "average score", "success rate", "min", "max", "certificate validity", "unsafe release", "institutional loss score", "deployability", "model calls"],
    c.results.map((r) => [r.model, r.model_profile.tier, num(r.average_score, 4), pct(r.success_rate), num(r.min_score, 4), num(r.max_score, 4), pct(r.certificate_validity_rate),
      pct(r.institutional.unsafe_release_rate), r.institutional.institutional_loss_score == null ? "—" : num(r.institutional.institutional_loss_score, 4), r.institutional.deployability_rating || "—", String(r.api_calls)]), { class: "compare-models" });
  const order = c.capability_order || {};
  const families = [...new Set(c.results.flatMap((r) => Object.keys(r.task_families || {})))].sort();
  const famTable = families.length ? table(["model", ...families.map((f) => `${f} (mean)`)], c.results.map((r) => [r.model, ...families.map((f) => (r.task_families[f] ? num(r.task_families[f].average_score, 4) : "—"))]), { class: "compact compare-families" }) : null;
  const cases = (c.cases || []).length ? table(["case", ...c.results.map((r) => r.model)], c.cases.map((id) => [id, ...c.results.map((r) => (id in (r.case_scores || {}) ? num(r.case_scores[id], 4) : "—"))]), { class: "compact compare-cases" }) : null;
  return h("section", { class: "panel comparison", dataset: { id: c.comparison_id } },
    h("h4", {}, `${c.comparison_id} · ${c.case_count} cases · ${c.generated_at_utc}`),
    models,
    h("p", { class: order.monotonic_by_capability ? "ok" : "error", id: "compare-order" }, order.monotonic_by_capability
      ? `Monotonic by capability: ${(order.ordered_models || []).join(" < ")}.`
      : `Not monotonic by capability: ${(order.violations || []).join("; ") || "see the pairwise checks"}.`),
    bars("Average score per model", c.results.map((r) => ({ label: r.model, value: r.average_score })), { max: 1, unit: "score" }),
    famTable,
    cases || (c.per_case_withheld ? h("p", { class: "muted" }, `Per case: ${c.per_case_withheld}.`) : null));
}

function comparisonsSection(list) {
  return h("section", { class: "panel", id: "comparisons" }, h("h3", {}, "Live model comparisons"),
    (list.comparisons || []).length ? list.comparisons.map(comparisonPanel) : h("p", { class: "muted" }, list.note || "No comparison stored."));
}

export async function mount(view) {
  const [lb, viz, rep, cat, cmp] = await Promise.all([api("/leaderboard"), api("/controlbench-visualization"), api("/benchmark-report"), catalog(), api("/comparisons?limit=3")]);
  replace(view, h("h2", {}, "Leaderboard & report"),
    rep.generated_at ? h("p", { class: "muted" }, `Report generated ${rep.generated_at} (${viz.source || "report"}).`) : h("p", { class: "muted" }, rep.note || ""),
    leaderboardTable(lb),
    h("h3", {}, "Charts"), h("div", { id: "charts" }, charts(viz, cat.authority_levels)),
    rep.generated_at ? trackTables(rep) : null,
    comparisonsSection(cmp));
}
