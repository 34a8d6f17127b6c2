//! OpenEnv protocol surface: WebSocket sessions at `/ws` and the discovery endpoints.
use crate::Shared;
use axum::Router;

/// Routes of the OpenEnv protocol surface.
pub fn routes() -> Router<Shared> {
    Router::new()
}
