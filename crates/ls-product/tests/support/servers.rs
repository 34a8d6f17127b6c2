//! Both environments' servers on ephemeral ports as the binary composes them (ControlBench: the
//! protocol router with the product routes and the workbench, [`ls_product::app`]; audit:
//! [`ls_product::audit_app`]): with the default configuration (`api_reference.rs`, `ui.rs`), or
//! ControlBench with a track mode, a report store and an operator key (the product route tests).
//! The serving code is `ls-server`'s test support, included here.

// Each test binary that includes this module calls only some of its servers.
#![allow(dead_code)]

#[path = "../../../ls-server/tests/support/servers.rs"]
mod protocol;

use ls_env::{EnvConfig, TrackMode};
use ls_product::ReportStore;
use ls_server::ServerConfig;

/// ControlBench with the embedded fixtures and the default configuration.
pub async fn controlbench() -> String {
    protocol::controlbench_composed(
        EnvConfig::default().track_mode,
        ServerConfig::default(),
        |state| ls_product::app(state, ReportStore::disabled()),
    )
    .await
}

/// ControlBench with the embedded fixtures in `mode`, serving `store`, with `admin_key` as the
/// operator key (16 sessions, 10 minutes idle).
pub async fn controlbench_with(
    mode: TrackMode,
    store: ReportStore,
    admin_key: Option<&str>,
) -> String {
    protocol::controlbench_composed(mode, protocol::route_test_config(admin_key), |state| {
        ls_product::app(state, store)
    })
    .await
}

/// The audit environment with the default configuration.
pub async fn audit() -> String {
    protocol::audit_composed(ls_product::audit_app).await
}
