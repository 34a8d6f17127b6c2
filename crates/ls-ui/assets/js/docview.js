// The document view shared by Play and Replay: every document the case shows, as a page with the
// OCR tokens the agent has read placed by their bounding boxes, and email threads as threads.
// It only knows what tool results revealed; nothing is fetched from anywhere else.
import { h, s, replace } from "./dom.js";

const PAGE_W = 612, PAGE_H = 792;

/** Accumulates what tool results revealed: tokens per document and page, email threads. */
export class DocState {
  constructor() {
    this.docs = [];          // visible_documents catalogue entries
    this.tokens = new Map(); // doc_id -> Map(token_id -> token)
    this.threads = new Map(); // thread/doc id -> thread result
    this.selected = null;    // doc_id shown
    this.page = 1;
  }

  setCatalog(docs) {
    this.docs = docs || [];
    if (!this.selected || !this.docs.some((d) => d.doc_id === this.selected)) this.selected = this.docs[0] ? this.docs[0].doc_id : null;
  }

  /** Take a step's `last_tool_result` (and the action that produced it). */
  absorb(actionType, payload, result) {
    if (!result || typeof result !== "object") return;
    const docId = result.doc_id || (payload && payload.doc_id);
    const toks = result.tokens || result.focus_tokens;
    if (docId && Array.isArray(toks)) {
      const m = this.tokens.get(docId) || new Map();
      for (const t of toks) if (t && t.token_id && Array.isArray(t.bbox)) m.set(t.token_id, t);
      this.tokens.set(docId, m);
      this.selected = docId;
      if (toks[0] && toks[0].page) this.page = toks[0].page;
    }
    if (actionType === "inspect_email_thread" && result.success !== false) {
      const id = result.thread_id || (payload && payload.thread_id);
      if (id) {
        this.threads.set(id, result);
        if (this.docs.some((d) => d.doc_id === id)) this.selected = id;
      }
    }
  }
}

function pageSvg(doc, page, tokens, { selectedIds, onToken }) {
  const svg = s("svg", { viewBox: `0 0 ${PAGE_W} ${PAGE_H}`, class: "page", role: "group", "aria-label": `${doc.doc_id} page ${page}` });
  svg.append(s("rect", { x: 0, y: 0, width: PAGE_W, height: PAGE_H, class: "paper" }));
  const onPage = tokens.filter((t) => (t.page || 1) === page);
  if (!onPage.length) {
    svg.append(s("text", { x: PAGE_W / 2, y: PAGE_H / 2, class: "page-empty", "text-anchor": "middle" }, "Not read yet: run ocr (or zoom) on this document"));
  }
  for (const t of onPage) {
    const [x0, y0, x1, y1] = t.bbox.map(Number);
    const hgt = Math.max(6, y1 - y0), wid = Math.max(4, x1 - x0);
    const sel = selectedIds.has(t.token_id);
    const g = s("g", { class: sel ? "tok selected" : "tok", tabindex: 0, role: "button", "aria-pressed": sel ? "true" : "false", dataset: { tokenId: t.token_id, doc: doc.doc_id } },
      s("rect", { x: x0, y: y0, width: wid, height: hgt, rx: 2 }),
      s("text", { x: x0 + 1, y: y0 + hgt * 0.78, "font-size": Math.min(14, hgt * 0.8), textLength: Math.max(4, wid - 2), lengthAdjust: "spacingAndGlyphs" }, t.text),
      s("title", {}, `${t.token_id} [${t.bbox.join(", ")}]: ${t.text}`));
    if (onToken) {
      const pick = () => onToken(doc.doc_id, t);
      g.addEventListener("click", pick);
      g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); } });
    }
    svg.append(g);
  }
  return svg;
}

/** An `inspect_email_thread` result: the thread is under `thread` (sender, subject, body,
 *  sender profile, request signals, quoted directives). */
function threadView(id, result) {
  const t = (result && result.thread) || {};
  const prof = t.sender_profile || {};
  const signals = Object.entries(t.request_signals || {}).filter(([, v]) => v).map(([k]) => k.replace(/_/g, " "));
  const line = (k, v) => (v === undefined || v === null || v === "" ? null : h("div", { class: "mail-field" }, h("b", {}, `${k}: `), String(v)));
  return h("article", { class: "thread", "aria-label": `email thread ${id}`, dataset: { thread: id } },
    h("header", {}, h("h4", { class: "mail-subject" }, t.subject || id),
      line("From", t.sender), line("Sender domain", prof.from_domain), line("Expected domain", prof.expected_domain),
      line("Domain alignment", prof.domain_alignment), line("Messages in thread", t.message_count), line("Vendor", t.vendor_key)),
    t.body ? h("div", { class: "mail mail-body" }, String(t.body).split("\n").map((p) => h("p", {}, p))) : h("p", { class: "muted" }, "The thread has no body text."),
    signals.length ? h("p", { class: "mail-signals" }, h("b", {}, "Request signals: "), signals.join(", ")) : null,
    (t.quoted_directives || []).length ? h("ul", { class: "mail-directives" }, t.quoted_directives.map((d) => h("li", {}, d))) : null);
}

/** Render the document view into `root`. `onToken(doc_id, token)` makes tokens selectable. */
export function renderDocs(root, st, { selectedIds = new Set(), onToken, onSelect } = {}) {
  if (!st.docs.length) return replace(root, h("p", { class: "muted" }, "No documents yet."));
  const tabs = h("div", { class: "doc-tabs", role: "tablist", "aria-label": "Documents" },
    st.docs.map((d) => {
      const n = (st.tokens.get(d.doc_id) || new Map()).size;
      return h("button", { type: "button", role: "tab", "aria-selected": d.doc_id === st.selected ? "true" : "false", class: "doc-tab", onclick: () => { st.selected = d.doc_id; st.page = 1; onSelect && onSelect(); } },
        `${d.doc_id} · ${d.doc_type}${n ? ` · ${n} tokens` : ""}${st.threads.has(d.doc_id) ? " · thread" : ""}`);
    }));
  const doc = st.docs.find((d) => d.doc_id === st.selected) || st.docs[0];
  const toks = [...(st.tokens.get(doc.doc_id) || new Map()).values()];
  const pages = Math.max(1, doc.page_count || 1);
  const pager = pages > 1 ? h("div", { class: "pager" }, Array.from({ length: pages }, (_, i) => h("button", { type: "button", "aria-pressed": st.page === i + 1 ? "true" : "false", onclick: () => { st.page = i + 1; onSelect && onSelect(); } }, `page ${i + 1}`))) : null;
  const thread = st.threads.get(doc.doc_id);
  const otherThreads = [...st.threads.entries()].filter(([id]) => !st.docs.some((d) => d.doc_id === id));
  replace(root, tabs,
    h("div", { class: "doc-body" },
      h("div", { class: "doc-page" }, h("p", { class: "doc-meta" }, `${doc.doc_id} (${doc.doc_type}, ${doc.language || "?"}, ${pages} page${pages > 1 ? "s" : ""}): ${doc.thumbnail || ""}`), pager, pageSvg(doc, st.page, toks, { selectedIds, onToken })),
      thread ? threadView(doc.doc_id, thread) : null,
      otherThreads.map(([id, t]) => threadView(id, t))));
  return root;
}
