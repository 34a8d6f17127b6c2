//! Server configuration, shared by both environments. The binary parses it once (flags and
//! environment variables, see docs/server.md) and passes it down; nothing in this crate reads the
//! process environment.

use std::time::Duration;

/// Everything the protocol layer needs to serve one environment.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Most named HTTP sessions (`--max-sessions`); the default session is reserved outside it.
    pub max_sessions: usize,
    /// An idle session, campaign or self-improvement run expires after this long
    /// (`--session-idle-secs`).
    pub session_idle: Duration,
    pub ws: crate::ws_config::WsConfig,
    pub security: SecurityConfig,
    pub timeouts: Timeouts,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_sessions: 1024,
            session_idle: Duration::from_secs(1800),
            ws: Default::default(),
            security: Default::default(),
            timeouts: Default::default(),
        }
    }
}

/// Default of [`Timeouts::max_connections`]: well above a trainer's or load test's connections
/// and the slow clients the header-read timeout reclaims, and a bound on per-connection buffers.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;

/// Connection limits: the timeouts and the cap on open connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// A connection waiting for a request head (a new connection, or a keep-alive connection
    /// between requests) is closed after this long: hyper arms the header-read timer whenever the
    /// connection waits for a head, so this is also the keep-alive idle timeout.
    pub header_read: Duration,
    /// A request body must arrive completely within this long (408 otherwise).
    pub body_read: Duration,
    /// After SIGTERM/SIGINT, in-flight requests get this long to finish.
    pub shutdown_grace: Duration,
    /// Most HTTP connections open at once (`--max-connections`, at least 1); past it, new
    /// connections wait in the listen backlog until one closes. A connection upgraded to a
    /// WebSocket leaves the count (WebSocket sessions have their own limits).
    pub max_connections: usize,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            header_read: Duration::from_secs(15),
            body_read: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
        }
    }
}

/// Origin, Host, admin key and rate limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityConfig {
    /// `CORS_ORIGINS`: origins allowed to call the server from a browser (`*` for any). Empty
    /// (the default): CORS is off and a request carrying any `Origin` other than the server's
    /// own is refused.
    pub cors_origins: Vec<String>,
    /// `ALLOWED_HOSTS`: extra `Host` names accepted on a loopback bind (DNS-rebinding guard).
    pub allowed_hosts: Vec<String>,
    /// Whether the server is bound to a loopback address (set by the binary from `--host`);
    /// only then is the `Host` header checked.
    pub loopback_bind: bool,
    /// `ADMIN_API_KEY`: operator routes need `X-API-Key`; unset, they answer loopback clients only.
    pub admin_api_key: Option<String>,
    /// `TRUST_PROXY_HEADERS`: take the client address from `X-Forwarded-For` / `X-Real-IP`.
    pub trust_proxy_headers: bool,
    /// `RATE_LIMIT_PER_MIN`: requests per minute per client address.
    pub client_rate_per_min: u32,
    /// `RATE_LIMIT_SESSION_PER_MIN`: requests per minute per session id.
    pub session_rate_per_min: u32,
    /// `RATE_LIMIT_LOOPBACK`: also throttle loopback clients (off: local trainers run unthrottled).
    pub rate_limit_loopback: bool,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            cors_origins: vec![],
            allowed_hosts: vec![],
            loopback_bind: true,
            admin_api_key: None,
            trust_proxy_headers: false,
            client_rate_per_min: 6000,
            session_rate_per_min: 1200,
            rate_limit_loopback: false,
        }
    }
}

/// Split a comma-separated list, trimming and dropping empty items.
pub fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|o| o.trim().to_owned())
        .filter(|o| !o.is_empty())
        .collect()
}

impl SecurityConfig {
    /// Check the lists: every origin must be a valid header value (or `*`).
    pub fn validate(&self) -> Result<(), String> {
        for o in &self.cors_origins {
            if o != "*" && axum::http::HeaderValue::from_str(o).is_err() {
                return Err(format!(
                    "CORS_ORIGINS: invalid origin '{}'",
                    crate::error::prefix(o)
                ));
            }
        }
        if self.client_rate_per_min == 0 || self.session_rate_per_min == 0 {
            return Err("rate limits must be at least 1 per minute".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_validation() {
        assert_eq!(
            split_list(" https://a.example, ,https://b.example "),
            vec!["https://a.example", "https://b.example"]
        );
        let mut c = SecurityConfig {
            cors_origins: vec!["bad\norigin".into()],
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("CORS_ORIGINS"));
        c.cors_origins = vec!["*".into(), "https://a.example".into()];
        assert!(c.validate().is_ok());
        c.client_rate_per_min = 0;
        assert!(c.validate().is_err());
    }
}
