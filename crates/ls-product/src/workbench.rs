//! The workbench (`ls-ui`, `/ui/`) as documented routes: mounted last in both applications (it
//! lives here, not in the protocol layer, because the workbench's catalog names the offline
//! agents of `ls-agents`).

use axum::http::Method;
use ls_server::route_table::{ApiRoutes, RouteDoc};
use serde_json::json;

/// The workbench's routes (`ls_ui::routes`), documented from what the workbench says it serves.
pub fn routes<S: Clone + Send + Sync + 'static>() -> ApiRoutes<S> {
    ls_ui::routes()
        .into_iter()
        .fold(ApiRoutes::new(), |table, ui| {
            let mut doc =
                RouteDoc::new("workbench", ui.summary).status(ui.status, ui.media, None, "");
            if ui.path.contains("{*path}") {
                doc = doc.path_param(
                    "path",
                    json!({"type": "string"}),
                    "Asset path under `/ui/` (may contain `/`)",
                    json!("app.css"),
                );
            }
            table.on(Method::GET, ui.path, doc, ui.route)
        })
}
