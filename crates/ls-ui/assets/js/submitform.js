// The decision form, generated from the task family's output contract (`output_contracts` in
// /ui/catalog.json, which the server builds from the same typed contract its validator parses).
// Every field kind has one widget: a select for the decision, number inputs for probabilities,
// checkboxes for reason-code lists, an id list for links, pass/fail selects for policy checks,
// inputs per extraction field, a line-item table, token clicks for the evidence map, text areas for
// free text and the certificate's JSON. `readSubmission` turns the form back into the payload.
import { h } from "./dom.js";

/** A field's label: its name, "graded" when the family's grade reads it, its description. */
function label(f, forId) {
  return h("label", { for: forId, title: f.description },
    f.name, f.required ? " *" : "", f.graded ? h("span", { class: "graded", title: "this family's grade reads it" }, "graded") : null);
}

function help(f) {
  return h("p", { class: "help" }, f.description);
}

function decisionField(f) {
  return h("div", { class: "field" }, label(f, "decision"),
    h("select", { id: "decision", name: "decision" }, f.values.map((d) => h("option", { value: d }, d))), help(f));
}

function probabilityField(f) {
  return h("div", { class: "field" }, label(f, f.name),
    h("input", { id: f.name, name: f.name, type: "number", min: 0, max: 1, step: 0.01, value: f.name === "confidence" ? "0.8" : "" }), help(f));
}

function probabilitiesField(f) {
  return h("details", { class: "contract-field probs" }, h("summary", {}, label(f, `prob-${f.hypotheses[0]}`)), help(f),
    h("div", { class: "prob-grid" }, f.hypotheses.map((hy) => h("div", { class: "field" },
      h("label", { for: `prob-${hy}` }, hy),
      h("input", { id: `prob-${hy}`, name: `prob:${hy}`, type: "number", min: 0, max: 1, step: 0.01 })))));
}

function codesField(f) {
  return h("fieldset", { class: "codes contract-field", dataset: { field: f.name } }, h("legend", {}, label(f, null)), help(f),
    f.values.map((c) => h("label", { class: "check" }, h("input", { type: "checkbox", name: f.name, value: c }), c)));
}

/** An id list: type an id, Add; each entry has a remove button. `st.ids[field]` holds it. */
function idsField(f, st, rerender) {
  const list = (st.ids[f.name] = st.ids[f.name] || []);
  const input = h("input", { id: `ids-${f.name}`, type: "text", placeholder: f.placeholder, list: `dl-${f.name}` });
  const add = () => {
    for (const v of input.value.split(",").map((x) => x.trim()).filter(Boolean)) if (!list.includes(v)) list.push(v);
    input.value = "";
    rerender();
  };
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); add(); } });
  return h("fieldset", { class: "ids contract-field", dataset: { field: f.name } }, h("legend", {}, label(f, `ids-${f.name}`)), help(f),
    h("datalist", { id: `dl-${f.name}` }, (st.suggest[f.name] || []).map((v) => h("option", { value: v }))),
    h("div", { class: "field-row" }, input, h("button", { type: "button", id: `add-${f.name}`, onclick: add }, "Add")),
    h("ul", { class: "id-list", id: `list-${f.name}` }, list.length ? list.map((v, i) => h("li", {}, v, " ",
      h("button", { type: "button", class: "link", "aria-label": `remove ${v} from ${f.name}`, onclick: () => { list.splice(i, 1); rerender(); } }, "remove"))) : h("li", { class: "muted" }, "none")));
}

function checksField(f) {
  return h("fieldset", { class: "policy contract-field" }, h("legend", {}, label(f, null)), help(f),
    f.checks.map((k) => h("div", { class: "field" }, h("label", { for: `pc-${k}` }, k),
      h("select", { id: `pc-${k}`, name: `pc:${k}` }, h("option", { value: "" }, "—"), f.statuses.map((v) => h("option", { value: v }, v))))));
}

function fieldsField(f) {
  const amounts = new Set(f.amounts);
  return h("fieldset", { class: "extract contract-field" }, h("legend", {}, label(f, null)), help(f),
    h("div", { class: "extract-grid" }, f.fields.map((k) => h("div", { class: "field" }, h("label", { for: `xf-${k}` }, k + (amounts.has(k) ? " (amount)" : "")),
      h("input", { id: `xf-${k}`, name: `xf:${k}`, type: amounts.has(k) ? "number" : "text", step: "any" })))));
}

/** Line items: one row of inputs per line; `st.lineRows` counts them. */
function lineItemsField(f, st, rerender) {
  const numeric = (c) => c !== "description";
  return h("fieldset", { class: "lines contract-field" }, h("legend", {}, label(f, null)), help(f),
    h("table", { class: "compact line-items" },
      h("thead", {}, h("tr", {}, f.columns.map((c) => h("th", { scope: "col" }, c)), h("th", {}, ""))),
      h("tbody", {}, Array.from({ length: st.lineRows }, (_, i) => h("tr", {},
        f.columns.map((c) => h("td", {}, h("input", { name: `li:${i}:${c}`, "aria-label": `line ${i + 1} ${c}`, type: numeric(c) ? "number" : "text", step: "any" }))),
        h("td", {}, i === st.lineRows - 1 ? h("button", { type: "button", class: "link", onclick: () => { st.lineRows -= 1; rerender(); } }, "remove") : null))))),
    h("button", { type: "button", id: "add-line", onclick: () => { st.lineRows += 1; rerender(); } }, "Add line"));
}

function textField(f) {
  const hint = f.name === "counterfactual" ? "what would have to be different for the opposite decision" : "";
  return h("div", { class: "field" }, label(f, f.name), h("textarea", { id: f.name, name: f.name, rows: 2, placeholder: hint }), help(f));
}

function objectField(f) {
  return h("details", { class: "contract-field" }, h("summary", {}, label(f, f.name)), help(f),
    h("textarea", { id: f.name, name: f.name, rows: 6, class: "json", placeholder: '{"certificate_version": "ledgershield-dcg-v1", "nodes": [...], "edges": [...]}' }));
}

/**
 * The contract's fields as form widgets. `evidence` renders the evidence-map widget (token clicks
 * live in Play). `st` keeps the id lists and line-row count across re-renders.
 */
export function contractFields(contract, st, { evidence, rerender }) {
  return contract.fields.map((f) => {
    switch (f.kind) {
      case "decision": return decisionField(f);
      case "probability": return probabilityField(f);
      case "probabilities": return probabilitiesField(f);
      case "codes": return codesField(f);
      case "ids": return idsField(f, st, rerender);
      case "checks": return checksField(f);
      case "fields": return fieldsField(f);
      case "line_items": return lineItemsField(f, st, rerender);
      case "evidence": return evidence(f);
      case "text": return textField(f);
      case "object": return objectField(f);
      default: return h("p", { class: "error" }, `unknown field kind ${f.kind} for ${f.name}`);
    }
  });
}

/** The claims the evidence map offers: extraction fields and every reason code of the contract. */
export function contractClaims(contract) {
  const out = [];
  for (const f of contract.fields) {
    if (f.kind === "fields") out.push(...f.fields);
    if (f.kind === "codes") for (const c of f.values) if (!out.includes(c)) out.push(c);
  }
  return out;
}

export class FormError extends Error {}

/** Read the form back into the `submit_decision` payload the contract describes. */
export function readSubmission(contract, form, st, evidenceMap) {
  const fd = new FormData(form);
  const p = {};
  for (const f of contract.fields) {
    switch (f.kind) {
      case "decision": p.decision = fd.get("decision"); break;
      case "probability": if (fd.get(f.name) !== "" && fd.get(f.name) !== null) p[f.name] = Number(fd.get(f.name)); break;
      case "probabilities": {
        const m = {};
        for (const hy of f.hypotheses) if (fd.get(`prob:${hy}`)) m[hy] = Number(fd.get(`prob:${hy}`));
        if (Object.keys(m).length) p[f.name] = m;
        break;
      }
      case "codes": p[f.name] = fd.getAll(f.name); break;
      case "ids": p[f.name] = [...(st.ids[f.name] || [])]; break;
      case "checks": {
        const m = {};
        for (const k of f.checks) if (fd.get(`pc:${k}`)) m[k] = fd.get(`pc:${k}`);
        p[f.name] = m;
        break;
      }
      case "fields": {
        const amounts = new Set(f.amounts);
        const m = {};
        for (const k of f.fields) {
          const v = fd.get(`xf:${k}`);
          if (v !== null && v !== "") m[k] = amounts.has(k) ? Number(v) : v;
        }
        p[f.name] = m;
        break;
      }
      case "line_items": {
        const rows = [];
        for (let i = 0; i < st.lineRows; i++) {
          const row = {};
          for (const c of f.columns) {
            const v = fd.get(`li:${i}:${c}`);
            if (v !== null && v !== "") row[c] = c === "description" ? v : Number(v);
          }
          if (Object.keys(row).length) rows.push(row);
        }
        p[f.name] = rows;
        break;
      }
      case "evidence": p[f.name] = evidenceMap; break;
      case "text": if (fd.get(f.name)) p[f.name] = fd.get(f.name); break;
      case "object": {
        const text = (fd.get(f.name) || "").trim();
        if (text) {
          try { p[f.name] = JSON.parse(text); } catch (e) { throw new FormError(`${f.name}: not valid JSON (${e.message})`); }
          if (!p[f.name] || typeof p[f.name] !== "object" || Array.isArray(p[f.name])) throw new FormError(`${f.name}: must be a JSON object`);
        }
        break;
      }
      default: break;
    }
  }
  return p;
}
