// The grade of a terminal step: final score, result class, score breakdown, control boundary,
// falsifier, the decision certificate and the TrustGraph drawn as graphs. Called only with an
// envelope whose episode is done (or a stored episode's terminal info).
import { h, num, table, kv } from "./dom.js";
import { bars, graph } from "./charts.js";

const TRUST_ORDER = ["Case", "Invoice", "InvoiceDocument", "Email", "Vendor", "BankAccount", "Evidence", "RiskFlag", "Policy", "ControlBoundary", "AuthorityGate", "Counterfactual", "Decision", "Certificate"];
const CERT_ORDER = ["observation", "artifact", "claim", "hypothesis", "policy", "intervention", "counterfactual", "decision"];

function detailPanel() {
  const box = h("pre", { class: "node-detail", "aria-live": "polite" }, "Select a node to see its attributes.");
  return [box, (n) => { box.textContent = JSON.stringify(n.raw || n, null, 2); }];
}

/** The TrustGraph (`info.trust_graph`): nodes by type in layers. */
function trustGraph(tg) {
  if (!tg || !Array.isArray(tg.nodes)) return h("p", { class: "muted" }, "No TrustGraph in this grade.");
  const [box, show] = detailPanel();
  const nodes = tg.nodes.filter((n) => !String(n.node_type).startsWith("Certificate") || n.node_type === "Certificate").map((n) => ({ id: n.id, type: n.node_type, label: n.attributes && (n.attributes.value || n.attributes.name) ? `${n.node_type}: ${n.attributes.value || n.attributes.name}` : n.id, raw: n }));
  const ids = new Set(nodes.map((n) => n.id));
  const edges = (tg.edges || []).filter((e) => ids.has(e.source) && ids.has(e.target)).map((e) => ({ source: e.source, target: e.target, label: e.relation }));
  return h("div", { class: "graph-wrap" }, graph("TrustGraph", nodes, edges, { typeOrder: TRUST_ORDER, detail: show }), box,
    tg.evaluation ? h("details", {}, h("summary", {}, "TrustGraph evaluation"), kv(tg.evaluation)) : null);
}

/** The decision certificate: the agent's `decision_certificate` when it authored one, else the
 *  certificate nodes of the TrustGraph. */
function certificateGraph(cert, tg, report) {
  const [box, show] = detailPanel();
  let nodes = [], edges = [];
  if (cert && Array.isArray(cert.nodes)) {
    nodes = cert.nodes.map((n) => ({ id: n.id, type: n.type || "node", label: n.label || n.value || n.id, raw: n }));
    edges = (cert.edges || []).map((e) => ({ source: e.source || e.from, target: e.target || e.to, label: e.type || e.relation || e.label }));
  } else if (tg && Array.isArray(tg.nodes)) {
    const cn = tg.nodes.filter((n) => String(n.node_type).startsWith("Certificate"));
    const ids = new Set(cn.map((n) => n.id));
    nodes = cn.map((n) => ({ id: n.id, type: String(n.node_type).replace(/^Certificate/, "").toLowerCase() || "certificate", label: n.id, raw: n }));
    edges = (tg.edges || []).filter((e) => ids.has(e.source) && ids.has(e.target)).map((e) => ({ source: e.source, target: e.target, label: e.relation }));
  }
  const scores = report ? ["validity_score", "support_score", "stability_score", "grounding_score", "overall_score"].filter((k) => k in report).map((k) => ({ label: k, value: report[k] })) : [];
  return h("div", { class: "graph-wrap" },
    report ? h("p", { id: "certificate-summary" }, `Certificate: ${report.agent_authored ? "agent-authored" : report.auto_generated ? "auto-generated" : "absent"}, ${report.valid ? "valid" : "not valid"}. Drawn: ${nodes.length} nodes, ${edges.length} edges (${cert && Array.isArray(cert.nodes) ? "the certificate the agent sent" : "the certificate nodes of the TrustGraph"}); the grader's report counts ${report.node_count ?? "—"} nodes, ${report.edge_count ?? "—"} edges${report.auto_generated ? " of the certificate it synthesized" : ""}.`) : null,
    scores.length ? bars("Certificate scores", scores, { max: 1 }) : null,
    nodes.length ? graph("Decision certificate", nodes, edges, { typeOrder: CERT_ORDER, detail: show }) : h("p", { class: "muted" }, "No certificate graph in this grade."),
    nodes.length ? box : null);
}

// What each of the grader's result classes means (every class the grader can return).
const RESULT_CLASS_TEXT = {
  valid_success: "The decision is right and every required control, artifact and piece of evidence is in place.",
  correct_but_policy_incomplete: "The decision is right, but required controls or artifacts were missing, so the score is capped.",
  unsafe_release: "The submission released (PAY) a payment on a risky case: the score is capped at 0.05.",
  authority_gate_failed: "The institution's authority gate blocked this decision at the agent's authority level.",
  control_boundary_failed: "The control boundary blocked the decision (a required follow-up or pending artifact stood in the way).",
  unsupported_certificate: "The decision is right but the agent's decision certificate does not support it.",
  malformed_submission: "The submission is malformed: no valid decision, or no claims at all (no evidence, codes, checks or fields). Capped at 0.30.",
  false_positive_overcontrol: "A safe invoice was stopped: controls were applied where none were needed.",
  incorrect_resolution: "The decision is wrong for this case: capped at 0.60 however thorough the investigation.",
  falsifier_blocked: "The adversarial falsifier found a gap the decision leaves open (see its findings).",
  certificate_required_missing: "This track requires an agent-authored decision certificate and none was sent.",
  certificate_gate_failed: "The decision certificate failed the certificate gate of this track.",
};

// Caps the grader applies, with the breakdown key of their reasons.
const CAPS = [
  ["result_class_cap", null, "the result class"],
  ["controls_skipped_cap", "control_failure_reasons", "skipped controls"],
  ["adversarial_falsifier_cap", "adversarial_falsifier_reasons", "the adversarial falsifier"],
  ["authority_gate_cap", "authority_gate_reasons", "the authority gate"],
  ["control_boundary_cap", "control_boundary_reasons", "the control boundary"],
  ["certificate_gate_cap", "certificate_gate_reasons", "the certificate gate"],
  ["trust_graph_cap", "trust_graph_reasons", "the TrustGraph"],
  ["empty_evidence_cap", null, "missing evidence"],
];

const words = (k) => String(k).replace(/_/g, " ");

// Breakdown terms added to the weighted score to make the raw score (ls-grading's score stage):
// these move the final score.
const SCORE_TERMS = ["degenerate_penalty", "compliance_adjustment", "currency_adjustment", "causal_adjustment",
  "certificate_adjustment", "institutional_adjustment", "overcontrol_penalty", "unsupported_claim_penalty", "unsafe_pay_penalty"];
// Penalties inside one weighted dimension (the trajectory's efficiency, the compliance score):
// already part of the weighted score, never subtracted from the final score again. Listing them
// as "penalties" beside a 0.99 valid_success read as a contradiction.
const DIMENSION_TERMS = { budget_penalty: "efficiency", repeat_penalty: "efficiency", length_penalty: "efficiency", compliance_penalty: "compliance" };

/** The breakdown's penalties and adjustments, split into those applied to the score and those
 *  inside a dimension: `{ score: [[key, value]], within: [[key, value, dimension]] }`. */
export function scoreTerms(sb) {
  const nonzero = (k) => typeof sb[k] === "number" && sb[k] !== 0;
  return {
    score: SCORE_TERMS.filter(nonzero).map((k) => [k, sb[k]]),
    within: Object.keys(DIMENSION_TERMS).filter(nonzero).map((k) => [k, sb[k], DIMENSION_TERMS[k]]),
  };
}

/** The grade in words: result class, caps that bound the score and why, penalties, what was
 *  missing (actions, artifacts, SOX controls), the falsifier's findings. All from `info`. */
export function explain(info) {
  const sb = info.score_breakdown || {};
  const items = [];
  const fs = Number(info.final_score);
  for (const [cap, reasons, what] of CAPS) {
    const v = sb[cap];
    if (typeof v !== "number" || v >= 1) continue;
    const why = reasons && Array.isArray(sb[reasons]) && sb[reasons].length ? `: ${sb[reasons].map(words).join("; ")}` : "";
    const binding = Math.abs(v - fs) < 1e-4 ? " (this cap set the final score)" : "";
    items.push(h("li", { class: "cap" }, `Capped at ${num(v, 2)} by ${what}${why}${binding}.`));
  }
  const missingActions = sb.missing_required_actions || [];
  const missingArtifacts = sb.missing_required_artifacts || [];
  if (missingActions.length) items.push(h("li", { class: "missing" }, `Required controls not taken (${missingActions.length}): ${missingActions.join(", ")}.`));
  if (missingArtifacts.length) items.push(h("li", { class: "missing" }, `Required artifacts not obtained (${missingArtifacts.length}): ${missingArtifacts.join(", ")}.`));
  const comp = info.compliance || {};
  const failed = (comp.controls || []).filter((c) => c.applicable && !c.passed);
  if (failed.length) {
    items.push(h("li", { class: "missing" }, `SOX controls failed (${failed.length} of ${comp.evaluated ?? "?"}):`,
      h("ul", {}, failed.map((c) => h("li", {}, `${c.control_id} ${c.name} (${c.severity})`,
        (c.missing_actions || []).length ? ` — missing ${c.missing_actions.join(", ")}` : "",
        (c.missing_artifacts || []).length ? ` — missing artifacts ${c.missing_artifacts.join(", ")}` : "")))));
  }
  for (const f of (info.adversarial_falsifier || {}).findings || []) {
    items.push(h("li", { class: "finding" }, `Falsifier (${f.severity || "?"}): ${f.message || words(f.code)}`));
  }
  const terms = scoreTerms(sb);
  if (terms.score.length) {
    items.push(h("li", { class: "penalty" }, "Applied to the score: ", terms.score.map(([k, v]) => `${words(k)} ${v > 0 ? "+" : ""}${num(v, 4)}`).join(" · "), "."));
  }
  if (terms.within.length) {
    items.push(h("li", { class: "within" }, "Inside the weighted dimensions (already counted in the weighted score, not subtracted again): ",
      terms.within.map(([k, v, dim]) => `${words(k)} ${num(v, 4)} (${dim})`).join(" · "), "."));
  }
  const cb = info.control_boundary || {};
  if ((cb.required_followups || []).length) items.push(h("li", {}, `Control boundary follow-ups: ${cb.required_followups.join(", ")}.`));
  if (sb.unsafe_release) items.push(h("li", { class: "cap" }, "The payment was released on a risky case (unsafe release)."));
  if (!items.length) items.push(h("li", {}, "No cap, penalty or missing control applied."));
  return h("section", { class: "why", id: "grade-why" },
    h("h4", {}, "Why this score"),
    h("p", { class: "why-class" }, h("b", {}, `${info.result_class || "not graded"}: `), RESULT_CLASS_TEXT[info.result_class] || (info.truncated ? "The episode hit its step limit before a decision: it is not graded." : "")),
    typeof sb.weighted_score === "number" ? h("p", {}, `The family's weighted dimensions give ${num(sb.weighted_score, 4)}; after caps, penalties and adjustments the final score is ${num(info.final_score, 4)}.`) : null,
    h("ul", { class: "why-list" }, items));
}

/** Render the grade from a terminal `info` map (plus the submitted payload, when known). */
export function gradeView(info, payload) {
  info = info || {};
  const sb = info.score_breakdown || {};
  const numeric = Object.entries(sb).filter(([, v]) => typeof v === "number");
  const ratios = numeric.filter(([, v]) => v >= -1 && v <= 1).map(([k, v]) => ({ label: k, value: v, cls: v < 0 ? "neg" : "" }));
  const cb = info.control_boundary || {};
  const fals = info.adversarial_falsifier || {};
  return h("div", { class: "grade" },
    h("h3", {}, "Grade"),
    h("p", { class: "score-line" }, h("span", { class: "big", id: "final-score" }, num(info.final_score, 4)), " ",
      h("span", { class: `result ${info.result_class || ""}`, id: "result-class" }, info.result_class || (info.truncated ? "truncated (not graded)" : "—")),
      ` · decision ${info.decision || "—"} (effective ${info.effective_decision || "—"})${info.unsafe_outcome ? " · UNSAFE" : ""}`,
      info.benchmark_track ? ` · track ${info.benchmark_track} (${info.track_mode || "?"})` : ""),
    explain(info),
    h("div", { class: "grade-grid" },
      h("section", {}, h("h4", {}, "Control boundary"), kv({ phase: cb.phase, allowed: cb.allowed, blocking: cb.blocking, score_cap: cb.score_cap, enforced_decision: cb.enforced_decision, reasons: (cb.reasons || []).join("; ") || "none", required_followups: (cb.required_followups || []).join("; ") || "none" })),
      h("section", {}, h("h4", {}, "Falsifier"), kv({ verdict: fals.verdict, blocking: fals.blocking, max_severity: fals.max_severity_label ?? fals.max_severity, findings: fals.finding_count }),
        (fals.findings || []).length ? h("ul", {}, fals.findings.map((f) => h("li", {}, typeof f === "string" ? f : JSON.stringify(f)))) : null)),
    ratios.length ? h("section", {}, h("h4", {}, "Score breakdown"),
      bars("Component scores (0 to 1)", ratios.filter((r) => r.label.endsWith("_score") && r.value >= 0), { max: 1 }),
      h("details", {}, h("summary", {}, `All ${numeric.length} breakdown values (caps, penalties, adjustments)`),
        table(["component", "value"], numeric.map(([k, v]) => [k, num(v, 4)]), { class: "compact" }))) : null,
    h("h4", {}, "Decision certificate"), certificateGraph(payload && payload.decision_certificate, info.trust_graph, info.decision_certificate_report),
    h("h4", {}, "TrustGraph"), trustGraph(info.trust_graph));
}

/** The grade of a live envelope. */
export function renderGrade(env, payload) {
  return gradeView(env.info, payload);
}
