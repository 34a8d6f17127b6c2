// Institution: the session's institutional memory (GET /institutional-memory): capacities,
// authority (now and over the episodes played here), loss surface, vendor trust, sleeper vendors.
import { api } from "./api.js";
import { h, replace, meter, num, money, table, kv } from "./dom.js";
import { bars, timeline } from "./charts.js";
import { splitLossSurface } from "./board.js";
import { playSession, newSession, history } from "./play.js";

const AUTHORITY = ["restricted_authority", "review_only", "limited_authority", "full_authority"];

function surfaceItems(ls) {
  return Object.entries(ls || {}).filter(([, v]) => typeof v === "number").map(([k, v]) => ({ id: k, label: k.replace(/_/g, " "), value: v }));
}

function vendorRows(vm) {
  return Object.entries(vm || {}).map(([k, v]) => [k, typeof v === "object" ? Object.entries(v).filter(([, x]) => typeof x !== "object").map(([a, b]) => `${a}: ${typeof b === "number" ? num(b, 3) : b}`).join(" · ") : String(v)]);
}

export async function mount(view) {
  const session = playSession();
  const m = await api("/institutional-memory", { session });
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
      history.length ? timeline("Authority level after each episode played here", [{ name: "authority", points: history.map((p) => ({ x: p.n, y: Math.max(0, AUTHORITY.indexOf(p.authority_level)), label: `#${p.n} ${p.case_id}: ${p.authority_level}, score ${num(p.final_score, 3)}` })) }], { categories: AUTHORITY })
        : h("section", { class: "panel" }, h("p", { class: "muted" }, "Play episodes to see the authority level over time."))),
    h("h3", {}, "Loss surface"),
    h("div", { class: "two" },
      ratios.length ? bars("Ratios", ratios, { max: 1, unit: "ratio" }) : null,
      amounts.length ? bars("Amounts and counts", amounts.map((a) => ({ ...a, cls: "money" })), { fmt: money, unit: "amount" }) : null),
    h("p", {}, `Institutional loss score ${num(ledger.institutional_loss_score, 4)} · fraud loss prevented ${money(ledger.fraud_loss_prevented)} · released ${money(ledger.fraud_loss_released)} · unsafe releases ${ledger.unsafe_release_count ?? 0}`),
    h("div", { class: "two" },
      h("section", { class: "panel" }, h("h3", {}, "Vendor trust"), Object.keys(m.vendor_memory || {}).length ? table(["vendor", "memory"], vendorRows(m.vendor_memory), { class: "compact" }) : h("p", { class: "muted" }, "No vendor seen yet.")),
      h("section", { class: "panel" }, h("h3", {}, "Sleeper vendors"), Object.keys(m.sleeper_vendors || {}).length ? table(["vendor", "state"], vendorRows(m.sleeper_vendors), { class: "compact" }) : h("p", { class: "muted" }, "No sleeper vendor in this session."))),
    m.attacker_belief ? bars("Attacker belief (what the adversary thinks is weak)", Object.entries(m.attacker_belief).map(([k, v]) => ({ label: k, value: v })), { max: 1 }) : null);
}
