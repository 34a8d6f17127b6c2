// Tool results in words and tables (vendor records, ledger hits, POs, receipts, policies), and the
// ids they revealed (vendor keys, PO and receipt ids, ledger ids, invoice numbers), which the tool
// forms and the decision form offer as suggestions.
import { h, table, money } from "./dom.js";

const ID_KEYS = ["vendor_key", "po_id", "receipt_id", "ledger_id", "invoice_number", "rule_id", "thread_id", "proposed_bank_account", "bank_account"];
// Keys of a tool result that are bookkeeping, not findings.
const SKIP = new Set(["tool_name", "success", "message", "cost", "novel_signal_count", "control_boundary", "tokens", "focus_tokens", "thread", "reward_model", "truncated", "terminated"]);

/** Every value of an id-like key anywhere in the results: key -> distinct values in order. */
export function collectIds(results) {
  const out = {};
  const walk = (v) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (ID_KEYS.includes(k) && (typeof x === "string" || typeof x === "number") && String(x)) {
          const list = (out[k] = out[k] || []);
          if (!list.includes(String(x))) list.push(String(x));
        }
        walk(x);
      }
    }
  };
  results.forEach((r) => walk(r.result));
  // A proposed account is typed into compare_bank_account.
  out.proposed_bank_account = [...new Set([...(out.proposed_bank_account || []), ...(out.bank_account || [])])];
  return out;
}

function scalar(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") return Math.abs(v) >= 1000 ? money(v) : String(v);
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (Array.isArray(v) && v.every((x) => typeof x !== "object")) return v.join(", ") || "none";
  return typeof v === "object" ? null : String(v);
}

/** An object as a definition list; nested objects as nested lists, lists of records as tables. */
export function record(obj, depth = 0) {
  const rows = [];
  for (const [k, v] of Object.entries(obj || {})) {
    if (depth === 0 && SKIP.has(k)) continue;
    const text = scalar(v);
    let dd;
    if (text !== null) dd = h("dd", {}, text);
    else if (Array.isArray(v)) dd = h("dd", {}, records(v));
    else dd = h("dd", {}, depth < 2 ? record(v, depth + 1) : JSON.stringify(v));
    rows.push(h("dt", {}, k), dd);
  }
  return h("dl", { class: "kv record" }, rows);
}

/** A list of records as one table (columns: the union of their scalar keys). */
function records(list) {
  if (!list.length) return "none";
  const cols = [...new Set(list.flatMap((r) => Object.keys(r || {})))];
  return table(cols, list.map((r) => cols.map((c) => { const t = scalar((r || {})[c]); return t === null ? JSON.stringify(r[c]) : t; })), { class: "compact" });
}

/** One step's result: its message, then its findings. */
function resultView(r, open) {
  const res = r.result || {};
  return h("details", { class: "tool-result", dataset: { step: r.n, tool: r.actionType }, open },
    h("summary", {}, `step ${r.n}: ${r.actionType}${res.success === false ? " (failed)" : ""} — ${res.message || ""}`),
    record(res));
}

/** The panel of tool results, newest first (the newest open; the panel scrolls). */
export function resultsPanel(results) {
  return h("section", { class: "panel results", "aria-label": "Tool results" }, h("h3", {}, "Tool results"),
    [...results].reverse().map((r, i) => resultView(r, i === 0)));
}
