// The instrumented-mode panel: the SPRT belief over the latent hypotheses, the value-of-information
// tool rankings and the reward machine's progress, read from the observation's `sprt_state`,
// `tool_rankings` and `reward_machine` fields. In blind mode the server sends them empty, and the
// panel says so (nothing is computed here).
import { h, num, table } from "./dom.js";
import { bars } from "./charts.js";

function empty(o) {
  return !o || typeof o !== "object" || !Object.keys(o).length;
}

function sprtView(sp) {
  const post = sp.posterior_probabilities || {};
  const rows = Object.entries(post).sort((a, b) => b[1] - a[1]).map(([k, v]) => ({ label: k, value: v }));
  const llr = sp.log_likelihood_ratios || {};
  const up = sp.upper_boundaries || {}, lo = sp.lower_boundaries || {};
  return h("section", { class: "sprt", "aria-label": "SPRT belief" },
    h("h4", {}, "SPRT belief"),
    h("p", {}, `Observations used ${sp.observations_used ?? "—"} · belief entropy ${num(sp.belief_entropy, 3)} · potential ${num(sp.potential, 3)} · `,
      sp.decision_ready ? h("b", {}, "decision ready") : "not decision ready",
      (sp.pending_required_checks || []).length ? ` (the policy still requires ${sp.pending_required_checks.join(", ")})` : "",
      sp.accepted_hypothesis ? ` · accepted ${sp.accepted_hypothesis}` : "", sp.recommended_decision ? ` · recommends ${sp.recommended_decision}` : ""),
    rows.length ? bars("Posterior probability per hypothesis (0 to 1)", rows, { max: 1, fmt: (v) => num(v, 2), unit: "probability" }) : null,
    Object.keys(llr).length ? h("details", {}, h("summary", {}, "Log-likelihood ratios against the boundaries"),
      table(["hypothesis", "lower", "LLR", "upper", "status"], Object.entries(llr).map(([k, v]) => [k, num(lo[k], 3), num(v, 3), num(up[k], 3), v >= up[k] ? "crossed upper" : v <= lo[k] ? "crossed lower" : "open"]), { class: "compact" })) : null);
}

function rankingsView(tr) {
  const rows = Object.entries(tr.rankings || {}).sort((a, b) => (b[1].voi_cost_ratio ?? -9) - (a[1].voi_cost_ratio ?? -9));
  return h("section", { class: "rankings", "aria-label": "Tool rankings" },
    h("h4", {}, "Tool rankings (value of information)"),
    h("p", {}, `Recommended: `, h("b", { id: "recommended-tool" }, tr.recommended_tool || "—"), ` · VoI ${num(tr.voi, 3)} · VoI/cost ${num(tr.voi_cost_ratio, 3)} · `, tr.should_stop ? "stop and decide" : "keep investigating"),
    table(["tool", "VoI", "cost", "VoI / cost", "affordable"], rows.map(([k, r]) => [k === tr.recommended_tool ? h("b", {}, k) : k, num(r.voi, 3), num(r.cost, 2), num(r.voi_cost_ratio, 3), r.affordable ? "yes" : "no"]), { class: "compact rank-table" }));
}

function machineView(rm) {
  const done = rm.completed_markers || [];
  return h("section", { class: "machine", "aria-label": "Reward machine" },
    h("h4", {}, "Reward machine"),
    h("div", { class: "meter" }, h("label", { for: "rm-progress" }, "Progress"),
      h("meter", { id: "rm-progress", min: 0, max: 1, value: rm.progress_fraction || 0 }), h("span", { class: "meter-text" }, `${num((rm.progress_fraction || 0) * 100, 0)} %`)),
    h("p", {}, `State ${rm.state_id ?? "—"} of ${rm.state_count ?? "—"} · ${rm.distance_to_accepting ?? "—"} markers to accepting${rm.accepting ? " · accepting" : ""}${rm.rejecting ? " · rejecting" : ""}`),
    h("p", {}, "Completed: ", done.length ? done.join(", ") : "none"),
    rm.temporal_spec ? h("p", { class: "muted spec" }, h("b", {}, "Specification: "), rm.temporal_spec) : null);
}

/** The panel for one observation. */
export function instrumentedPanel(obs) {
  const sp = obs.sprt_state, tr = obs.tool_rankings, rm = obs.reward_machine;
  const blind = empty(sp) && empty(tr) && empty(rm);
  return h("section", { class: "panel instrumented", id: "instrumented", "aria-label": "Instrumented state" },
    h("h3", {}, "Instrumented state"),
    blind ? h("p", { class: "muted", id: "instrumented-blind" }, "Blind mode: the server sends no SPRT belief, tool rankings or reward machine for this episode (a server started with LEDGERSHIELD_TRACK_MODE=instrumented does, except on the blind-control track).")
      : [empty(sp) ? null : sprtView(sp), empty(tr) ? null : rankingsView(tr), empty(rm) ? null : machineView(rm)]);
}
