// SVG charts drawn from data: a horizontal bar ladder, a scatter with non-overlapping labels, a
// step/line timeline, and a layered node-link graph. Every mark is focusable and has a <title>
// (hover or keyboard focus shows its value in the chart's caption line).
import { h, s, num } from "./dom.js";

const PAD = { l: 200, r: 20, t: 16, b: 34 };

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function ticks(max, n = 5) {
  return Array.from({ length: n + 1 }, (_, i) => (max * i) / n);
}

/** Wrap an SVG with a caption line that follows hover/focus of any element with data-label. */
function frame(title, svg, note) {
  const caption = h("p", { class: "chart-caption", "aria-live": "polite" }, note || "Hover or focus a mark for its value.");
  const show = (e) => {
    const t = e.target.closest("[data-label]");
    if (t) caption.textContent = t.dataset.label;
  };
  svg.addEventListener("mouseover", show);
  svg.addEventListener("focusin", show);
  return h("figure", { class: "chart" }, h("figcaption", {}, title), svg, caption);
}

function mark(el, label) {
  el.setAttribute("tabindex", "0");
  el.dataset.label = label;
  el.append(s("title", {}, label));
  return el;
}

/** Horizontal bars: rows of {label, value}, shared x axis [0, max]. `fmt` formats values. */
export function bars(title, rows, { max, fmt = (v) => num(v, 3), unit = "" } = {}) {
  const W = 640, rowH = 22;
  const H = PAD.t + PAD.b + rows.length * rowH;
  const top = max ?? niceMax(Math.max(0, ...rows.map((r) => r.value)));
  const x = (v) => PAD.l + ((W - PAD.l - PAD.r) * Math.max(0, v)) / top;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "svg-chart", role: "img", "aria-label": title });
  for (const t of ticks(top)) {
    svg.append(s("line", { x1: x(t), x2: x(t), y1: PAD.t, y2: H - PAD.b, class: "grid" }),
      s("text", { x: x(t), y: H - PAD.b + 14, class: "tick", "text-anchor": "middle" }, fmt(t)));
  }
  svg.append(s("text", { x: W - PAD.r, y: H - 4, class: "axis-label", "text-anchor": "end" }, unit));
  rows.forEach((r, i) => {
    const y = PAD.t + i * rowH;
    svg.append(s("text", { x: PAD.l - 6, y: y + rowH * 0.65, class: "row-label", "text-anchor": "end" }, r.label.length > 30 ? `${r.label.slice(0, 29)}…` : r.label));
    const bar = s("rect", { x: PAD.l, y: y + 3, width: Math.max(1, x(r.value) - PAD.l), height: rowH - 6, class: `bar ${r.cls || ""}` });
    svg.append(mark(bar, `${r.label}: ${fmt(r.value)}${unit ? " " + unit : ""}`));
  });
  return frame(title, svg);
}

/** Greedy label placement: each label goes to the first of several offsets that overlaps no
 *  placed label box and stays inside the plot. */
function placeLabels(points, W, H) {
  const placed = [];
  const offsets = [[8, -6], [8, 14], [-8, -6], [-8, 14], [8, 28], [-8, 28], [8, -20], [-8, -20]];
  return points.map((p) => {
    const w = p.label.length * 6.2, hgt = 12;
    for (const [dx, dy] of offsets) {
      const x0 = dx > 0 ? p.x + dx : p.x + dx - w;
      const box = { x0, y0: p.y + dy - hgt + 2, x1: x0 + w, y1: p.y + dy + 2 };
      const inside = box.x0 >= 2 && box.x1 <= W - 2 && box.y0 >= 2 && box.y1 <= H - 2;
      const free = placed.every((b) => box.x1 < b.x0 || box.x0 > b.x1 || box.y1 < b.y0 || box.y0 > b.y1);
      if (inside && free) {
        placed.push(box);
        return { x: box.x0, y: p.y + dy, anchor: "start", shown: true };
      }
    }
    return { shown: false };
  });
}

/** Scatter of {label, x, y}; labels never overlap (a label with no free spot is left to the
 *  mark's tooltip). */
export function scatter(title, pts, { xLabel, yLabel, xMax, yMax, xFmt = (v) => num(v, 2), yFmt = (v) => num(v, 2) } = {}) {
  const W = 640, H = 340, L = 60;
  const xm = xMax ?? niceMax(Math.max(0, ...pts.map((p) => p.x)));
  const ym = yMax ?? niceMax(Math.max(0, ...pts.map((p) => p.y)));
  const X = (v) => L + ((W - L - PAD.r) * v) / xm;
  const Y = (v) => H - PAD.b - ((H - PAD.b - PAD.t) * v) / ym;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "svg-chart", role: "img", "aria-label": title });
  for (const t of ticks(xm)) svg.append(s("line", { x1: X(t), x2: X(t), y1: PAD.t, y2: H - PAD.b, class: "grid" }), s("text", { x: X(t), y: H - PAD.b + 14, class: "tick", "text-anchor": "middle" }, xFmt(t)));
  for (const t of ticks(ym)) svg.append(s("line", { x1: L, x2: W - PAD.r, y1: Y(t), y2: Y(t), class: "grid" }), s("text", { x: L - 6, y: Y(t) + 4, class: "tick", "text-anchor": "end" }, yFmt(t)));
  svg.append(s("text", { x: (W + L) / 2, y: H - 4, class: "axis-label", "text-anchor": "middle" }, xLabel || ""),
    s("text", { x: 12, y: PAD.t + 4, class: "axis-label", transform: `rotate(-90 12 ${PAD.t + 4})`, "text-anchor": "end" }, yLabel || ""));
  const screen = pts.map((p) => ({ ...p, sx: X(p.x), sy: Y(p.y) }));
  const labels = placeLabels(screen.map((p) => ({ x: p.sx, y: p.sy, label: p.label })), W, H);
  screen.forEach((p, i) => {
    svg.append(mark(s("circle", { cx: p.sx, cy: p.sy, r: 6, class: `dot ${p.cls || ""}` }), `${p.label}: ${xLabel} ${xFmt(p.x)}, ${yLabel} ${yFmt(p.y)}`));
    const l = labels[i];
    if (l.shown) svg.append(s("text", { x: l.x, y: l.y, class: "point-label", "text-anchor": l.anchor }, p.label));
  });
  return frame(title, svg);
}

/** Step line over an index axis: series of {name, points: [{x, y, label}]}. */
export function timeline(title, series, { yLabel = "", yMax, yFmt = (v) => num(v, 2), categories } = {}) {
  const W = 640, H = 260, L = categories ? 140 : 50;
  const all = series.flatMap((sr) => sr.points);
  const xm = Math.max(1, ...all.map((p) => p.x));
  // Categories sit on the integer rows 0 .. n-1, bottom to top.
  const ym = categories ? Math.max(1, categories.length - 1) : yMax ?? niceMax(Math.max(0, ...all.map((p) => p.y)));
  const X = (v) => L + ((W - L - PAD.r) * v) / xm;
  const Y = (v) => H - PAD.b - ((H - PAD.b - PAD.t) * v) / ym;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "svg-chart", role: "img", "aria-label": title });
  const yt = categories ? categories.map((_, i) => i) : ticks(ym, 4);
  for (const t of yt) svg.append(s("line", { x1: L, x2: W - PAD.r, y1: Y(t), y2: Y(t), class: "grid" }), s("text", { x: L - 6, y: Y(t) + 4, class: "tick", "text-anchor": "end" }, categories ? categories[t] : yFmt(t)));
  for (const t of ticks(xm, Math.min(xm, 8))) svg.append(s("text", { x: X(t), y: H - PAD.b + 14, class: "tick", "text-anchor": "middle" }, Math.round(t)));
  svg.append(s("text", { x: W - PAD.r, y: H - 4, class: "axis-label", "text-anchor": "end" }, "episode"), s("text", { x: 4, y: 12, class: "axis-label" }, yLabel));
  series.forEach((sr, k) => {
    const d = sr.points.map((p, i) => `${i ? "L" : "M"}${X(p.x)},${Y(p.y)}`).join(" ");
    svg.append(s("path", { d, class: `line series-${k}` }));
    for (const p of sr.points) svg.append(mark(s("circle", { cx: X(p.x), cy: Y(p.y), r: 4, class: `dot series-${k}` }), p.label || `${sr.name} #${p.x}: ${categories ? categories[p.y] : yFmt(p.y)}`));
  });
  return frame(title, svg);
}

const NODE_W = 150, NODE_H = 32, NODE_CHARS = 20;

/** A node label in at most two lines that fit the node box (words kept whole where they fit; the
 *  full label is in the node's title). */
export function nodeLines(label) {
  const lines = [];
  let cur = "";
  for (const w of label.split(/(?<=[\s_./:-])/)) {
    if ((cur + w).length <= NODE_CHARS) cur += w;
    else {
      if (cur) lines.push(cur);
      cur = w;
      while (cur.length > NODE_CHARS) { lines.push(cur.slice(0, NODE_CHARS)); cur = cur.slice(NODE_CHARS); }
    }
  }
  if (cur) lines.push(cur);
  if (lines.length <= 2) return lines.map((l) => l.trim());
  return [lines[0].trim(), `${lines[1].trim().slice(0, NODE_CHARS - 1)}…`];
}

/** Layered node-link graph. nodes: [{id, label, type}], edges: [{source, target, label}].
 *  Layers follow the node type order given (unknown types last). Clicking or focusing a node
 *  shows its details. */
export function graph(title, nodes, edges, { typeOrder = [], detail } = {}) {
  const types = [...new Set([...typeOrder.filter((t) => nodes.some((n) => n.type === t)), ...nodes.map((n) => n.type)])];
  const layers = types.map((t) => nodes.filter((n) => n.type === t));
  const colW = 190, rowH = 46;
  const W = Math.max(640, types.length * colW + 40);
  const H = Math.max(160, Math.max(...layers.map((l) => l.length), 1) * rowH + 50);
  const pos = new Map();
  layers.forEach((layer, i) => layer.forEach((n, j) => pos.set(n.id, { x: 20 + i * colW, y: 36 + j * rowH + (H - 50 - layer.length * rowH) / 2 })));
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "svg-chart graph", role: "img", "aria-label": title });
  svg.append(s("defs", {}, s("marker", { id: `arrow-${title.replace(/\W/g, "")}`, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }))));
  types.forEach((t, i) => svg.append(s("text", { x: 20 + i * colW, y: 16, class: "tick" }, t)));
  const markerRef = `url(#arrow-${title.replace(/\W/g, "")})`;
  for (const e of edges) {
    const a = pos.get(e.source), b = pos.get(e.target);
    if (!a || !b) continue;
    const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
    const back = x2 <= x1;
    const d = back ? `M${a.x + NODE_W / 2},${a.y + NODE_H} C${a.x + NODE_W / 2},${a.y + 64} ${b.x + NODE_W / 2},${b.y + 64} ${b.x + NODE_W / 2},${b.y + NODE_H}` : `M${x1},${y1} C${x1 + 30},${y1} ${x2 - 30},${y2} ${x2},${y2}`;
    svg.append(mark(s("path", { d, class: "edge", "marker-end": markerRef }), `${e.source} —${e.label || ""}→ ${e.target}`));
  }
  for (const n of nodes) {
    const p = pos.get(n.id);
    const g = mark(s("g", { class: `node type-${String(n.type).replace(/\W/g, "_")}`, transform: `translate(${p.x},${p.y})`, role: "button" },
      s("rect", { width: NODE_W, height: NODE_H, rx: 5 }),
      nodeLines(String(n.label || n.id)).map((l, k) => s("text", { x: 6, y: 14 + k * 13, class: "node-label" }, l))), `${n.type}: ${n.label || n.id}`);
    if (detail) {
      const open = () => detail(n);
      g.addEventListener("click", open);
      g.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(); } });
    }
    svg.append(g);
  }
  return frame(title, svg, `${nodes.length} nodes, ${edges.length} edges. Focus a node or edge for details.`);
}

/** Artifacts on the case clock: a "now" line, pending artifacts at their ready clock (hollow),
 *  arrived ones at their arrival clock (filled). items: [{label, at, arrived}]. */
export function clockline(title, now, items) {
  const W = 320, rowH = 20, L = 8;
  const H = 30 + Math.max(1, items.length) * rowH;
  const max = Math.max(now + 1, ...items.map((i) => i.at + 1), 4);
  const X = (v) => L + ((W - L - 12) * v) / max;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "svg-chart clockline", role: "img", "aria-label": title });
  for (let c = 0; c <= max; c++) svg.append(s("text", { x: X(c), y: H - 4, class: "tick", "text-anchor": "middle" }, c));
  svg.append(mark(s("line", { x1: X(now), x2: X(now), y1: 4, y2: H - 16, class: "now" }), `now: clock ${now}`));
  items.forEach((it, i) => {
    const y = 12 + i * rowH;
    svg.append(s("line", { x1: X(0), x2: X(max), y1: y, y2: y, class: "grid" }),
      mark(s("circle", { cx: X(it.at), cy: y, r: 5, class: it.arrived ? "dot arrived" : "dot pending" }), `${it.label}: ${it.arrived ? "arrived" : "ready"} at clock ${it.at}`),
      s("text", { x: X(it.at) + (it.at > max / 2 ? -8 : 8), y: y + 4, class: "point-label", "text-anchor": it.at > max / 2 ? "end" : "start" }, it.label));
  });
  return frame(title, svg);
}

/**
 * Authority level over a sequence, on the server's own levels (`levels`: most authority first, as
 * /ui/catalog.json lists them). The axis reads bottom to top from the least authority to full; a
 * level the server did not list is named under the chart rather than drawn on a wrong row.
 * points: [{x, level, label}].
 */
export function authorityTimeline(title, points, levels) {
  const categories = [...levels].reverse();
  const known = points.filter((p) => categories.includes(p.level));
  const unknown = [...new Set(points.filter((p) => !categories.includes(p.level)).map((p) => p.level))];
  const fig = timeline(title, [{ name: "authority", points: known.map((p) => ({ x: p.x, y: categories.indexOf(p.level), label: p.label })) }], { categories });
  if (unknown.length) fig.append(h("p", { class: "error" }, `Levels not in the server's list: ${unknown.join(", ")}`));
  return fig;
}
