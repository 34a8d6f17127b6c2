// Institution: the session's institutional memory (GET /institutional-memory): capacities,
// authority (now and over the episodes played here), loss surface, vendor trust, sleeper vendors.
import { api, catalog } from "./api.js";
import { h, replace, meter, num, money, table, kv } from "./dom.js";
import { bars, authorityTimeline } from "./charts.js";
import { record } from "./results.js";
import { splitLossSurface } from "./board.js";
import { playSession, newSession, history } from "./play.js";

function surfaceItems(ls) {
  return Object.entries(ls || {}).filter(([, v]) => typeof v === "number").map(([k, v]) => ({ id: k, label: k.replace(/_/g, " "), value: v }));
}

/** Vendors as a table: the vendor key, then one column per field of their memory. */
function vendorTable(vm, id) {
  const entries = Object.entries(vm || {});
  const cols = [...new Set(entries.flatMap(([, v]) => (v && typeof v === "object" ? Object.keys(v) : [])))];
  const cell = (x) => (typeof x === "number" ? num(x, 3) : typeof x === "boolean" ? (x ? "yes" : "no") : x && typeof x === "object" ? record(x) : x ?? "—");
  return table(["vendor", ...cols.map((c) => c.replace(/_/g, " "))], entries.map(([k, v]) => [k, ...cols.map((c) => cell((v || {})[c]))]), { class: "compact", id });
}

export async function mount(view) {
  const session = playSession();
  const [m, cat] = await Promise.all([api("/institutional-memory", { session }), catalog()]);
  const ledger = m.loss_ledger || {};
  const { ratios, amounts } = splitLossSurface(surfaceItems(ledger.loss_surface));
  const gate = m.calibration_gate || {};
  const reset = h("button", { type: "button", id: "new-session", onclick: async () => { newSession(); await mount(view); } }, "New session (fresh memory)");
  replace(view, h("h2", {}, "Institution"),
    h("p", { class: "muted" }, `Session ${session} (the one Play uses) · ${m.week_id} week ${m.week_number} · ${m.case_counter} cases decided · queue depth ${m.queue_depth} · deployability ${m.deployability_rating} `, reset),
    h("section", { class: "meters", "aria-label": "Capacities" },
      meter("Manual review", m.manual_review_capacity_remaining, m.manual_review_capacity_total, `${m.manual_review_capacity_remaining} / ${m.manual_review_capacity_total} left`),
      meter("Callbacks", m.callback_capacity_remaining, m.callback_capacity_total, `${m.callback_capacity_remaining} / ${m.callback_capacity_total} left`)),
    h("div", { class: "two" },
      h("section", { class: "panel" }, h("h3", {}, `Authority: ${m.authority_level}`), kv({ running_calibration_error: gate.running_calibration_error, cumulative_calibration_error: gate.cumulative_calibration_error, observations: gate.observations, gate_trigger_count: gate.gate_trigger_count, last_gate_reason: gate.last_gate_reason }),
        gate.authority_policy ? kv(gate.authority_policy) : null),
      history.length ? authorityTimeline("Authority level after each episode played here", history.map((p) => ({ x: p.n, level: p.authority_level, label: `#${p.n} ${p.case_id}: ${p.authority_level}, score ${num(p.final_score, 3)}` })), cat.authority_levels)
        : h("section", { class: "panel" }, h("p", { class: "muted" }, "Play episodes to see the authority level over time."))),
    h("h3", {}, "Loss surface"),
    h("div", { class: "two" },
      ratios.length ? bars("Ratios", ratios, { max: 1, unit: "ratio" }) : null,
      amounts.length ? bars("Amounts and counts", amounts.map((a) => ({ ...a, cls: "money" })), { fmt: money, unit: "amount" }) : null),
    h("p", {}, `Institutional loss score ${num(ledger.institutional_loss_score, 4)} · fraud loss prevented ${money(ledger.fraud_loss_prevented)} · released ${money(ledger.fraud_loss_released)} · unsafe releases ${ledger.unsafe_release_count ?? 0}`),
    h("div", { class: "two" },
      h("section", { class: "panel" }, h("h3", {}, "Vendor trust"), Object.keys(m.vendor_memory || {}).length ? vendorTable(m.vendor_memory, "vendor-trust") : h("p", { class: "muted" }, "No vendor seen yet.")),
      h("section", { class: "panel" }, h("h3", {}, "Sleeper vendors"), Object.keys(m.sleeper_vendors || {}).length ? vendorTable(m.sleeper_vendors, "sleeper-vendors") : h("p", { class: "muted" }, "No sleeper vendor in this session."))),
    m.attacker_belief ? bars("Attacker belief (what the adversary thinks is weak)", Object.entries(m.attacker_belief).map(([k, v]) => ({ label: k, value: v })), { max: 1 }) : null);
}
