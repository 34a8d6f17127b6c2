// A mock OpenAI-compatible endpoint for the browser tests (started by scripts/ci-ui.sh): it
// answers POST /v1/chat/completions with two scripted policies of different strength. A model
// whose name contains "strong" follows the heuristic planner's suggestion when its prompt carries
// one, else looks the vendor up once and submits NEEDS_REVIEW; any other model submits PAY at
// once. Prints "mock llm listening on <url>" once bound to an ephemeral loopback port.
import http from "node:http";

function reply(body) {
  const model = String(body.model || "");
  const msgs = Array.isArray(body.messages) ? body.messages : [];
  const user = String((msgs[1] && msgs[1].content) || (msgs.at(-1) || {}).content || "");
  const hintLine = user.split("\n").find((l) => l.startsWith("A heuristic planner suggests: "));
  let action;
  if (!model.includes("strong")) {
    action = { action_type: "submit_decision", payload: { decision: "PAY", confidence: 0.9 } };
  } else if (hintLine) {
    try { action = JSON.parse(hintLine.slice("A heuristic planner suggests: ".length)); } catch { action = null; }
  }
  if (!action) {
    action = user.includes("Previous actions: lookup_vendor")
      ? { action_type: "submit_decision", payload: { decision: "NEEDS_REVIEW", confidence: 0.7 } }
      : { action_type: "lookup_vendor", payload: { vendor_key: "unknown" } };
  }
  return { id: "mock", object: "chat.completion", model, choices: [{ index: 0, message: { role: "assistant", content: JSON.stringify(action) }, finish_reason: "stop" }] };
}

const server = http.createServer((req, res) => {
  let data = "";
  req.on("data", (c) => { data += c; if (data.length > 4 << 20) req.destroy(); });
  req.on("end", () => {
    if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
      return;
    }
    let body = {};
    try { body = JSON.parse(data || "{}"); } catch { /* an empty request gets the weak policy */ }
    const out = JSON.stringify(reply(body));
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(out) });
    res.end(out);
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(`mock llm listening on http://127.0.0.1:${server.address().port}/v1`);
});
