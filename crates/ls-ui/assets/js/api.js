// Every call the workbench makes goes through here: the same public routes the agents use.
// Each JSON reply is also kept in `window.LS.log` (path, session, body) so tests can inspect the
// data the page holds (for example, that no gold field reached it before the terminal step).

window.LS = window.LS || { log: [] };
const MAX_LOG = 2000;

export class ApiError extends Error {
  constructor(status, body, path) {
    const msg = body && body.error ? `${body.error.code || status}: ${body.error.message || ""}` : `HTTP ${status}`;
    super(`${path}: ${msg}`);
    this.status = status;
    this.body = body;
  }
}

// The operator key, as notebook servers take their token: open the workbench once with
// `?token=<key>` (the key the server wrote to its operator key file, or ADMIN_API_KEY). It is kept
// in this tab's sessionStorage, removed from the address bar, and sent as X-API-Key, which the
// operator routes (stored runs, per-case report rows) need from every address.
const KEY_SLOT = "ledgershield-operator-key";
(function takeToken() {
  const q = new URLSearchParams(location.search);
  const token = q.get("token");
  if (!token) return;
  try { sessionStorage.setItem(KEY_SLOT, token); } catch { /* storage off: key for this page only */ window.LS.key = token; }
  q.delete("token");
  const rest = q.toString();
  history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : "") + location.hash);
})();

/** The operator key this tab was opened with, if any. */
export function operatorKey() {
  try { return sessionStorage.getItem(KEY_SLOT) || window.LS.key || null; } catch { return window.LS.key || null; }
}

/** Call a route; `body` is sent as JSON (POST by default when given), `session` as X-Session-Id. */
export async function api(path, { method, body, session } = {}) {
  const headers = { Accept: "application/json" };
  const key = operatorKey();
  if (key) headers["X-API-Key"] = key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (session) headers["X-Session-Id"] = session;
  const resp = await fetch(path, {
    method: method || (body !== undefined ? "POST" : "GET"),
    headers,
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    throw new ApiError(resp.status, { error: { code: "bad_json", message: text.slice(0, 200) } }, path);
  }
  window.LS.log.push({ path, session: session || null, status: resp.status, at: Date.now(), body: data });
  if (window.LS.log.length > MAX_LOG) window.LS.log.shift();
  if (!resp.ok) throw new ApiError(resp.status, data, path);
  return data;
}

let catalogPromise = null;
/** The workbench's vocabulary (decisions, reason codes, action costs, curated cases). */
export function catalog() {
  catalogPromise = catalogPromise || api("/ui/catalog.json");
  return catalogPromise;
}

let mcpId = 0;
/** MCP JSON-RPC: the tool list (names, descriptions with cost, payload schemas). */
export async function mcpTools() {
  const r = await api("/mcp", { body: { jsonrpc: "2.0", id: ++mcpId, method: "tools/list", params: {} } });
  return (r.result && r.result.tools) || [];
}
