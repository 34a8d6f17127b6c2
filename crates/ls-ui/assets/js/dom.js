// Small DOM helpers: elements are built with createElement (never innerHTML), so data from the
// server is always text, and nothing needs an inline style or script (the page's CSP forbids both).

const SVG_NS = "http://www.w3.org/2000/svg";

export function append(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.setAttribute("class", Array.isArray(v) ? v.filter(Boolean).join(" ") : v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "value" && "value" in el) el.value = v;
    else if (k === "checked" && "checked" in el) el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  return el;
}

/** An HTML element: h("div", {class: "x", onclick: f}, child, "text", ...). */
export function h(tag, attrs, ...children) {
  return append(setAttrs(document.createElement(tag), attrs), ...children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return append(setAttrs(document.createElementNS(SVG_NS, tag), attrs), ...children);
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function replace(el, ...children) {
  return append(clear(el), ...children);
}

/** A number for display: fixed digits, or an em dash for missing values. */
export function num(v, digits = 2) {
  if (v === null || v === undefined || v === "" || Number.isNaN(Number(v))) return "—";
  return Number(v).toFixed(digits);
}

/** Money, one format everywhere: thousands separators and exactly two decimals
 *  (`1,234.50`, `0.00`), whatever the amount (it was 0 to 2 decimals, and amounts in the
 *  board's track tables came out as plain 4-decimal numbers). */
export function money(v) {
  if (v === null || v === undefined || v === "" || Number.isNaN(Number(v))) return "—";
  return Number(v).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

/** Whether a metric's name says it is an amount of money (a total, amount, value or loss). */
export function isMoneyKey(k) {
  return /(^|_)(amount|amounts|total|value|loss_prevented|loss_released|exposure)(_usd|_inr)?$/.test(String(k)) && !/(score|rate|ratio|share|count)/.test(String(k));
}

/** A table from rows of cells; `head` is a list of column titles. */
export function table(head, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))));
}

/** A labelled meter (value out of max). */
export function meter(label, value, max, text) {
  const id = `m-${label.replace(/\W+/g, "-")}`;
  return h("div", { class: "meter" },
    h("label", { for: id }, label),
    h("meter", { id, min: 0, max: Math.max(max, 1e-9), value: Math.max(0, value), "aria-valuetext": text }),
    h("span", { class: "meter-text" }, text));
}

/** A key/value list of an object's scalar fields; nested values shown as compact JSON. */
export function kv(obj) {
  const rows = Object.entries(obj || {}).map(([k, v]) =>
    [h("dt", {}, k), h("dd", {}, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v))]);
  return h("dl", { class: "kv" }, rows);
}

export function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, String(err && err.message ? err.message : err));
}

/** A random id for sessions (the OS random source through the browser). */
export function randomId(prefix) {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return `${prefix}-${Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("")}`;
}
