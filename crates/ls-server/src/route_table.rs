//! The route table: every HTTP route is registered together with its documentation, so the
//! axum [`Router`] and the OpenAPI document (`/openapi.json`, `/docs`) are built from one list
//! and cannot drift apart. A route added without a [`RouteDoc`] does not compile; a documented
//! route that is not mounted cannot exist, because documenting a route *is* mounting it.
//!
//! Schemas are functions of a schemars generator ([`SchemaFn`]), so request and reply bodies are
//! the JSON Schemas of the Rust types the handlers parse and serialize (`RouteDoc::body::<T>()`,
//! `RouteDoc::reply::<T>()`); replies that are assembled as JSON in the handler are described by
//! an inline schema that may still reference typed components.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Value};

/// A schema of a request or reply body, built against the document's generator (so typed
/// components land in `#/components/schemas/`).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The schema of a Rust type, as a `$ref` to its component.
pub fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// Any JSON object (a reply whose fields are documented in prose).
pub fn any_object(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "object"})
}

/// Where a parameter travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamIn {
    Path,
    Query,
    Header,
}

impl ParamIn {
    pub fn as_str(self) -> &'static str {
        match self {
            ParamIn::Path => "path",
            ParamIn::Query => "query",
            ParamIn::Header => "header",
        }
    }
}

/// One documented parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: &'static str,
    pub location: ParamIn,
    pub required: bool,
    pub description: &'static str,
    /// JSON Schema of the value (`{"type": "string"}` and the like).
    pub schema: Value,
    /// A value the route accepts (used by the docs page and the route probes).
    pub example: Option<Value>,
}

/// A body: media type, schema and a line of description.
#[derive(Debug, Clone)]
pub struct BodyDoc {
    pub media: &'static str,
    pub schema: Option<SchemaFn>,
    pub description: &'static str,
}

/// The `X-Session-Id` header: which named session the request acts in.
pub const SESSION_HEADER_DOC: &str = "Named session to act in (1-128 characters); the default session when absent. Also accepted as `session_id` in the body or query where the route says so.";

/// The documentation of one route (method and path are set when it is registered).
#[derive(Debug, Clone)]
pub struct RouteDoc {
    pub method: Method,
    /// The axum path (`/runs/{run_id}`; a wildcard `{*path}` is `{path}` in OpenAPI).
    pub path: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    pub description: Option<&'static str>,
    pub params: Vec<Param>,
    pub request: Option<BodyDoc>,
    /// Success replies by status code (200 with any JSON object when none is given).
    pub responses: Vec<(u16, BodyDoc)>,
}

impl RouteDoc {
    /// A route of `tag` with a one-line summary.
    pub fn new(tag: &'static str, summary: &'static str) -> Self {
        Self {
            method: Method::GET,
            path: "",
            tag,
            summary,
            description: None,
            params: Vec::new(),
            request: None,
            responses: Vec::new(),
        }
    }

    /// A longer description (Markdown-ish prose, rendered as text).
    pub fn describe(mut self, text: &'static str) -> Self {
        self.description = Some(text);
        self
    }

    /// The `X-Session-Id` header.
    pub fn session(self) -> Self {
        self.header("X-Session-Id", SESSION_HEADER_DOC)
    }

    /// An optional header.
    pub fn header(mut self, name: &'static str, description: &'static str) -> Self {
        self.params.push(Param {
            name,
            location: ParamIn::Header,
            required: false,
            description,
            schema: json!({"type": "string"}),
            example: None,
        });
        self
    }

    /// A query parameter (`schema` is its JSON Schema; `required` when the route needs it).
    pub fn query(
        mut self,
        name: &'static str,
        schema: Value,
        required: bool,
        description: &'static str,
    ) -> Self {
        self.params.push(Param {
            name,
            location: ParamIn::Query,
            required,
            description,
            schema,
            example: None,
        });
        self
    }

    /// Describe a path parameter (every `{name}` of the path is documented; this sets its
    /// schema, description and an example value).
    pub fn path_param(
        mut self,
        name: &'static str,
        schema: Value,
        description: &'static str,
        example: Value,
    ) -> Self {
        self.params.push(Param {
            name,
            location: ParamIn::Path,
            required: true,
            description,
            schema,
            example: Some(example),
        });
        self
    }

    /// A JSON request body of type `T` (as the handler deserializes it).
    pub fn body<T: JsonSchema>(self, description: &'static str) -> Self {
        self.body_with(schema_of::<T>, description)
    }

    /// A JSON request body described by `schema`.
    pub fn body_with(mut self, schema: SchemaFn, description: &'static str) -> Self {
        self.request = Some(BodyDoc {
            media: "application/json",
            schema: Some(schema),
            description,
        });
        self
    }

    /// A 200 JSON reply of type `T` (as the handler serializes it).
    pub fn reply<T: JsonSchema>(self, description: &'static str) -> Self {
        self.reply_with(schema_of::<T>, description)
    }

    /// A 200 JSON reply described by `schema`.
    pub fn reply_with(self, schema: SchemaFn, description: &'static str) -> Self {
        self.status(200, "application/json", Some(schema), description)
    }

    /// A success reply with its status, media type and optional schema.
    pub fn status(
        mut self,
        code: u16,
        media: &'static str,
        schema: Option<SchemaFn>,
        description: &'static str,
    ) -> Self {
        self.responses.push((
            code,
            BodyDoc {
                media,
                schema,
                description,
            },
        ));
        self
    }

    /// The path parameters named in the path template, in order.
    pub fn path_names(&self) -> Vec<&'static str> {
        path_names(self.path)
    }

    /// The OpenAPI path key (`{*path}` becomes `{path}`).
    pub fn openapi_path(&self) -> String {
        self.path.replace("{*", "{")
    }
}

fn path_names(path: &'static str) -> Vec<&'static str> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|n| n.trim_start_matches('*'))
        .collect()
}

/// An axum router and the documentation of every route it holds.
pub struct ApiRoutes<S = ()> {
    router: Router<S>,
    docs: Vec<RouteDoc>,
}

impl<S: Clone + Send + Sync + 'static> Default for ApiRoutes<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Clone + Send + Sync + 'static> ApiRoutes<S> {
    pub fn new() -> Self {
        Self {
            router: Router::new(),
            docs: Vec::new(),
        }
    }

    /// Mount `GET path`, documented by `doc`.
    pub fn get<H, T>(self, path: &'static str, doc: RouteDoc, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.on(Method::GET, path, doc, on(MethodFilter::GET, handler))
    }

    /// Mount `POST path`, documented by `doc`.
    pub fn post<H, T>(self, path: &'static str, doc: RouteDoc, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.on(Method::POST, path, doc, on(MethodFilter::POST, handler))
    }

    /// Mount `DELETE path`, documented by `doc`.
    pub fn delete<H, T>(self, path: &'static str, doc: RouteDoc, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.on(Method::DELETE, path, doc, on(MethodFilter::DELETE, handler))
    }

    /// Mount a prepared method router that answers `method` only (for routers built in another
    /// crate, such as the workbench's).
    pub fn on(
        mut self,
        method: Method,
        path: &'static str,
        mut doc: RouteDoc,
        route: MethodRouter<S>,
    ) -> Self {
        debug_assert!(
            !self
                .docs
                .iter()
                .any(|d| d.method == method && d.path == path),
            "{method} {path} registered twice"
        );
        debug_assert!(
            doc.params
                .iter()
                .filter(|p| p.location == ParamIn::Path)
                .all(|p| path_names(path).contains(&p.name)),
            "{path}: a documented path parameter is not in the path"
        );
        doc.method = method;
        doc.path = path;
        self.router = self.router.route(path, route);
        self.docs.push(doc);
        self
    }

    /// Both route sets (paths may be shared by different methods).
    pub fn merge(mut self, other: ApiRoutes<S>) -> Self {
        for d in &other.docs {
            debug_assert!(
                !self
                    .docs
                    .iter()
                    .any(|e| e.method == d.method && e.path == d.path),
                "{} {} registered twice",
                d.method,
                d.path
            );
        }
        self.router = self.router.merge(other.router);
        self.docs.extend(other.docs);
        self
    }

    /// Transform the router (layers, state) and keep the documentation.
    pub fn map_router<S2>(self, f: impl FnOnce(Router<S>) -> Router<S2>) -> ApiRoutes<S2> {
        ApiRoutes {
            router: f(self.router),
            docs: self.docs,
        }
    }

    /// Provide the state; see [`Router::with_state`].
    pub fn with_state<S2>(self, state: S) -> ApiRoutes<S2> {
        self.map_router(|r| r.with_state(state))
    }

    pub fn docs(&self) -> &[RouteDoc] {
        &self.docs
    }

    pub fn into_parts(self) -> (Router<S>, Vec<RouteDoc>) {
        (self.router, self.docs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_names_include_wildcards() {
        assert_eq!(
            path_names("/runs/{run_id}/episodes/{idx}"),
            ["run_id", "idx"]
        );
        assert_eq!(path_names("/ui/{*path}"), ["path"]);
        assert!(path_names("/health").is_empty());
        let d = ApiRoutes::<()>::new().get("/ui/{*path}", RouteDoc::new("t", "s"), || async {});
        assert_eq!(d.docs()[0].openapi_path(), "/ui/{path}");
        assert_eq!(d.docs()[0].method, Method::GET);
    }

    /// Routes are mounted only here, so none can be served without its documentation.
    #[test]
    fn no_module_mounts_a_route_outside_the_table() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&src, &mut files);
        assert!(files.len() > 10);
        let mounting = [
            ".route(",
            "Router::new()",
            ".nest(",
            ".route_service(",
            ".nest_service(",
        ];
        for f in files.iter().filter(|f| !f.ends_with("route_table.rs")) {
            let text = std::fs::read_to_string(f).unwrap();
            for m in mounting {
                assert!(!text.contains(m), "{} mounts routes with {m}", f.display());
            }
        }
    }

    #[test]
    fn merged_tables_keep_every_route_and_its_method() {
        let a = ApiRoutes::<()>::new().get("/x", RouteDoc::new("t", "get x"), || async {});
        let b = ApiRoutes::<()>::new().post("/x", RouteDoc::new("t", "post x"), || async {});
        let (_, docs) = a.merge(b).into_parts();
        let got: Vec<_> = docs.iter().map(|d| (d.method.clone(), d.path)).collect();
        assert_eq!(got, [(Method::GET, "/x"), (Method::POST, "/x")]);
    }
}
