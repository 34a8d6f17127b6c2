//! The Financial Audit environment's adapter: its HTTP routes ([`http`]) and the OpenEnv
//! protocol (`/ws`, `/mcp`, `/metadata`, `/schema`) over `audit_env::AuditEnv` ([`service`]),
//! sharing one session manager, with the API reference (`/openapi.json`, `/docs`) built from the
//! same route table, behind the shared security guard.

pub mod http;
pub mod service;

pub use http::{is_operator_route, AuditConfig};
pub use service::AuditService;

use crate::openenv::protocol_routes;
use audit_env::AuditEnv;
use std::sync::Arc;

/// The audit application: its own HTTP routes plus the OpenEnv protocol routes, one session
/// manager, behind the security guard.
pub fn router(
    config: AuditConfig,
    server: &crate::config::ServerConfig,
    shutdown: &crate::shutdown::Shutdown,
) -> crate::App {
    router_with(
        config,
        server,
        shutdown,
        crate::route_table::ApiRoutes::new(),
    )
}

/// The audit application with `last` (routes with their own state, such as the workbench)
/// mounted after its own routes and documented with them.
pub fn router_with(
    config: AuditConfig,
    server: &crate::config::ServerConfig,
    shutdown: &crate::shutdown::Shutdown,
    last: crate::route_table::ApiRoutes,
) -> crate::App {
    let service = Arc::new(AuditService::new(config.env_config(), server, shutdown));
    // The default session exists from the start (it is reserved outside the capacity).
    let env_config = config.env_config();
    let _ = service
        .sessions
        .get_or_create(crate::sessions::DEFAULT_SESSION, None, || {
            AuditEnv::new(env_config)
        });
    let info = crate::openapi::ApiInfo::of(&*service);
    let routes = http::routes(config, service.clone())
        .merge(protocol_routes::<AuditService>().with_state(service))
        .merge(last);
    let routes = crate::openapi::with_reference(routes, info, is_operator_route)
        .fallback(http::fallback)
        .method_not_allowed_fallback(http::method_not_allowed);
    crate::security::Guarded::new(
        routes,
        crate::security::Guard::marking_operator_access(server.security.clone(), is_operator_route),
    )
}
