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

/** Call a route; `body` is sent as JSON (POST by default when given), `session` as X-Session-Id. */
export async function api(path, { method, body, session } = {}) {
  const headers = { Accept: "application/json" };
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
