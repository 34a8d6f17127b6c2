//! Report-backed product endpoints (leaderboard, benchmark report, certify, summaries).
use crate::Shared;
use axum::Router;

/// Routes of the report-backed endpoints.
pub fn routes() -> Router<Shared> {
    Router::new()
}
