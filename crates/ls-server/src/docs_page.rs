//! `GET /docs`: the OpenAPI document rendered as one HTML page on the server. Routes are grouped
//! by tag, each with its parameters, request body and replies; every component schema follows
//! with its properties and its JSON Schema. The page links only to its own origin (the
//! stylesheet, `/openapi.json`, anchors): no script, no font, no CDN.

use serde_json::{Map, Value};
use std::fmt::Write;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];
/// Most enum values listed inline before "…".
const MAX_ENUM_SHOWN: usize = 40;

/// Escape text for HTML element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Prose with `code` spans, one `<p>` per blank-line-separated paragraph.
fn prose(s: &str) -> String {
    let mut out = String::new();
    for para in s.split("\n\n").filter(|p| !p.trim().is_empty()) {
        out.push_str("<p>");
        for (i, part) in para.split('`').enumerate() {
            if i % 2 == 1 {
                let _ = write!(out, "<code>{}</code>", esc(part));
            } else {
                out.push_str(&esc(part));
            }
        }
        out.push_str("</p>");
    }
    out
}

/// An anchor id for a component schema name.
fn schema_anchor(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("schema-{safe}")
}

fn ref_name(s: &Value) -> Option<&str> {
    s.get("$ref")?
        .as_str()?
        .strip_prefix("#/components/schemas/")
}

fn joined(items: &[Value], sep: &str) -> String {
    items.iter().map(type_label).collect::<Vec<_>>().join(sep)
}

/// A one-line, linked description of a schema's type.
fn type_label(s: &Value) -> String {
    if let Some(name) = ref_name(s) {
        return format!("<a href=\"#{}\">{}</a>", schema_anchor(name), esc(name));
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        let mut shown: Vec<String> = values
            .iter()
            .take(MAX_ENUM_SHOWN)
            .map(|v| format!("<code>{}</code>", esc(&v.to_string())))
            .collect();
        if values.len() > MAX_ENUM_SHOWN {
            shown.push("…".into());
        }
        return format!("one of {}", shown.join(", "));
    }
    if let Some(c) = s.get("const") {
        return format!("<code>{}</code>", esc(&c.to_string()));
    }
    for (key, sep) in [("anyOf", " | "), ("oneOf", " | "), ("allOf", " &amp; ")] {
        if let Some(items) = s.get(key).and_then(Value::as_array) {
            return joined(items, sep);
        }
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => {
            return if s.as_bool() == Some(false) {
                "nothing".into()
            } else {
                "any".into()
            }
        }
    };
    let labels: Vec<String> = types.iter().map(|t| single_type(t, s)).collect();
    labels.join(" | ")
}

fn single_type(t: &str, s: &Value) -> String {
    let mut label = match t {
        "array" => match s.get("items") {
            Some(items) => format!("array of {}", type_label(items)),
            None => "array".into(),
        },
        "object" => match s.get("additionalProperties") {
            Some(ap) if ap.is_object() && s.get("properties").is_none() => {
                format!("map of {}", type_label(ap))
            }
            _ => "object".into(),
        },
        other => esc(other),
    };
    if t != "null" {
        if let Some(f) = s.get("format").and_then(Value::as_str) {
            let _ = write!(label, " ({})", esc(f));
        }
    }
    label
}

/// The property table of an object schema (of the referenced component, for a `$ref`), then the
/// schema itself (collapsed; not repeated for a bare `$ref`, whose component is listed below).
fn schema_block(doc: &Value, s: &Value) -> String {
    let mut out = format!("<p class=\"type\">{}</p>", type_label(s));
    let target = ref_name(s)
        .and_then(|n| doc["components"]["schemas"].get(n))
        .unwrap_or(s);
    if let Some(props) = target.get("properties").and_then(Value::as_object) {
        out.push_str(&property_table(target, props));
    }
    // A bare `$ref` is listed below, and `{"type": "object"}` says nothing more than its label.
    let trivial = s.as_object().is_some_and(|m| m.keys().all(|k| k == "type"));
    if ref_name(s).is_none() && !trivial {
        let pretty = serde_json::to_string_pretty(s).unwrap_or_default();
        let _ = write!(
            out,
            "<details><summary>JSON Schema</summary><pre>{}</pre></details>",
            esc(&pretty)
        );
    }
    out
}

fn property_table(s: &Value, props: &Map<String, Value>) -> String {
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = String::from(
        "<table><thead><tr><th>field</th><th>type</th><th>required</th><th>description</th></tr></thead><tbody>",
    );
    for (name, p) in props {
        let desc = p.get("description").and_then(Value::as_str).unwrap_or("");
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            type_label(p),
            if required.contains(&name.as_str()) {
                "yes"
            } else {
                ""
            },
            prose(desc)
        );
    }
    out.push_str("</tbody></table>");
    out
}

fn parameters_table(params: &[Value]) -> String {
    let mut out = String::from(
        "<h4>Parameters</h4><table><thead><tr><th>name</th><th>in</th><th>type</th><th>required</th><th>description</th></tr></thead><tbody>",
    );
    for p in params {
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(s("name")),
            esc(s("in")),
            p.get("schema").map(type_label).unwrap_or_default(),
            if p.get("required") == Some(&Value::Bool(true)) {
                "yes"
            } else {
                ""
            },
            prose(s("description"))
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The media types and schemas of a `content` object.
fn content_block(doc: &Value, content: Option<&Value>) -> String {
    let mut out = String::new();
    for (media, m) in content.and_then(Value::as_object).into_iter().flatten() {
        let _ = write!(out, "<p class=\"media\"><code>{}</code></p>", esc(media));
        if let Some(s) = m.get("schema") {
            out.push_str(&schema_block(doc, s));
        }
    }
    out
}

fn responses_block(doc: &Value, responses: &Map<String, Value>) -> String {
    let mut out = String::from("<h4>Responses</h4><dl class=\"responses\">");
    for (code, r) in responses {
        // A shared response (`components/responses`): one line linking its schema.
        let shared = r
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|p| p.strip_prefix("#/components/responses/"))
            .and_then(|n| doc["components"]["responses"].get(n));
        let _ = write!(out, "<dt><code>{}</code></dt><dd>", esc(code));
        match shared {
            Some(sh) => {
                let desc = sh.get("description").and_then(Value::as_str).unwrap_or("");
                let schema = &sh["content"]["application/json"]["schema"];
                let _ = write!(out, "<p>{} {}</p>", type_label(schema), esc(desc));
            }
            None => {
                let desc = r.get("description").and_then(Value::as_str).unwrap_or("");
                out.push_str(&prose(desc));
                out.push_str(&content_block(doc, r.get("content")));
            }
        }
        out.push_str("</dd>");
    }
    out.push_str("</dl>");
    out
}

fn operation_block(doc: &Value, path: &str, method: &str, op: &Value) -> String {
    let s = |k: &str| op.get(k).and_then(Value::as_str).unwrap_or("");
    let mut out = format!(
        "<article class=\"op\" id=\"{}\"><h3><span class=\"method {m}\">{}</span> <code>{}</code></h3><p class=\"summary\">{}</p>",
        esc(s("operationId")),
        esc(&method.to_ascii_uppercase()),
        esc(path),
        prose(s("summary")),
        m = esc(method),
    );
    if op.get("x-operator") == Some(&Value::Bool(true)) {
        out.push_str("<p class=\"badge\">operator route</p>");
    }
    out.push_str(&prose(s("description")));
    if let Some(params) = op.get("parameters").and_then(Value::as_array) {
        out.push_str(&parameters_table(params));
    }
    if let Some(body) = op.get("requestBody") {
        let required = body.get("required") == Some(&Value::Bool(true));
        out.push_str(if required {
            "<h4>Request body (required)</h4>"
        } else {
            "<h4>Request body (optional: every field has a default)</h4>"
        });
        out.push_str(&prose(
            body.get("description")
                .and_then(Value::as_str)
                .unwrap_or(""),
        ));
        out.push_str(&content_block(doc, body.get("content")));
    }
    if let Some(r) = op.get("responses").and_then(Value::as_object) {
        out.push_str(&responses_block(doc, r));
    }
    out.push_str("</article>");
    out
}

/// Every (tag, path, method, operation) in document order.
fn operations(doc: &Value) -> Vec<(String, &str, &'static str, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for m in METHODS {
            if let Some(op) = item.get(m) {
                let tag = op["tags"][0].as_str().unwrap_or("other").to_owned();
                out.push((tag, path.as_str(), m, op));
            }
        }
    }
    out
}

fn header_block(doc: &Value) -> String {
    let info = &doc["info"];
    let s = |k: &str| info.get(k).and_then(Value::as_str).unwrap_or("");
    let mut out = format!(
        "<header><h1>{} — API reference</h1>{}<p>OpenAPI {} · API version {}",
        esc(s("title")),
        prose(s("description")),
        esc(doc["openapi"].as_str().unwrap_or("")),
        esc(s("version"))
    );
    if let Some(v) = info.get("x-environment-version").and_then(Value::as_str) {
        let _ = write!(out, " · server {}", esc(v));
    }
    out.push_str(" · machine-readable: <a href=\"/openapi.json\">/openapi.json</a>");
    if doc["paths"].get("/ui/").is_some() {
        out.push_str(" · workbench: <a href=\"/ui/\">/ui/</a>");
    }
    out.push_str(". Errors everywhere have one shape: <a href=\"#schema-ApiError\">ApiError</a>.</p></header>");
    out
}

fn tag_names(doc: &Value) -> Vec<(String, String)> {
    doc["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_owned(),
                t["description"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn nav_block(tags: &[(String, String)], ops: &[(String, &str, &str, &Value)]) -> String {
    let mut out = String::from("<nav><h2>Routes</h2>");
    for (tag, _) in tags {
        let _ = write!(out, "<h3><a href=\"#tag-{0}\">{0}</a></h3><ul>", esc(tag));
        for (t, path, m, op) in ops.iter().filter(|o| &o.0 == tag) {
            let _ = write!(
                out,
                "<li><a href=\"#{}\"><span class=\"method {m}\">{}</span> {}</a></li>",
                esc(op["operationId"].as_str().unwrap_or("")),
                esc(&m.to_ascii_uppercase()),
                esc(path),
            );
            debug_assert_eq!(t, tag);
        }
        out.push_str("</ul>");
    }
    out.push_str("<h3><a href=\"#schemas\">schemas</a></h3></nav>");
    out
}

fn schemas_block(doc: &Value) -> String {
    let mut out = String::from("<section id=\"schemas\"><h2>Schemas</h2>");
    for (name, s) in doc["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let _ = write!(
            out,
            "<article class=\"schema\" id=\"{}\"><h3>{}</h3>{}{}</article>",
            schema_anchor(name),
            esc(name),
            prose(s.get("description").and_then(Value::as_str).unwrap_or("")),
            schema_block(doc, s)
        );
    }
    out.push_str("</section>");
    out
}

/// The whole page.
pub fn render(doc: &Value) -> String {
    let title = doc["info"]["title"].as_str().unwrap_or("API");
    let tags = tag_names(doc);
    let ops = operations(doc);
    let mut out = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{} — API reference</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/docs/docs.css\"></head><body>",
        esc(title)
    );
    out.push_str(&header_block(doc));
    out.push_str("<div class=\"layout\">");
    out.push_str(&nav_block(&tags, &ops));
    out.push_str("<main>");
    for (tag, desc) in &tags {
        let _ = write!(
            out,
            "<section class=\"tag\" id=\"tag-{}\"><h2>{}</h2>{}",
            esc(tag),
            esc(tag),
            prose(desc)
        );
        for (_, path, m, op) in ops.iter().filter(|o| &o.0 == tag) {
            out.push_str(&operation_block(doc, path, m, op));
        }
        out.push_str("</section>");
    }
    out.push_str(&schemas_block(doc));
    out.push_str("</main></div></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_markup_and_renders_code_spans() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(
            prose("use `<b>` here"),
            "<p>use <code>&lt;b&gt;</code> here</p>"
        );
    }

    #[test]
    fn type_labels_link_references_and_describe_compounds() {
        assert_eq!(
            type_label(&json!({"$ref": "#/components/schemas/Finding"})),
            "<a href=\"#schema-Finding\">Finding</a>"
        );
        assert_eq!(
            type_label(&json!({"type": "array", "items": {"type": "string"}})),
            "array of string"
        );
        assert_eq!(
            type_label(&json!({"type": ["number", "null"], "format": "double"})),
            "number (double) | null"
        );
        assert_eq!(
            type_label(&json!({"enum": ["a", "b"]})),
            "one of <code>&quot;a&quot;</code>, <code>&quot;b&quot;</code>"
        );
    }

    #[test]
    fn page_lists_routes_by_tag_and_every_schema() {
        let doc = json!({
            "openapi": "3.1.0",
            "info": {"title": "T <x>", "description": "d", "version": "1.0.0"},
            "tags": [{"name": "episode", "description": "e"}],
            "paths": {"/reset": {"post": {"tags": ["episode"], "summary": "Start", "operationId": "post_reset",
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Req"}}}},
                "responses": {"200": {"description": "OK"}}}}},
            "components": {"schemas": {"Req": {"type": "object", "properties": {"seed": {"type": "integer"}}, "required": ["seed"]}}},
        });
        let html = render(&doc);
        assert!(html.contains("T &lt;x&gt;"));
        assert!(html.contains("<code>/reset</code>"));
        assert!(html.contains("id=\"schema-Req\""));
        assert!(html.contains("href=\"#schema-Req\""));
        assert!(html.contains("<td><code>seed</code></td><td>integer</td><td>yes</td>"));
        assert!(!html.contains("<script"));
    }
}
