// Workbench entry: picks the pages for the environment this server runs, routes by URL hash.
import { api } from "./api.js";
import { h, replace, errorBox } from "./dom.js";
import * as play from "./play.js";
import * as replay from "./replay.js";
import * as board from "./board.js";
import * as institution from "./institution.js";
import * as audit from "./audit.js";
import * as auditEpisode from "./audit_episode.js";
import * as runner from "./runner.js";

const PAGES = {
  controlbench: [
    ["play", "Play", play],
    ["replay", "Replay", replay],
    ["board", "Leaderboard & report", board],
    ["institution", "Institution", institution],
    ["agents", "Run an agent", runner],
  ],
  audit: [["audit", "Audit campaigns", audit], ["episode", "Audit episode", auditEpisode]],
};

let pages = [];
let generation = 0;

/** The hash as page name and arguments: `#replay/<run>/<idx>` is ["replay", "<run>", "<idx>"]. */
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map((p) => decodeURIComponent(p));
  return { name: parts[0], args: parts.slice(1).filter(Boolean) };
}

function current() {
  const { name } = route();
  return pages.find((p) => p[0] === name) || pages[0];
}

async function show() {
  const [name, , mod] = current();
  for (const b of document.querySelectorAll("#tabs a")) {
    if (b.dataset.page === name) b.setAttribute("aria-current", "page");
    else b.removeAttribute("aria-current");
  }
  // Each page mounts into its own slot, attached only if no later navigation superseded it (a
  // slow page must not overwrite the one the user moved on to).
  const gen = ++generation;
  const view = document.getElementById("view");
  const slot = h("div", { class: "page-slot", dataset: { page: name } });
  replace(view, h("p", { class: "muted" }, "Loading…"));
  try {
    await mod.mount(slot, route().args);
  } catch (e) {
    replace(slot, errorBox(e));
  }
  if (gen === generation) replace(view, slot);
}

async function start() {
  const root = await api("/");
  const env = root && root.name === "financial_audit_env" ? "audit" : "controlbench";
  document.body.dataset.env = env;
  document.getElementById("env-badge").textContent = env === "audit" ? "Financial Audit" : "ControlBench";
  pages = PAGES[env];
  replace(document.getElementById("tabs"),
    // A tab click on the page already shown (same hash, so no hashchange) shows it afresh.
    pages.map(([name, label]) => h("a", { href: `#${name}`, dataset: { page: name }, onclick: () => { if (location.hash === `#${name}`) show(); } }, label)));
  window.addEventListener("hashchange", show);
  await show();
}

start().catch((e) => replace(document.getElementById("view"), errorBox(e)));
