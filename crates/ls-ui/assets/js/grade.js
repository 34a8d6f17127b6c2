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
    report ? h("p", {}, `Certificate: ${report.agent_authored ? "agent-authored" : report.auto_generated ? "auto-generated" : "absent"}, ${report.valid ? "valid" : "not valid"}, ${report.node_count ?? nodes.length} nodes, ${report.edge_count ?? edges.length} edges.`) : null,
    scores.length ? bars("Certificate scores", scores, { max: 1 }) : null,
    nodes.length ? graph("Decision certificate", nodes, edges, { typeOrder: CERT_ORDER, detail: show }) : h("p", { class: "muted" }, "No certificate graph in this grade."),
    nodes.length ? box : null);
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
      ` · decision ${info.decision || "—"} (effective ${info.effective_decision || "—"})${info.unsafe_outcome ? " · UNSAFE" : ""}`),
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
