//! The API reference of an application, built from its route table ([`crate::route_table`]):
//! `GET /openapi.json` (an OpenAPI 3.1 document) and `GET /docs` (the same document as a
//! server-rendered HTML page with a same-origin stylesheet, `GET /docs/docs.css`; no script, no
//! external resource, so it works offline). Both are built once, when the router is built.

use crate::discovery::{component_generator, component_generator_serialize};
use crate::route_table::{ApiRoutes, BodyDoc, ParamIn, RouteDoc};
use crate::security::OperatorRoutes;
use axum::body::Bytes;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Router;
use schemars::SchemaGenerator;
use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};

/// The OpenAPI `info.version`: the OpenEnv HTTP API profile implemented (`openenv-http/1.x`).
pub const OPENAPI_API_VERSION: &str = "1.0.0";

/// The policy of the `/docs` page: its own stylesheet, nothing else (no script at all).
pub const DOCS_CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const DOCS_CSS: &str = include_str!("docs.css");

/// What the document says about the application as a whole.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiInfo {
    pub title: String,
    pub description: String,
    pub environment_version: Option<String>,
}

impl ApiInfo {
    /// From a service's `/metadata`.
    pub fn of<S: crate::protocol::OpenEnvService>(svc: &S) -> Self {
        let meta = svc.metadata();
        Self {
            title: format!("{} (OpenEnv)", meta.name),
            description: meta.description,
            environment_version: meta.version,
        }
    }
}

/// Tags in the order the reference lists them, with a line each.
const TAGS: [(&str, &str); 12] = [
    ("service", "Probes and the service banner."),
    (
        "episode",
        "One episode in a session: reset, step, state and grade.",
    ),
    (
        "session",
        "Named sessions (`X-Session-Id`) and their memory.",
    ),
    (
        "campaign",
        "Multi-period audit campaigns (operator routes).",
    ),
    (
        "overseer",
        "The campaign overseer's review and report (operator routes).",
    ),
    (
        "self-improvement",
        "Self-improvement loops over a campaign (operator routes).",
    ),
    (
        "reports",
        "Report-backed product endpoints and stored runs.",
    ),
    ("adversary", "The adaptive adversary and difficulty."),
    (
        "openenv",
        "The OpenEnv protocol: WebSocket sessions, MCP and discovery.",
    ),
    ("reference", "This API reference."),
    ("workbench", "The browser workbench at `/ui/`."),
    ("other", "Other routes."),
];

/// A path with each parameter replaced by its example (or `x`): a concrete URL of the route.
pub fn sample_path(doc: &RouteDoc) -> String {
    let mut out = String::new();
    for seg in doc.path.split('/').skip(1) {
        out.push('/');
        match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => {
                let name = name.trim_start_matches('*');
                let example = doc
                    .params
                    .iter()
                    .find(|p| p.location == ParamIn::Path && p.name == name)
                    .and_then(|p| p.example.as_ref());
                match example {
                    Some(Value::String(s)) => out.push_str(s),
                    Some(v) => out.push_str(&v.to_string()),
                    None => out.push('x'),
                }
            }
            None => out.push_str(seg),
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

fn operation_id(doc: &RouteDoc) -> String {
    let parts: Vec<String> = doc
        .path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(
            |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => format!("by_{}", name.trim_start_matches('*')),
                None => seg.replace(['-', '.'], "_"),
            },
        )
        .collect();
    let mut path = if parts.is_empty() {
        "root".to_owned()
    } else {
        parts.join("_")
    };
    // `/ui/` is not `/ui`.
    if doc.path.len() > 1 && doc.path.ends_with('/') {
        path.push_str("_index");
    }
    format!("{}_{path}", doc.method.as_str().to_ascii_lowercase())
}

fn parameters(doc: &RouteDoc) -> Vec<Value> {
    let mut out = Vec::new();
    for name in doc.path_names() {
        let p = doc
            .params
            .iter()
            .find(|p| p.location == ParamIn::Path && p.name == name);
        let mut v = json!({
            "name": name, "in": "path", "required": true,
            "description": p.map_or("", |p| p.description),
            "schema": p.map_or_else(|| json!({"type": "string"}), |p| p.schema.clone()),
        });
        if let Some(e) = p.and_then(|p| p.example.clone()) {
            v["example"] = e;
        }
        out.push(v);
    }
    for p in doc.params.iter().filter(|p| p.location != ParamIn::Path) {
        out.push(json!({
            "name": p.name, "in": p.location.as_str(), "required": p.required,
            "description": p.description, "schema": p.schema,
        }));
    }
    out
}

fn content(body: &BodyDoc, g: &mut SchemaGenerator) -> Value {
    let schema = body.schema.map_or_else(
        || {
            if body.media.starts_with("application/json") {
                json!({"type": "object"})
            } else {
                json!({"type": "string"})
            }
        },
        |f| f(g).to_value(),
    );
    json!({body.media: {"schema": schema}})
}

fn responses(doc: &RouteDoc, g: &mut SchemaGenerator) -> Value {
    let mut out = Map::new();
    if doc.responses.is_empty() {
        out.insert(
            "200".into(),
            json!({"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}),
        );
    }
    for (code, body) in &doc.responses {
        let mut r = json!({"description": if body.description.is_empty() { "OK" } else { body.description }});
        if *code != 101 && *code != 304 {
            r["content"] = content(body, g);
        }
        out.insert(code.to_string(), r);
    }
    out.insert(
        "4XX".into(),
        json!({"$ref": "#/components/responses/ClientError"}),
    );
    out.insert(
        "5XX".into(),
        json!({"$ref": "#/components/responses/ServerError"}),
    );
    Value::Object(out)
}

const OPERATOR_NOTE: &str = "Operator route: send the operator key as `X-API-Key` (`ADMIN_API_KEY`, or the key the server generated into its operator key file at start); 403 without it, from every address.";

fn operation(
    doc: &RouteDoc,
    operator: bool,
    req: &mut SchemaGenerator,
    resp: &mut SchemaGenerator,
) -> Value {
    let mut op = json!({
        "tags": [doc.tag],
        "summary": doc.summary,
        "operationId": operation_id(doc),
    });
    let mut description = doc.description.unwrap_or("").to_owned();
    if operator {
        if !description.is_empty() {
            description.push_str("\n\n");
        }
        description.push_str(OPERATOR_NOTE);
        op["security"] = json!([{"adminKey": []}]);
        op["x-operator"] = json!(true);
    }
    if !description.is_empty() {
        op["description"] = json!(description);
    }
    let params = parameters(doc);
    if !params.is_empty() {
        op["parameters"] = Value::Array(params);
    }
    if let Some(body) = &doc.request {
        op["requestBody"] = json!({
            "required": false,
            "description": body.description,
            "content": content(body, req),
        });
    }
    op["responses"] = responses(doc, resp);
    op
}

fn error_schema() -> Value {
    json!({
        "type": "object",
        "description": "The one error shape of both environments: a stable machine code, a bounded message, and a detail line.",
        "required": ["error", "detail"],
        "properties": {
            "error": {"type": "object", "required": ["code", "message"], "properties": {
                "code": {"type": "string", "description": "machine-readable code, e.g. validation_error, unknown_session, rate_limited"},
                "message": {"type": "string", "description": "what was wrong (quotes at most a short prefix of the input)"}}},
            "detail": {"type": "string"},
        },
    })
}

/// Component schemas of both generators; a name both define differently is reported.
fn merge_components(
    req: SchemaGenerator,
    resp: SchemaGenerator,
) -> (Map<String, Value>, Vec<String>) {
    let mut req = req;
    let mut resp = resp;
    let mut defs = req.take_definitions(true);
    let mut conflicts = Vec::new();
    for (name, schema) in resp.take_definitions(true) {
        match defs.get(&name) {
            Some(existing) if *existing != schema => conflicts.push(name),
            Some(_) => {}
            None => {
                defs.insert(name, schema);
            }
        }
    }
    defs.insert("ApiError".into(), error_schema());
    (defs, conflicts)
}

/// Whether a body schema requires some field (then an empty body cannot be valid): a `$ref` to
/// a component with `required` fields, or `anyOf` alternatives that all require one.
fn requires_fields(schema: &Value, defs: &Map<String, Value>) -> bool {
    if let Some(name) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
    {
        return defs.get(name).is_some_and(|d| requires_fields(d, defs));
    }
    if let Some(alts) = schema.get("anyOf").and_then(Value::as_array) {
        return !alts.is_empty() && alts.iter().all(|a| requires_fields(a, defs));
    }
    schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
}

/// Mark each request body required when its schema requires a field.
fn mark_required_bodies(paths: &mut Map<String, Value>, defs: &Map<String, Value>) {
    for item in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in item.values_mut() {
            let Some(body) = op.get_mut("requestBody") else {
                continue;
            };
            let schema = &body["content"]["application/json"]["schema"];
            let required = requires_fields(schema, defs);
            body["required"] = Value::Bool(required);
        }
    }
}

/// Build the OpenAPI 3.1 document; also returns the component names whose request and reply
/// schemas differ (the request form is kept; there should be none).
pub fn build_document(
    info: &ApiInfo,
    docs: &[RouteDoc],
    operator: OperatorRoutes,
) -> (Value, Vec<String>) {
    let mut req = component_generator();
    let mut resp = component_generator_serialize();
    let mut paths = Map::new();
    for d in docs {
        let is_operator = operator(&d.method, &sample_path(d));
        let op = operation(d, is_operator, &mut req, &mut resp);
        let entry = paths.entry(d.openapi_path()).or_insert_with(|| json!({}));
        entry[d.method.as_str().to_ascii_lowercase()] = op;
    }
    let (schemas, conflicts) = merge_components(req, resp);
    mark_required_bodies(&mut paths, &schemas);
    let tags: Vec<Value> = TAGS
        .iter()
        .filter(|(t, _)| docs.iter().any(|d| d.tag == *t))
        .map(|(t, desc)| json!({"name": t, "description": desc}))
        .collect();
    debug_assert!(
        docs.iter().all(|d| TAGS.iter().any(|(t, _)| *t == d.tag)),
        "a route uses an unlisted tag"
    );
    let error = |what: &str| json!({"description": what, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApiError"}}}});
    let doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": info.title,
            "description": info.description,
            "version": OPENAPI_API_VERSION,
            "x-environment-version": info.environment_version,
        },
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {
                "ClientError": error("Bad input, unknown session or resource, refused origin or operator call, rate limit (with Retry-After), body too large or late."),
                "ServerError": error("Internal error or capacity exhausted (503)."),
            },
            "securitySchemes": {"adminKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "The operator key (`ADMIN_API_KEY`, or the key file the server named at start)."}},
        },
    });
    (doc, conflicts)
}

/// The reference as served: JSON and HTML, rendered once.
struct Reference {
    json: Bytes,
    html: Bytes,
}

fn with_headers(body: Bytes, content_type: &'static str, csp: Option<&'static str>) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(csp) = csp {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(csp),
        );
    }
    resp
}

fn reference_docs() -> [(&'static str, RouteDoc); 3] {
    [
        (
            "/openapi.json",
            RouteDoc::new("reference", "This OpenAPI 3.1 document")
                .describe("Every route the server mounts, built from the same route table as the router.")
                .reply_with(crate::route_table::any_object, "The OpenAPI document"),
        ),
        (
            "/docs",
            RouteDoc::new("reference", "API reference page (HTML)")
                .describe("The OpenAPI document rendered as one HTML page: routes by tag with parameters, bodies and replies, then every schema. No script and no external resource; it works offline.")
                .status(200, "text/html; charset=utf-8", None, "The reference page"),
        ),
        (
            "/docs/docs.css",
            RouteDoc::new("reference", "Stylesheet of the reference page")
                .status(200, "text/css; charset=utf-8", None, "The stylesheet"),
        ),
    ]
}

/// Finish an application's route table: add `/openapi.json`, `/docs` and its stylesheet, build
/// the document from every documented route, and return the router.
pub fn with_reference(routes: ApiRoutes, info: ApiInfo, operator: OperatorRoutes) -> Router {
    let cell: Arc<OnceLock<Reference>> = Arc::new(OnceLock::new());
    let [(p_json, d_json), (p_html, d_html), (p_css, d_css)] = reference_docs();
    let (c1, c2) = (cell.clone(), cell.clone());
    let routes = routes
        .get(p_json, d_json, move || {
            let c = c1.clone();
            async move {
                let body = c.get().map(|r| r.json.clone()).unwrap_or_default();
                with_headers(body, "application/json", None)
            }
        })
        .get(p_html, d_html, move || {
            let c = c2.clone();
            async move {
                let body = c.get().map(|r| r.html.clone()).unwrap_or_default();
                with_headers(
                    body,
                    "text/html; charset=utf-8",
                    Some(DOCS_CONTENT_SECURITY_POLICY),
                )
            }
        })
        .get(p_css, d_css, || async {
            with_headers(
                Bytes::from_static(DOCS_CSS.as_bytes()),
                "text/css; charset=utf-8",
                None,
            )
        });
    let (router, docs) = routes.into_parts();
    let (doc, conflicts) = build_document(&info, &docs, operator);
    if !conflicts.is_empty() {
        tracing::warn!(
            ?conflicts,
            "component schemas differ between request and reply"
        );
    }
    let html = crate::docs_page::render(&doc);
    let json = serde_json::to_vec(&doc).unwrap_or_default();
    let _ = cell.set(Reference {
        json: Bytes::from(json),
        html: Bytes::from(html),
    });
    router
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn never(_: &Method, _: &str) -> bool {
        false
    }

    #[test]
    fn sample_paths_and_operation_ids() {
        let (_, docs) = ApiRoutes::<()>::new()
            .get(
                "/runs/{run_id}/episodes/{idx}",
                RouteDoc::new("reports", "ep").path_param(
                    "idx",
                    json!({"type": "integer"}),
                    "index",
                    json!(0),
                ),
                || async {},
            )
            .get("/", RouteDoc::new("service", "root"), || async {})
            .into_parts();
        assert_eq!(sample_path(&docs[0]), "/runs/x/episodes/0");
        assert_eq!(operation_id(&docs[0]), "get_runs_by_run_id_episodes_by_idx");
        assert_eq!(sample_path(&docs[1]), "/");
        assert_eq!(operation_id(&docs[1]), "get_root");
        let ui = RouteDoc {
            path: "/ui/",
            ..RouteDoc::new("workbench", "page")
        };
        assert_eq!(operation_id(&ui), "get_ui_index");
    }

    #[test]
    fn every_path_parameter_is_documented_and_errors_use_the_error_shape() {
        let (_, docs) = ApiRoutes::<()>::new()
            .get("/a/{id}", RouteDoc::new("other", "a"), || async {})
            .into_parts();
        let info = ApiInfo {
            title: "t".into(),
            description: "d".into(),
            environment_version: None,
        };
        let (doc, conflicts) = build_document(&info, &docs, never);
        assert!(conflicts.is_empty());
        let op = &doc["paths"]["/a/{id}"]["get"];
        assert_eq!(op["parameters"][0]["name"], "id");
        assert_eq!(op["parameters"][0]["in"], "path");
        assert_eq!(op["parameters"][0]["required"], true);
        assert_eq!(
            op["responses"]["4XX"]["$ref"],
            "#/components/responses/ClientError"
        );
        assert!(doc["components"]["schemas"]["ApiError"].is_object());
    }
}
