//! The API reference of both environments, against the real servers on ephemeral ports:
//! `/openapi.json` is a valid OpenAPI 3.1 document listing exactly the routes the server answers
//! (each documented method is mounted; every other method on a documented path is 405), and
//! `/docs` is an HTML page naming every path and schema with no external resource.

#[path = "support/servers.rs"]
mod servers;

use serde_json::Value;
use servers::{audit, controlbench};
use std::collections::BTreeSet;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The routes each environment serves (the README's route tables, the OpenEnv protocol, the
/// workbench and the reference itself): the document must list exactly these.
const COMMON: [&str; 10] = [
    "get /ws",
    "post /mcp",
    "get /metadata",
    "get /schema",
    "get /openapi.json",
    "get /docs",
    "get /docs/docs.css",
    "get /ui",
    "get /ui/",
    "get /ui/{path}",
];

const CONTROLBENCH: [&str; 34] = [
    "get /",
    "get /health",
    "post /reset",
    "post /step",
    "get /state",
    "get /institutional-memory",
    "post /institutional-reset",
    "delete /session",
    "get /leaderboard",
    "get /benchmark-report",
    "get /controlbench-summary",
    "get /human-baseline-summary",
    "post /certify",
    "get /certify-summary",
    "get /controlbench-visualization",
    "get /runs",
    "get /runs/{run_id}",
    "get /runs/{run_id}/episodes/{idx}",
    "post /agent-runs",
    "post /hand-runs",
    "get /comparisons",
    "get /comparisons/{comparison_id}",
    "post /counterfactual",
    "get /watchdog/observation",
    "post /watchdog/verdict",
    "post /watchdog/credential",
    "post /watchdog/pair",
    "get /watchdog/ws",
    "get /watchdog/joint",
    "post /sealed-runs",
    "get /sealed-runs/{run_id}",
    "post /sealed-runs/{run_id}/reset",
    "post /sealed-runs/{run_id}/score",
    "get /sealed-runs/{run_id}/episodes",
];

const AUDIT: [&str; 28] = [
    "get /",
    "get /health",
    "get /tasks",
    "post /reset",
    "post /step",
    "get /state",
    "post /session",
    "delete /session",
    "get /grader",
    "post /campaign/start",
    "get /campaign/state",
    "get /campaign/state/{campaign_id}",
    "post /campaign/task/start",
    "post /campaign/task/submit",
    "post /campaign/action",
    "post /campaign/period/advance",
    "post /campaign/period",
    "post /overseer/review",
    "get /overseer/report",
    "post /self-improve",
    "get /self-improve/history",
    "get /leaderboard",
    "post /leaderboard",
    "post /leaderboard/run",
    "get /metrics",
    "get /adaptive-difficulty",
    "get /adversarial/state",
    "post /baseline",
];

async fn openapi(base: &str) -> Value {
    let r = reqwest::get(format!("{base}/openapi.json")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    r.json().await.unwrap()
}

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if let Some(op) = item.get(m) {
                out.push((m.to_owned(), path.clone(), op.clone()));
            }
        }
    }
    out
}

fn documented(doc: &Value) -> BTreeSet<String> {
    operations(doc)
        .into_iter()
        .map(|(m, p, _)| format!("{m} {p}"))
        .collect()
}

/// Every `$ref` in the document points at something the document defines.
fn assert_refs_resolve(doc: &Value, v: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let pointer = r.strip_prefix('#').expect("local $ref");
                assert!(doc.pointer(pointer).is_some(), "dangling $ref {r}");
            }
            m.values().for_each(|c| assert_refs_resolve(doc, c));
        }
        Value::Array(a) => a.iter().for_each(|c| assert_refs_resolve(doc, c)),
        _ => {}
    }
}

/// OpenAPI 3.1 structure: the typed parser accepts it, and each operation has what a reader and
/// a client generator need.
fn assert_valid_openapi(doc: &Value) {
    let spec = oas3::from_json(doc.to_string()).expect("parses as OpenAPI 3.1");
    assert_eq!(spec.validate_version().unwrap().major, 3);
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["info"]["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(
        doc["info"]["version"],
        ls_server::openapi::OPENAPI_API_VERSION
    );
    let mut ids = BTreeSet::new();
    for (_, method, op) in spec.operations() {
        let id = op.operation_id.clone().expect("operationId");
        assert!(ids.insert(id.clone()), "operationId {id} twice");
        assert!(
            op.summary.as_deref().is_some_and(|s| !s.is_empty()),
            "{id}: no summary"
        );
        assert!(!op.tags.is_empty(), "{id}: no tag");
        op.parameters(&spec).expect("parameters resolve");
        op.request_body(&spec).expect("request body resolves");
        let responses = op.responses(&spec);
        assert!(
            responses
                .keys()
                .any(|k| k.starts_with('2') || k.starts_with('3') || k == "101"),
            "{method} {id}: no success reply"
        );
        assert!(responses.contains_key("4XX"), "{id}: no error reply");
    }
    let declared: BTreeSet<&str> = doc["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for (m, path, op) in operations(doc) {
        assert!(declared.contains(op["tags"][0].as_str().unwrap()));
        // Each `{name}` of the template is a required path parameter, and nothing else is.
        let names: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        let params: BTreeSet<&str> = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "path")
            .inspect(|p| assert_eq!(p["required"], true, "{m} {path}"))
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, params, "{m} {path}: path parameters");
        if op["requestBody"].is_object() {
            assert!(op["requestBody"]["content"]["application/json"]["schema"].is_object());
        }
    }
    assert_refs_resolve(doc, doc);
}

fn sample(path: &str, op: &Value) -> String {
    let mut out = path.to_owned();
    for p in op["parameters"].as_array().into_iter().flatten() {
        if p["in"] == "path" {
            let name = p["name"].as_str().unwrap();
            let value = match &p["example"] {
                Value::String(s) => s.clone(),
                Value::Null => "x".to_owned(),
                v => v.to_string(),
            };
            out = out.replace(&format!("{{{name}}}"), &value);
        }
    }
    out
}

/// Whether a reply is the router's own "no such route" or "wrong method" answer.
async fn router_refused(r: reqwest::Response) -> Option<String> {
    let status = r.status().as_u16();
    if status == 405 {
        return Some("405".into());
    }
    if status != 404 {
        return None;
    }
    let body: Value = r.json().await.unwrap_or(Value::Null);
    let code = body["error"]["code"].as_str().unwrap_or("");
    let message = body["error"]["message"].as_str().unwrap_or("");
    (code == "route_not_found" || message.starts_with("no route for"))
        .then(|| format!("404 {code} {message}"))
}

async fn request(c: &reqwest::Client, base: &str, method: &str, path: &str) -> reqwest::Response {
    let m = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap();
    let mut req = c.request(m, format!("{base}{path}"));
    if method != "get" {
        // Invalid JSON: every body-reading handler refuses it before doing any work.
        req = req.header("content-type", "application/json").body("{");
    }
    req.send().await.unwrap()
}

/// Each documented operation is mounted; each other method on a documented path is 405.
async fn assert_document_matches_router(base: &str, doc: &Value) {
    let c = reqwest::Client::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            let op = item.get(m);
            let url = sample(path, op.or(item.get("get")).unwrap_or(&Value::Null));
            let r = request(&c, base, m, &url).await;
            match op {
                Some(_) => {
                    if let Some(why) = router_refused(r).await {
                        panic!("documented {m} {path} is not mounted ({url}: {why})");
                    }
                }
                None => assert_eq!(r.status(), 405, "undocumented {m} {path} is served"),
            }
        }
    }
    // The probe itself tells an unmounted path from a mounted one.
    let r = request(&c, base, "get", "/no-such-route").await;
    assert!(router_refused(r).await.is_some());
}

async fn check_openapi(base: &str, expected: &[&str]) -> Value {
    let doc = openapi(base).await;
    assert_valid_openapi(&doc);
    let want: BTreeSet<String> = COMMON
        .iter()
        .chain(expected)
        .map(|s| s.to_string())
        .collect();
    assert_eq!(documented(&doc), want);
    assert_document_matches_router(base, &doc).await;
    doc
}

#[tokio::test]
async fn controlbench_openapi_lists_exactly_the_mounted_routes() {
    let base = controlbench().await;
    let doc = check_openapi(&base, &CONTROLBENCH).await;
    // Typed bodies: the request and reply schemas of the episode routes are the Rust types'.
    let reset = &doc["paths"]["/reset"]["post"];
    assert_eq!(
        reset["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ResetRequest"
    );
    assert_eq!(
        reset["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/StepEnvelope"
    );
    assert!(doc["components"]["schemas"]["ResetRequest"]["properties"]["case_id"].is_object());
    // An empty body is a valid reset, never a valid step.
    assert_eq!(reset["requestBody"]["required"], false);
    assert_eq!(
        doc["paths"]["/step"]["post"]["requestBody"]["required"],
        true
    );
    let header = reset["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["in"] == "header")
        .unwrap();
    assert_eq!(header["name"], "X-Session-Id");
    // Operator routes say so, from the same rule the security guard applies.
    assert_eq!(doc["paths"]["/runs"]["get"]["x-operator"], true);
    assert_eq!(doc["paths"]["/runs/{run_id}"]["get"]["x-operator"], true);
    assert_eq!(doc["paths"]["/agent-runs"]["post"]["x-operator"], true);
    // A sealed run's per-case grades are the operator's; playing and scoring it is not.
    let sealed = &doc["paths"]["/sealed-runs/{run_id}/episodes"]["get"];
    assert_eq!(sealed["x-operator"], true);
    assert!(doc["paths"]["/sealed-runs/{run_id}/score"]["post"]
        .get("x-operator")
        .is_none());
    assert_eq!(
        doc["paths"]["/institutional-reset"]["post"]["x-operator"],
        true
    );
    assert!(doc["paths"]["/step"]["post"].get("x-operator").is_none());
    let err = &doc["components"]["responses"]["ClientError"]["content"]["application/json"];
    assert_eq!(err["schema"]["$ref"], "#/components/schemas/ApiError");
}

#[tokio::test]
async fn audit_openapi_lists_exactly_the_mounted_routes() {
    let base = audit().await;
    let doc = check_openapi(&base, &AUDIT).await;
    let submit = &doc["paths"]["/campaign/task/submit"]["post"];
    assert_eq!(
        submit["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/SubmitReq"
    );
    assert!(doc["components"]["schemas"]["SubmitReq"]["properties"]["findings"].is_object());
    assert_eq!(submit["requestBody"]["required"], true);
    assert_eq!(
        doc["paths"]["/campaign/start"]["post"]["requestBody"]["required"],
        false
    );
    assert!(
        submit.get("x-operator").is_none(),
        "campaign routes are agent-facing"
    );
    assert_eq!(
        doc["paths"]["/state"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            ["$ref"],
        "#/components/schemas/AuditState"
    );
    let q: Vec<&str> = doc["paths"]["/overseer/report"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(q, ["campaign_id"]);
    assert!(doc["paths"]["/leaderboard"]["get"]
        .get("x-operator")
        .is_none());
    assert!(doc["paths"]["/leaderboard"]["post"]
        .get("x-operator")
        .is_none());
}

/// No attribute or stylesheet rule that would load something from another origin.
fn assert_no_external_resources(text: &str) {
    let lower = text.to_ascii_lowercase();
    for bad in [
        "<script",
        "src=\"http",
        "src=\"//",
        "href=\"http",
        "href=\"//",
        "@import",
        "url(",
    ] {
        assert!(!lower.contains(bad), "the reference page contains {bad}");
    }
}

async fn check_docs(base: &str) {
    let doc = openapi(base).await;
    let r = reqwest::get(format!("{base}/docs")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(
        r.headers()["content-security-policy"],
        ls_server::openapi::DOCS_CONTENT_SECURITY_POLICY
    );
    let html = r.text().await.unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains("href=\"/openapi.json\""));
    for (m, path, op) in operations(&doc) {
        assert!(
            html.contains(&format!("<code>{path}</code>")),
            "docs lack {path}"
        );
        let id = op["operationId"].as_str().unwrap();
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "docs lack {m} {path}"
        );
    }
    for name in doc["components"]["schemas"].as_object().unwrap().keys() {
        assert!(
            html.contains(&format!(">{name}</h3>")),
            "docs lack schema {name}"
        );
    }
    assert_no_external_resources(&html);
    let css = reqwest::get(format!("{base}/docs/docs.css")).await.unwrap();
    assert_eq!(css.status(), 200);
    assert_eq!(css.headers()["content-type"], "text/css; charset=utf-8");
    assert_no_external_resources(&css.text().await.unwrap());
}

#[tokio::test]
async fn controlbench_docs_page_is_self_contained() {
    check_docs(&controlbench().await).await;
}

#[tokio::test]
async fn audit_docs_page_is_self_contained() {
    check_docs(&audit().await).await;
}
